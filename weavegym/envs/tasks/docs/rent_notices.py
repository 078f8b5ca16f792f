"""Weave-Docs-5: mail-merge rent-increase notices for a property manager who says too little and changes their
mind once.

A simulated user (envs/simulated_user.py) opens with "Could you get the rent notices out for me?" and says
which building, from which effective date, and whether amounts carry the currency sign or the currency code
only when asked; once the date (or, on other seeds, the building) was answered, the next message moves the
date later (so a tenant whose lease ends in between drops out) or swaps the building. The rent roll is
~/rentroll.db (SQLite; tenants with accented names, rents in cents, lease ends), readable only by the
workspace account. The allowed increase and the cap per unit of each building exist only as pixels: the
board's signed decision, a scanned-looking page drawn by a Tk "Rent Board" (pixel_font, drawn only once "Open
signed decision" is pressed, fed from a root-only file that setup deletes once the window is up). The notices
are shell work, one UTF-8 text file per tenant in ~/notices, a folder only the workspace account may write
(2755); they are then approved in the board's sign-off form, whose record lands in a root-only file. The plan
of the data, the rent maths, the requester's script and the board's geometry are in rent_notices_plan.py.

Scoring: exactly the final tenants' notices, each with the tenant's name, unit and building, current and new
rent written as asked, and the final date; the sign-off naming the final building and date with the right
count and total; the two agree; every hidden topic asked before the notices were made; the change heard.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.simulated_user import (
    asked_before_delivery,
    entry_point,
    first_handover,
    heard_change,
    move_chat_beside,
    start_simulated_user,
)
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.dialogs import json_record
from weavegym.envs.tasks.docs.rent_notices_plan import (
    BOARD_TITLE,
    CODE,
    FIELDS,
    NOTICES,
    SIGN,
    amount,
    board_layout,
    board_origin,
    expected_notices,
    plan,
    read_decision,
    user_script,
)
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

DB = f"{HOME}/rentroll.db"
NOTICE_DIR = f"{HOME}/notices"
APP_DIR = "/usr/local/share/rentboard"
APP = f"{APP_DIR}/rent_board.py"
BOARD_IN = f"{PRIVATE_DIR}/rent-board.json"
RECORD = f"{PRIVATE_DIR}/rent-sign-off.json"
CHAT_TITLE = "Chat: rent notices"
SCHEMA = ("CREATE TABLE tenants (unit TEXT NOT NULL, building TEXT NOT NULL, tenant TEXT NOT NULL, "
          "rent_cents INTEGER NOT NULL, lease_end TEXT NOT NULL, PRIMARY KEY (building, unit));")
MAX_NOTICE_BYTES = 64 << 10

# ---- setup -------------------------------------------------------------------------------------------------


def setup(ctx: SetupContext) -> Prepared:
    p = plan(ctx.rng, ctx.seed)
    script = user_script(p)
    # The workspace account's alone (0600): a terminal on the desktop runs as the desktop account and cannot read it.
    ctx.write_file(DB, database_bytes(SCHEMA, {"tenants": p["tenants"]}), owner=WORKSPACE_USER, mode=0o600)
    # Only the shell may write the notices (a desktop terminal cannot: 2755), and they belong to its account.
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, NOTICE_DIR])
    window, layout = _open_board(ctx, p)
    chat = move_chat_beside(ctx, start_simulated_user(ctx, script, title=CHAT_TITLE), window)
    _wait_board(ctx, window)  # uncovered again once the chat moved
    x, y = window[0], window[1]

    def centre(box: Sequence[int]) -> list[int]:
        return [x + box[0] + box[2] // 2, y + box[1] + box[3] // 2]

    clicks = {"chat": list(entry_point(chat)), "open": centre(layout["open"]),
              "fields": [centre(box) for box in layout["fields"]], "approve": centre(layout["approve"])}
    assert script.change_of_mind is not None
    replies = {t.name: t.reply for t in script.topics}
    replies[p["change"]] = script.change_of_mind.new_reply  # what the topic answers once the mind changed
    final = expected_notices(p, p["final_building"], p["final_date"])
    truth = {k: v for k, v in p.items() if k != "tenants"}  # the roll is in the database; the truth keeps its notices
    return Prepared(params={"requester": p["requester"], "sign": p["sign"], "code": p["code"]}, truth={
        **truth, "expected": final, "stale": expected_notices(p, p["first_building"], p["first_date"]),
        "files": [f"{unit}.txt" for unit in sorted(final)], "window": window, "layout": layout, "clicks": clicks,
        "replies": replies, "change_message": script.change_of_mind.message})


def _open_board(ctx: SetupContext, p: Mapping[str, Any]) -> tuple[list[int], dict[str, Any]]:
    """Start the board at the screen's left with the decision on stdin; once it is drawn (it read stdin before
    its window existed), drop the file: from then on the decision lives only in the app, shown on request."""
    layout = board_layout(0, 0, len(p["buildings"]))
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/rent_board.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    rows = [[b, f"{pct / 10:.1f}%", f"{p['code']} {cap}.00"] for b in p["buildings"]
            for pct, cap in [p["decisions"][b]]]
    shown = {"title": f"RESOLUTION {p['resolution']} - RENT RISES", "rows": rows, "signatory": p["signatory"],
             "layout": layout}
    ctx.write_file(BOARD_IN, json.dumps(shown), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {BOARD_IN} > {RECORD}", name="rentboard")
    window = ctx.wait_window(f"^{re.escape(BOARD_TITLE)}$").geometry
    _wait_board(ctx, window)
    ctx.run(["rm", "-f", BOARD_IN])
    return window, layout


def _wait_board(ctx: SetupContext, window: list[int]) -> None:
    """Mapped is not drawn (TCG), nor redrawn at once when uncovered: wait until the heading reads back."""
    try:
        wait_for(lambda: board_origin(ctx.client.screenshot(hide_cursor=True).image, window), 120,
                 what="the Rent Board drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None


# ---- the checker -------------------------------------------------------------------------------------------

AMOUNT = r"^(?:(?P<code>[A-Z]{3})\s*|(?P<sign>[^\w\s]))?\s*(?P<num>\d{1,3}(?:,?\d{3})*%s)$"
NOTICE_AMOUNT = re.compile(AMOUNT % r"\.\d\d")  # a notice's amounts: 2 decimals, as the instruction says
FORM_AMOUNT = re.compile(AMOUNT % r"(?:\.\d{1,2})?")  # what the sign-off form accepts


def parse_amount(text: str, pattern: re.Pattern[str] = NOTICE_AMOUNT) -> tuple[int, str, str] | None:
    """(cents, style, mark) of "€1283.00" (SIGN, "€") or "EUR 1,283.00" (CODE, "EUR"); style "" when bare."""
    found = pattern.match(text.strip())
    if found is None:
        return None
    cents = round(float(found.group("num").replace(",", "")) * 100)
    if found.group("code"):
        return cents, CODE, found.group("code")
    return (cents, SIGN, found.group("sign")) if found.group("sign") else (cents, "", "")


def parse_notice(data: bytes) -> tuple[dict[str, str], str]:
    """({field: value}, problem) of one notice: its "Key: value" lines under the RENT INCREASE NOTICE line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return {}, f"is not UTF-8 ({exc.reason} at byte {exc.start})"
    lines = [line.strip() for line in text.replace("\r", "").split("\n") if line.strip()]
    if not lines or lines[0].casefold() != "rent increase notice":
        return {}, f"does not start with RENT INCREASE NOTICE: {(lines or [''])[0][:40]!r}"
    fields = {}
    for line in lines[1:]:
        key, sep, value = line.partition(":")
        if sep:
            fields[" ".join(key.casefold().split())] = value.strip()
    missing = [k for k in ("tenant", "unit", "current rent", "new rent", "effective") if k not in fields]
    return fields, f"has no {', '.join(missing)} line" if missing else ""


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", " ".join(text.split())).casefold()


def _money(text: str, want: int, what: str, truth: Mapping[str, Any]) -> str:
    found = parse_amount(text)
    mark = truth["sign"] if truth["style"] == SIGN else truth["code"]
    example = amount(want, truth["style"], truth["sign"], truth["code"])
    if found is None or found[1] != truth["style"] or found[2] != mark:
        return f"{what} {text!r} is not written as asked (e.g. {example})"
    return "" if found[0] == want else f"{what} {text!r}, expected {example}"


def judge_notice(unit: str, fields: Mapping[str, str], truth: Mapping[str, Any]) -> str:
    """'' when the notice for ``unit`` is right, else what is wrong with it."""
    want = truth["expected"][unit]
    if _nfc(fields["tenant"]) != _nfc(want["tenant"]):
        return f"tenant {fields['tenant']!r}, expected {want['tenant']!r}"
    named, _sep, building = fields["unit"].partition(",")
    if named.strip().upper() != unit or _nfc(building) != _nfc(truth["final_building"]):
        stale = " (the building before the change of mind)" if _nfc(building) == _nfc(truth["first_building"]) else ""
        return f"unit {fields['unit']!r}, expected '{unit}, {truth['final_building']}'{stale}"
    problem = _money(fields["current rent"], want["rent"], "current rent", truth) or \
        _money(fields["new rent"], want["new"], "new rent", truth)
    if problem:
        return problem
    if fields["effective"] != truth["final_date"]:
        stale = " (the date before the change of mind)" if fields["effective"] == truth["first_date"] else ""
        return f"effective {fields['effective']!r}, expected {truth['final_date']}{stale}"
    return ""


def judge_notices(files: Mapping[str, bytes], truth: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether the notices are exactly the final tenants' (one file per unit), each one right."""
    names, want = set(files), set(truth["files"])
    if names != want:
        stale = {f"{unit}.txt" for unit in truth["stale"]}
        why = " (the tenants before the change of mind)" if names == stale != want else ""
        return False, f"notices {sorted(names)}, expected {sorted(want)}{why}"
    for name in sorted(files):
        fields, problem = parse_notice(files[name])
        problem = problem or judge_notice(name[:-len(".txt")], fields, truth)
        if problem:
            return False, f"{name} {problem}" if problem.startswith(("is ", "does ", "has ")) else f"{name}: {problem}"
    total = sum(n["new"] for n in truth["expected"].values())
    return True, f"{len(files)} notices for {truth['final_building']} from {truth['final_date']}, every name, unit, " \
                 f"rent and date right ({truth['style']} style), new rents total {total / 100:.2f}"


def notice_files(probe: Probe) -> dict[str, bytes]:
    """{name: bytes} of the .txt files in ~/notices (a symlink or a non-file reads as b"", which no judge passes)."""
    found = {}
    for name in probe.list_dir(NOTICE_DIR) or []:
        if name.endswith(".txt"):
            found[name] = probe.read_bytes(f"{NOTICE_DIR}/{name}", max_bytes=MAX_NOTICE_BYTES) or b""
    return found


def check_notices(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    files = notice_files(probe)
    if not files:
        return Verdict.failed(f"{NOTICE_DIR} holds no notice")
    return Verdict.check(*judge_notices(files, truth))


def sign_off(probe: Probe) -> dict[str, Any] | None:
    """The sign-off form's record (the JSON line the board printed as it exited), or None when not approved."""
    found = json_record(probe, RECORD)
    return found if found is not None and all(isinstance(found.get(k), str) for k, _label in FIELDS) else None


def judge_sign_off(record: Mapping[str, str], truth: Mapping[str, Any]) -> tuple[bool, str]:
    total = sum(n["new"] for n in truth["expected"].values())
    found = parse_amount(record["total"], FORM_AMOUNT)
    checks = ((_nfc(record["building"]) == _nfc(truth["final_building"]), "building", truth["final_building"]),
              (record["effective"] == truth["final_date"], "effective", truth["final_date"]),
              (record["count"] == str(NOTICES), "count", str(NOTICES)),
              (found is not None and found[0] == total, "total", f"{total / 100:.2f}"))
    wrong = [f"{key} {record[key]!r}, expected {want}" for ok, key, want in checks if not ok]
    if wrong:
        return False, "; ".join(wrong)
    return True, f"{record['building']} from {record['effective']}, {record['count']} notices, total {record['total']}"


def check_sign_off(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    record = sign_off(probe)
    if record is None:
        return Verdict.failed("the notices were not approved in the Rent Board's sign-off form")
    ok, why = judge_sign_off(record, truth)
    return Verdict.check(ok, f"the sign-off: {why}")


def check_agree(probe: Probe, _truth: Mapping[str, Any]) -> Verdict:
    record, files = sign_off(probe), notice_files(probe)
    if record is None or not files:
        return Verdict.failed(f"needs both the sign-off ({'yes' if record else 'no'}) and notices in {NOTICE_DIR} "
                              f"({len(files)})")
    rents = [parse_amount(parse_notice(data)[0].get("new rent", "")) for data in files.values()]
    total = sum(r[0] for r in rents if r is not None)
    said = parse_amount(record["total"], FORM_AMOUNT)
    ok = record["count"] == str(len(files)) and None not in rents and said is not None and said[0] == total
    return Verdict.check(ok, f"the sign-off says {record['count']!r} notices totalling {record['total']!r}; "
                             f"{NOTICE_DIR} holds {len(files)} whose new rents total {total / 100:.2f}")


def delivered_at(probe: Probe, _truth: Mapping[str, Any]) -> float | None:
    """When the notices were delivered (guest clock): the earliest of the notices' last writes and the sign-off."""
    names = [name for name in probe.list_dir(NOTICE_DIR) or [] if name.endswith(".txt")]
    return first_handover(probe, [f"{NOTICE_DIR}/{name}" for name in names], json_record(probe, RECORD))


def _asked(topic: str):
    return asked_before_delivery(topic, delivered_at, "no notice was delivered")


# ---- the oracle --------------------------------------------------------------------------------------------

QUESTIONS = ("Happy to! Which building are the notices for?",
             "What effective date should the new rents start from?",
             "How should I write the amounts: with the currency sign or the currency code?",
             # After both answers that can change: it brings the change of mind, and asks both once more.
             "Thanks! To be sure before I send them: which building, and from which date?")
MARKER = "NOTICES-WRITTEN"
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


def final_request(replies: Mapping[str, str], buildings: Sequence[str]) -> tuple[str, str, str]:
    """(building, effective date ISO, style) from the requester's answers as the chat shows them."""
    building = next((b for b in buildings if b in replies["building"]), "")
    day = re.search(rf"(\d{{1,2}}) ({'|'.join(MONTHS)}) (\d{{4}})", replies["date"])
    assert day is not None
    iso = f"{day.group(3)}-{MONTHS.index(day.group(2)) + 1:02d}-{int(day.group(1)):02d}"
    return building, iso, SIGN if "currency sign" in replies["format"] else CODE


def notices_command(building: str, effective: str, mark: str, decision: tuple[int, int]) -> str:
    """The shell line that mail-merges one notice per tenant from the roll, then prints the count and total.

    The rise is rent x percent (tenths: x pct / 1000), at most the cap, all in integers scaled by 1000, so the
    floor of the new rent is exact. The mark's bytes go in as escapes: the shell's locale need not be UTF-8.
    """
    pct, cap = decision
    prefix = "".join(f"\\x{b:02x}" for b in mark.encode())
    query = (f"WITH t AS (SELECT unit, tenant, rent_cents AS cur, (rent_cents * 1000 + MIN(rent_cents * {pct}, "
             f"{cap} * 100000)) / 100000 * 100 AS new FROM tenants WHERE building = '{building}' AND "
             f"lease_end >= '{effective}')")
    line = r"RENT INCREASE NOTICE\nTenant: %s\nUnit: %s, %s\nCurrent rent: %s%s\nNew rent: %s%s\nEffective: %s\n"
    return (f"B='{building}'; D={effective}; P=$'{prefix}'; Q=\"{query}\"; "
            f"sqlite3 -separator '|' ~/rentroll.db \"$Q SELECT unit, tenant, printf('%.2f', cur / 100.0), "
            f"printf('%.2f', new / 100.0) FROM t ORDER BY unit\" | while IFS='|' read -r unit name cur new; do "
            f"printf '{line}' \"$name\" \"$unit\" \"$B\" \"$P\" \"$cur\" \"$P\" \"$new\" \"$D\" "
            f"> ~/notices/\"$unit\".txt; "
            f"done; echo {MARKER}; sqlite3 -separator '|' ~/rentroll.db \"$Q SELECT 'TOTAL', COUNT(*), "
            f"printf('%.2f', SUM(new) / 100.0) FROM t\"; ls ~/notices")


def parse_total(terminal: str) -> tuple[str, str]:
    """(count, total) the summary line printed after the last marker, or ("0", "0.00")."""
    found = re.search(r"TOTAL\|(\d+)\|(\d+\.\d\d)", terminal.replace("\r", "").rpartition(MARKER)[2])
    return (found.group(1), found.group(2)) if found else ("0", "0.00")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Ask in the chat, read the decision off the board, mail-merge in the shell, approve in the sign-off form.

    The requester's answers come from ``truth["replies"]``, the texts the chat window shows: the chat is
    anti-aliased Tk text, which cannot be read back off ``obs["screen"]`` exactly. The decision (withheld) is
    read off the screen, the count and total off the terminal.
    """
    t, truth = ctx.truth["clicks"], ctx.truth
    yield {"kind": "click", "x": t["chat"][0], "y": t["chat"][1]}
    for question in QUESTIONS:
        yield {"kind": "type", "text": question}
        yield {"kind": "key", "keys": "Return"}
    building, effective, style = final_request(truth["replies"], truth["buildings"])
    yield {"kind": "click", "x": t["open"][0], "y": t["open"][1]}
    decision: dict[str, tuple[int, int]] = {}
    for _try in range(6):  # the page may still be drawing: read until every row reads back
        decision = read_decision((ctx.obs or {})["screen"], truth["window"], len(truth["buildings"])) or {}
        if decision:
            break
        yield {"kind": "wait", "seconds": 1}
    mark = truth["sign"] if style == SIGN else truth["code"] + " "
    yield {"kind": "shell", "command": notices_command(building, effective, mark,
                                                       decision.get(building.upper(), (0, 0))), "timeout": 60}
    count, total = parse_total((ctx.obs or {}).get("terminal", ""))
    answers = {"building": building, "effective": effective, "count": count, "total": total}
    for (key, _label), (x, y) in zip(FIELDS, t["fields"], strict=True):
        yield {"kind": "click", "x": x, "y": y}
        yield {"kind": "type", "text": answers[key]}
    yield {"kind": "click", "x": t["approve"][0], "y": t["approve"][1]}
    # The board writes its record as it exits; pgrep sees every account's processes ([d]: not this sh itself).
    yield {"kind": "shell", "command": "timeout 60 sh -c 'while pgrep -f \"rent_boar[d]\" >/dev/null; "
                                       "do sleep 0.2; done'", "timeout": 90}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Docs-5",
    title="Mail-merge rent-increase notices for a property manager in the chat (a simulated user with hidden "
          "preferences and a change of mind)",
    instruction=(
        "{requester} has a request for you in the chat window on the desktop; ask them there about anything you "
        "need to know. The rent roll is ~/rentroll.db (SQLite, table tenants: unit, building, tenant, rent_cents, "
        "lease_end). The board's signed decision on rent rises is in the 'Rent Board' window (press 'Open signed "
        "decision'): per building, the allowed rise in percent and the cap per unit. A tenant of the building "
        "{requester} means gets a notice unless their lease ends before the effective date. Rise = current rent x "
        "percent / 100, at most the cap; new rent = current rent + rise, rounded down to a whole unit of the "
        "currency. 1) From your shell, write one notice per tenant to ~/notices/<unit>.txt, in UTF-8, with these "
        "six lines: RENT INCREASE NOTICE / Tenant: <name as in the roll> / Unit: <unit>, <building> / Current "
        "rent: <amount> / New rent: <amount> / Effective: <YYYY-MM-DD>. Write amounts with 2 decimals and no "
        "thousands separator, either with the currency sign ({sign}1283.00) or with the currency code "
        "({code} 1283.00), as {requester} wants. 2) In the Rent Board's sign-off form, enter the building, the "
        "effective date (YYYY-MM-DD), the number of notices and the total of their new rents, press 'Approve "
        "notices', then finish."),
    channels=Channels(
        gui="chat with the requester, read the signed decision off the Rent Board and approve the notices there",
        cli="compute the new rents from ~/rentroll.db and mail-merge the notices into ~/notices",
        why_both="the requester's answers exist only in the desktop chat and the board's percentages and caps only "
                 "as pixels, the sign-off only through the GUI, while the rent roll is readable only by the "
                 "shell's account and the notices must be written by it into a folder only it can write"),
    setup=setup,
    clauses=(
        Clause("notices", "~/notices holds exactly the final tenants' notices, each with name, unit, building, "
                          "rents written as asked and the final date", check_notices, weight=2.0, critical=True,
               cap=0.5),
        Clause("sign_off", "the sign-off names the final building and date with the right count and total of new "
                           "rents", check_sign_off, weight=2.0, critical=True, cap=0.5),
        Clause("sign_off_matches_notices", "the sign-off's count and total agree with the notice files",
               check_agree),
        Clause("asked_building", "the building was asked before the notices were delivered", _asked("building")),
        Clause("asked_date", "the effective date was asked before the notices were delivered", _asked("date")),
        Clause("asked_format", "the amounts' style was asked before the notices were delivered", _asked("format")),
        Clause("heard_change", "the agent checked back after the triggering answer and heard the change of mind",
               heard_change),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the Rent Board's sign-off record (captured by setup)"),
        *(Deliverable(f"{NOTICE_DIR}/{{files[{i}]}}", "cli", description=f"notice {i + 1} of {NOTICES} in ~/notices")
          for i in range(NOTICES)),
    ),
    withheld=("decisions", "expected", "stale", "files", "first_building", "final_building", "first_date",
              "final_date", "style"),
    oracle=oracle,
    apps=("python3-tk", "sqlite3"),
    max_steps=60,
    time_budget_s=900.0,
    simulated_user=True,
)
