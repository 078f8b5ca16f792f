"""Weave-Web-4: a shop's refund desk, from the support portal's receipts through the orders database to the card
terminal and the day's refund batch.

Three apps, data flowing both ways between the channels. The support portal (open in Firefox) lists five refund
requests; each request's tab shows the customer's photographed receipt, a picture in dot-matrix text (receipt
number, date, the items returned, the total printed) that the portal serves only to the desktop account's
browser (a curl from the shell gets 403): the key evidence exists only as pixels. ~/orders.db (SQLite, the
workspace account's alone) has the orders, their items with final-sale flags, the payments and earlier refunds:
the refund policy (the instruction's rules, in order) needs a query per receipt. The decision is typed into the
portal's form; the portal answers an approval with an authorisation code drawn on the page. Each approved
refund is keyed into the Card Terminal (a Tk app, the desktop account's) with that code and the amount, and the
terminal shows a settlement reference as pixels and records the refund in a root-only file. The shell then
writes the day's batch (~/outbox/refunds.csv, a folder only the workspace account may write) with each
request's decision and the terminal's references. The plan, the pictures and the screen reading are in
_refund_desk.py; the portal server and Firefox's profile are the Web tasks' (_portal.py).

Scoring: the browser's last decision for every request (decision, amount or reason), every approved refund
settled at the terminal with the portal's code for it and the right amount and nothing else settled, and the
batch's rows and settlement references.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import DESKTOP_USER, HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.web import _refund_desk as rd
from weavegym.envs.tasks.web._portal import (
    PORTAL_USER,
    PROFILE,
    RECORDS,
    STATIC,
    USER_JS,
    record_deliverable,
    start_server,
    submissions,
    write_static,
)
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

DB = f"{HOME}/orders.db"
OUTBOX = f"{HOME}/outbox"
BATCH = f"{OUTBOX}/refunds.csv"
SITE_DIR = "/var/lib/weave-portal-site"  # the portal account's, 0700: no episode account can read a receipt
SERVER_LOG = "/var/log/portal-refunds.log"
FORM = "refunds"
APP_DIR = "/usr/local/share/cardterminal"
APP = f"{APP_DIR}/card_terminal.py"
TERMINAL_IN = f"{PRIVATE_DIR}/card-terminal.json"
TERMINAL_RECORD = f"{PRIVATE_DIR}/card-terminal.jsonl"
FIXTURES = "fixtures/refunds"
BANNER = (91, 44, 111)
PAGE_TITLE = "Refund requests — Support portal"
MAX_BATCH = 64 << 10

# ---- setup -------------------------------------------------------------------------------------------------


def _page(p: Mapping[str, Any], fixture: str) -> str:
    """A site fixture (the page or its stylesheet) with the day's date, tabs, banner colour and tab size."""
    tabs = "".join(f'<button type="button" tabindex="-1" data-request="{r["request"]}" '
                   f'>{r["request"]}</button>' for r in p["requests"])
    return (fixture.replace("{{TODAY}}", p["today"]).replace("{{TABS}}", tabs)
            .replace("{{BANNER}}", rd.hex_colour(BANNER)).replace("{{TAB_TOP}}", str(rd.TAB_BOX[1]))
            .replace("{{TAB_W}}", str(rd.TAB_BOX[2])).replace("{{TAB_H}}", str(rd.TAB_BOX[3])))


def _css(p: Mapping[str, Any], fixture: str) -> str:
    """The stylesheet, with a rule placing each tab (the page's policy allows no inline style)."""
    tabs = "".join(f"nav button:nth-child({i + 1}) {{ left: {rd.TAB_BOX[0] + i * rd.TAB_STEP}px; }}\n"
                   for i in range(len(p["requests"])))
    return _page(p, fixture) + tabs


def setup(ctx: SetupContext) -> Prepared:
    p = rd.plan(ctx.rng)
    port = 8100 + int(ctx.rng.integers(0, 800))
    # The workspace account's alone (0600): a terminal on the desktop runs as the desktop account and cannot read it.
    ctx.write_file(DB, database_bytes(rd.SCHEMA, rd.database_rows(p)), owner=WORKSPACE_USER, mode=0o600)
    # Only the shell may write the batch (a desktop terminal cannot: 2755), and it belongs to its account.
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, OUTBOX])
    write_static(ctx, "portal-form.js", ctx.fixture(__package__, "fixtures/portal-form.js").decode())
    write_static(ctx, "glyphs.js", rd.glyphs_js())
    write_static(ctx, "refunds.js", ctx.fixture(__package__, f"{FIXTURES}/refunds.js").decode())
    start_server(ctx, port, SERVER_LOG, f"--site {SITE_DIR} --static {STATIC} --records {RECORDS} --form {FORM} "
                                        f"--issue-codes --desktop-only / --desktop {DESKTOP_USER}")
    # The site (pages and receipts) is the portal account's own: only the server reads it, and it serves it
    # only to the desktop's browser.
    ctx.run(["install", "-d", "-m", "700", "-o", PORTAL_USER, "-g", PORTAL_USER, SITE_DIR, f"{SITE_DIR}/receipts"])
    site = {"index.html": _page(p, ctx.fixture(__package__, f"{FIXTURES}/index.html").decode()),
            "refunds.css": _css(p, ctx.fixture(__package__, f"{FIXTURES}/refunds.css").decode()),
            **{f"receipts/{r['request']}.png": rd.receipt_png(r) for r in p["requests"]}}
    for name, content in site.items():
        ctx.write_file(f"{SITE_DIR}/{name}", content, owner=PORTAL_USER, mode=0o600)
    # Each request types ids, codes and amounts: a stalled guest must not repeat a key held across the stall
    # (nothing in the episode needs a held key to repeat), so the X server's autorepeat is off.
    ctx.run(["env", "DISPLAY=:0", "xset", "r", "off"], user=ctx.user)
    ctx.write_file(f"{PROFILE}/user.js", USER_JS)
    ctx.launch_gui(f"{{as_user}} firefox-esr --no-remote --profile {PROFILE} --width {rd.FIREFOX_SIZE[0]} "
                   f"--height {rd.FIREFOX_SIZE[1]} http://127.0.0.1:{port}/", name="firefox")
    firefox = ctx.wait_window(f"^{re.escape(PAGE_TITLE)} — Mozilla Firefox$", timeout=400)
    # Firefox at the left, the terminal beside it: neither covers the other, whichever is raised.
    ctx.run(["env", "DISPLAY=:0", "xdotool", "windowsize", str(firefox.id), *map(str, rd.FIREFOX_SIZE),
             "windowmove", str(firefox.id), "0", "0"], user=ctx.user)
    ctx.write_file(APP, ctx.fixture(__package__, f"{FIXTURES}/card_terminal.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    ctx.write_file(TERMINAL_IN, json.dumps(rd.terminal_layout()), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {TERMINAL_IN} > {TERMINAL_RECORD}", name="terminal")
    terminal = ctx.wait_window(f"^{re.escape(rd.TERMINAL_TITLE)}$")
    if abs(terminal.x - rd.TERMINAL_AT[0]) > 16 or abs(terminal.y - rd.TERMINAL_AT[1]) > 40:
        ctx.run(["env", "DISPLAY=:0", "xdotool", "windowmove", str(terminal.id), *map(str, rd.TERMINAL_AT)],
                user=ctx.user)
    _wait_drawn(ctx, lambda image: rd.read_terminal(image) == "READY" and
                rd.find_frame(image, BANNER, region=(0, 0, rd.FIREFOX_SIZE[0], image.shape[0])) is not None,
                "the portal's page and the card terminal")
    ctx.run(["rm", "-f", TERMINAL_IN])
    requests = [{k: r[k] for k in ("request", "decision", "amount", "reason") if k in r} for r in p["requests"]]
    return Prepared(params={"today": p["today"], "port": port, "days": rd.RETURN_DAYS},
                    truth={"count": len(requests), "origin": f"http://127.0.0.1:{port}", "requests": requests})


def _wait_drawn(ctx: SetupContext, drawn: Callable[[np.ndarray], bool], what: str) -> None:
    """Mapped is not drawn (TCG): wait until the screen shows ``what``."""
    try:
        wait_for(lambda: drawn(ctx.client.screenshot(hide_cursor=True).image) or None, 180, what=what, max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None


# ---- the checker -------------------------------------------------------------------------------------------

def decisions(probe: Probe, origin: str) -> dict[str, dict[str, Any]]:
    """{request: the browser's last accepted decision record}: sent by the desktop account from the portal's page."""
    last: dict[str, dict[str, Any]] = {}
    for record in submissions(probe, FORM):
        if record.get("client") == DESKTOP_USER and record.get("origin") == origin and not record.get("refused"):
            last[str(record["data"].get("request", "")).strip().upper()] = record
    return last


def terminal_records(probe: Probe) -> list[dict[str, Any]]:
    """Every refund the terminal settled, in order (the JSON lines it printed into its root-only record)."""
    found = []
    for line in (probe.read_text(TERMINAL_RECORD) or "").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("auth"), str):
            found.append(record)
    return found


def judge_decision(record: Mapping[str, Any] | None, want: Mapping[str, Any]) -> str:
    """'' when a request's decision record is right, else what is wrong with it."""
    if record is None:
        return "no decision from the browser"
    data = record["data"]
    decision, detail = str(data.get("decision", "")).strip().upper(), str(data.get("detail", "")).strip().upper()
    if decision != want["decision"]:
        return f"{decision or 'nothing'}, expected {want['decision']}"
    if decision == rd.APPROVE and rd.cents(detail) != rd.cents(want["amount"]):
        return f"amount {detail!r}, expected {want['amount']}"
    if decision == rd.DENY and detail != want["reason"]:
        return f"reason {detail!r}, expected {want['reason']}"
    return ""


def _graded(problems: Mapping[str, str], what: str) -> Verdict:
    wrong = {k: why for k, why in problems.items() if why}
    evidence = f"{len(problems) - len(wrong)}/{len(problems)} {what}" + \
        (f"; wrong: {'; '.join(f'{k}: {why}' for k, why in list(wrong.items())[:4])}" if wrong else "")
    if not wrong:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if len(wrong) < len(problems) else Verdict.failed(evidence)


def check_sent(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    last = decisions(probe, truth["origin"])
    missing = [r["request"] for r in truth["requests"] if r["request"] not in last]
    every = submissions(probe, FORM)
    clients = sorted({f"{r.get('client') or 'unknown'}" + (" (refused)" if r.get("refused") else "") for r in every})
    return Verdict.check(not missing, f"{len(every)} decision(s) received, from {clients or 'nobody'}; requests "
                                      f"without one from the browser ({DESKTOP_USER!r}) on {truth['origin']}: "
                                      f"{missing or 'none'}")


def check_decisions(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    last = decisions(probe, truth["origin"])
    return _graded({r["request"]: judge_decision(last.get(r["request"]), r) for r in truth["requests"]},
                   "requests decided right by the browser")


def settled(probe: Probe, truth: Mapping[str, Any]) -> dict[str, dict[str, Any] | None]:
    """{approved request: the terminal's last refund keyed with the portal's latest code for it, or None}."""
    last, keyed = decisions(probe, truth["origin"]), terminal_records(probe)
    out: dict[str, dict[str, Any] | None] = {}
    for r in truth["requests"]:
        if r["decision"] == rd.APPROVE:
            code = str((last.get(r["request"]) or {}).get("code") or "")
            out[r["request"]] = next((k for k in reversed(keyed) if code and k["auth"] == code), None)
    return out


def check_terminal(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    amounts = {r["request"]: r.get("amount", "") for r in truth["requests"]}
    problems = {}
    for request, entry in settled(probe, truth).items():
        problems[request] = ("not keyed with the portal's latest authorisation code for it" if entry is None else
                             "" if rd.cents(str(entry.get("amount"))) == rd.cents(amounts[request]) else
                             f"amount {entry.get('amount')!r}, expected {amounts[request]}")
    return _graded(problems, "approved refunds settled at the terminal with their code and amount")


def check_terminal_only(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    keyed = terminal_records(probe)
    if not keyed:
        return Verdict.failed("the terminal settled no refund")
    approved = {r["request"] for r in truth["requests"] if r["decision"] == rd.APPROVE}
    codes = {str(rec.get("code")) for rec in submissions(probe, FORM) if rec.get("client") == DESKTOP_USER
             and rec.get("origin") == truth["origin"] and not rec.get("refused") and rec.get("code")
             and str(rec["data"].get("request", "")).strip().upper() in approved}
    stray = [k["auth"] for k in keyed if k["auth"] not in codes]
    return Verdict.check(not stray, f"refunds keyed with codes of no approved request: {stray}" if stray else
                         f"all {len(keyed)} refunds settled were approved ones")


def _batch(probe: Probe) -> tuple[dict[str, dict[str, str]], str]:
    data = probe.read_bytes(BATCH, max_bytes=MAX_BATCH)
    if data is None:
        return {}, f"{BATCH} does not exist"
    rows, problem = rd.parse_batch(data)
    return rows, f"{BATCH} {problem}" if problem else ""


def check_batch(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, problem = _batch(probe)
    if problem:
        return Verdict.failed(problem)
    problems = {}
    for r in truth["requests"]:
        row = rows.get(r["request"])
        want = (r["decision"], r.get("amount", ""), r.get("reason", ""))
        got = None if row is None else (row["decision"], row["amount"], row["reason"])
        ok = got is not None and got[0] == want[0] and got[2] == want[2] and \
            (rd.cents(got[1]) == rd.cents(want[1]) if want[0] == rd.APPROVE else not got[1])
        problems[r["request"]] = "" if ok else f"{got or 'no row'}, expected {want}"
    extra = sorted(set(rows) - {r["request"] for r in truth["requests"]})
    if extra:
        problems["extra rows"] = ", ".join(extra)
    return _graded(problems, "batch rows right")


def check_settlements(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, problem = _batch(probe)
    if problem:
        return Verdict.failed(problem)
    done = settled(probe, truth)
    problems = {}
    for r in truth["requests"]:  # graded over the approvals; a denial with a reference is one more problem
        got = rows.get(r["request"], {}).get("settlement", "(no row)")
        if r["decision"] == rd.DENY:
            if got:
                problems[r["request"]] = f"a denial with settlement {got!r}"
            continue
        entry = done.get(r["request"])
        problems[r["request"]] = ("the terminal settled no refund for it" if entry is None else
                                  "" if got == str(entry["ref"]) else f"{got!r}, expected {entry['ref']!r}")
    return _graded(problems, "approvals' batch settlement references are the terminal's")


# ---- the oracle --------------------------------------------------------------------------------------------

AUTH = re.compile(r"^(RF-\d{4}) (?:AUTH ([A-Z2-9]{6})|DENIED)$")
SETTLED = re.compile(r"^#(\d+) SETTLED REF ([A-Z2-9]{8})$")
# Under TCG a click's effect can show many seconds late (the portal's answer most of all: Firefox fetches,
# the server records, the page draws): read until it shows, act again only after a while.
TRIES, WAITS, ANSWER_WAITS = 3, 8, 20


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Per request: open its tab and read the receipt (GUI), apply the policy in the database (CLI), send the
    decision in the portal and key an approval into the terminal (GUI); then write the batch from the shell."""
    rows: list[list[str]] = []
    seen: set[str] = set()
    keyed = 0
    for index in range(ctx.truth["count"]):
        receipt = yield from _open(ctx, index, seen)
        if receipt is None:  # the tab never showed a new receipt (or this channel cannot see it)
            continue
        yield {"kind": "python", "code": rd.decide_program(receipt, ctx.params["today"]), "timeout": 60}
        verdict = rd.parse_decision((ctx.obs or {}).get("terminal", ""), receipt["request"])
        if verdict is None:
            continue
        auth = yield from _decide(ctx, receipt["request"], verdict)
        if auth is None:
            continue
        if verdict[0] == rd.DENY:
            rows.append([receipt["request"], rd.DENY, "", verdict[1], ""])
            continue
        keyed, ref = yield from _key(ctx, auth, verdict[1], keyed)
        rows.append([receipt["request"], rd.APPROVE, verdict[1], "", ref])
    yield {"kind": "python", "code": rd.batch_program(rows), "timeout": 60}
    yield {"kind": "done"}


def _screen(ctx: OracleContext) -> Any:
    return (ctx.obs or {})["screen"]


def _open(ctx: OracleContext, index: int, seen: set[str]) -> Generator[ActionLike, Any, dict[str, Any] | None]:
    """Click request tab ``index`` until a receipt not seen before shows; it parsed (None when none showed)."""
    for _try in range(TRIES):
        banner = rd.find_frame(_screen(ctx), BANNER)
        if banner is None:
            return None
        x, y, w, h = rd.TAB_BOX
        yield {"kind": "click", "x": banner[0] + x + index * rd.TAB_STEP + w // 2, "y": banner[1] + y + h // 2}
        for _ in range(WAITS):
            receipt = rd.parse_receipt(rd.read_receipt(_screen(ctx)))
            if receipt is not None and receipt["request"] not in seen:
                seen.add(receipt["request"])
                return receipt
            yield {"kind": "wait", "seconds": 2}
    return None


def _decide(ctx: OracleContext, request: str, verdict: tuple[str, str]) -> Generator[ActionLike, Any, str | None]:
    """Type the decision into the portal's form and send it; the authorisation code drawn for it ('' for a
    denial), or None when the page never showed the answer."""
    for _try in range(TRIES):
        banner = rd.find_frame(_screen(ctx), BANNER)
        if banner is None:
            return None
        yield {"kind": "click", "x": banner[0] + 700, "y": banner[1] + 30}  # the banner: the next Tab is the form's
        yield {"kind": "key", "keys": "Tab"}  # (a field reached by Tab has its text selected: typing replaces it)
        yield {"kind": "type", "text": f"{request}\t{verdict[0]}\t{verdict[1]}\n"}
        for _ in range(ANSWER_WAITS):
            found = AUTH.match(rd.read_auth(_screen(ctx)))
            if found and found.group(1) == request:
                return found.group(2) or ""
            yield {"kind": "wait", "seconds": 2}
    return None


def _key(ctx: OracleContext, auth: str, amount: str, keyed: int) -> Generator[ActionLike, Any, tuple[int, str]]:
    """Key the refund into the terminal until its status line shows a new settlement: (its number, reference)."""
    at = rd.find_frame(_screen(ctx), rd.TERMINAL_FRAME, region=(rd.TERMINAL_AT[0] - 60, 0, *_size(ctx)))
    if at is None:
        return keyed, ""
    for attempt in range(TRIES):
        yield {"kind": "click", "x": rd.terminal_target(at)[0], "y": rd.terminal_target(at)[1]}
        if attempt:  # what a lost click or a refusal left in the field; Tab selects the other one's text
            yield {"kind": "key", "keys": "ctrl+slash"}
        yield {"kind": "type", "text": f"{auth}\t{amount}\n"}
        for _ in range(WAITS):
            found = SETTLED.match(rd.read_terminal(_screen(ctx)))
            if found and int(found.group(1)) > keyed:
                return int(found.group(1)), found.group(2)
            yield {"kind": "wait", "seconds": 1}
    return keyed, ""


def _size(ctx: OracleContext) -> tuple[int, int]:
    image = _screen(ctx)
    return image.shape[1], image.shape[0]


TASK = Task(
    id="Weave-Web-4",
    title="Work through the day's refund requests: receipts in the portal, the orders database, the card terminal "
          "and the refund batch",
    instruction=(
        "You work the refund desk of a shop; today is {today}. The support portal open in Firefox "
        "(http://127.0.0.1:{port}/) lists today's refund requests; each request's tab shows the customer's "
        "photographed receipt: the request id, the receipt number (the order's number), the purchase date, the "
        "SKU of every item returned and the total paid. ~/orders.db (SQLite; tables orders: order_no, customer, "
        "purchased (YYYY-MM-DD); order_items: order_no, sku, description, price_cents, final_sale (1 = final "
        "sale); payments: order_no, method, amount_cents; refunds: order_no, sku, amount_cents, refunded_on, the "
        "items refunded before) has the shop's orders. Decide every request by the refund policy, taking the "
        "first rule that applies: DENY with reason MISMATCH when no order has the receipt's number or the "
        "receipt's total is not the sum of that order's payments; DENY with reason EXPIRED when the order was "
        "purchased more than {days} days before today; DENY with reason NOTHING when none of the returned items "
        "is refundable (an item is refundable unless it is final sale or that order's item was refunded before); "
        "otherwise APPROVE the sum of the refundable returned items' prices. 1) Send each decision with the "
        "portal's form: the request id, APPROVE or DENY, and the amount (like 12.50) for an approval or the "
        "reason code for a denial. The portal draws its answer under the receipt: for an approval an "
        "authorisation code. 2) Key every approved refund into the 'Card Terminal' window: the authorisation code "
        "and the amount, then 'Refund'; it shows a settlement reference. If you send a request's decision again, "
        "its latest decision and code count. 3) From your shell, write the day's batch to ~/outbox/refunds.csv: "
        "a header line request,decision,amount,reason,settlement and one row per request: its id, APPROVE or "
        "DENY, the amount (approvals; empty for denials), the reason code (denials; empty for approvals) and the "
        "terminal's settlement reference (approvals; empty for denials). Then finish."),
    channels=Channels(
        gui="read each receipt off the portal's page, send the decisions from the portal's form, key the approved "
            "refunds into the Card Terminal and read back its settlement references",
        cli="apply the refund policy to each receipt in ~/orders.db and write ~/outbox/refunds.csv",
        why_both="the receipts exist only as pixels that the portal serves to the desktop's browser alone, the "
                 "decisions count only from that browser and the settlements only from the terminal on the "
                 "desktop, while the orders database is readable only by the shell's account and the batch must "
                 "be written by it into a folder only it can write"),
    setup=setup,
    clauses=(
        Clause("decisions_sent", "every request has a decision sent from the browser (the desktop account) on the "
                                 "portal's page", check_sent, critical=True),
        Clause("decisions_right", "the browser's last decision of every request follows the refund policy "
                                  "(decision, amount or reason)", check_decisions, weight=3.0, critical=True,
               cap=0.5),
        Clause("refunds_settled", "every approved refund was settled at the Card Terminal with the portal's latest "
                                  "authorisation code for it and the approved amount", check_terminal, weight=2.0,
               critical=True, cap=0.5),
        Clause("refunds_only_approved", "the terminal settled nothing but approved requests", check_terminal_only),
        Clause("batch_rows", "~/outbox/refunds.csv has one right row per request (decision, amount, reason)",
               check_batch, weight=2.0, critical=True, cap=0.5),
        Clause("batch_settlements", "the batch carries the terminal's settlement reference of every approved "
                                    "refund and none for a denial", check_settlements, critical=True, cap=0.5),
    ),
    deliverables=(
        record_deliverable("the portal's record of the decisions"),
        Deliverable(TERMINAL_RECORD, "gui", owner="root", description="the Card Terminal's records (captured by "
                                                                      "setup)"),
        Deliverable(BATCH, "cli", description="~/outbox/refunds.csv"),
    ),
    withheld=("requests",),
    oracle=oracle,
    profile="full",
    apps=("firefox-esr", "Card Terminal (python3-tk)", "sqlite3", "python3"),
    max_steps=200,
    time_budget_s=2400.0,
)
