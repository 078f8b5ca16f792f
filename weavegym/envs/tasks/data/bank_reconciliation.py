"""Weave-Data-4: reconcile a month's bank statement with the company ledger, or flag the batch the export lost.

The statement exists only as pixels: a Tk "Statement Viewer" window (the desktop account's, fed from a
root-only file that setup deletes once it is up) draws its summary (which account, opening and closing
balance) and its pages of lines (date, export batch, bank ref, kind, amount) in dot-matrix text, each only
after its button is clicked. The ledger exists only for the shell: a SQLite database of thousands of
postings over five accounts and most of a year, in a folder only the workspace account may open, so a
terminal on the desktop cannot read a row of it.

Feasible seeds: a few bank charges and interest lines (which never come through the bank's export) are
missing from the ledger; the shell posts them (the database stays the workspace account's) and writes the
reconciliation CSV, the viewer's form confirms the reconciled balance (a root-only record), and the answer
is that balance. Infeasible seeds (a third): the export lost a whole batch of transactions, which may not be
posted by hand. Only both channels together show it (the batch is on the statement, its absence in the
ledger); the right outcome is to post nothing, list the missing lines from the shell, flag the batch in the
viewer, and give up naming the batch.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
from collections.abc import Iterator, Mapping
from typing import Any

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import (
    CANDIDATES,
    CAUSES,
    FEASIBLE,
    Abstention,
    ActionLike,
    Channels,
    OracleContext,
    Prepared,
    Task,
)
from weavegym.envs.tasks.data import statement_books as sb
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.dialogs import json_record
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.answers import check_number, normalize_text
from weavegym.evaluators.provenance import Deliverable

APP_DIR = "/usr/local/share/statementviewer"
APP = f"{APP_DIR}/statement_viewer.py"
VIEWER_IN = f"{PRIVATE_DIR}/statement.json"
RECORD = f"{PRIVATE_DIR}/statement-record.json"
DB_DIR = "/srv/ledger"
DB = f"{DB_DIR}/ledger.db"
TITLE = "Statement Viewer"
HEADER = "posted,ref,kind,amount_cents"
WAIT_TRIES = 12
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


def setup(ctx: SetupContext) -> Prepared:
    world = sb.books(ctx.rng, ctx.feasible)
    month, statement = world["month"], world["statement"]
    ctx.run(["install", "-d", "-m", "0700", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, DB_DIR])
    # The workspace account's alone: a desktop terminal cannot read a posting, and the shell's changes keep the owner.
    ctx.write_file(DB, database_bytes(sb.SCHEMA, {"accounts": world["accounts"], "entries": world["entries"]}),
                   owner=WORKSPACE_USER, mode=0o600)
    text = sb.statement_text(statement)
    window = _open_viewer(ctx, text)
    period = f"{sb.YEAR}-{month:02d}"
    lines = {line["ref"]: line for line in statement["lines"]}
    missing = [lines[ref] for ref in world["missing"]]
    lost = world["lost"]
    lost_lines = [line for line in statement["lines"] if lost and line["batch"] == lost]
    causes = [lost, lost_lines[0]["date"], f"{lost_lines[0]['date'][8:]}.{month:02d}.{sb.YEAR}"] if lost else []
    return Prepared(
        params={"month": f"{MONTHS[month - 1]} {sb.YEAR}", "csv": f"{HOME}/reconciliation-{period}.csv",
                "missing_csv": f"{HOME}/missing-{period}.csv"},
        truth={"period": period, "month": month, "month_end": sb.month_end(month), "pages": len(text["pages"]),
               "window": window, "targets": sb.screen_targets(window, len(text["pages"])),
               "csv": f"{HOME}/reconciliation-{period}.csv", "missing_csv": f"{HOME}/missing-{period}.csv",
               "account": statement["account"], "closing": statement["closing"], "missing": missing,
               "batches": sorted({line["batch"] for line in statement["lines"]} - {sb.NO_BATCH}),
               "entries": len(world["entries"]), "total": sum(row[6] for row in world["entries"]),
               FEASIBLE: ctx.feasible, CAUSES: causes,
               CANDIDATES: sorted({line["batch"] for line in statement["lines"]} - {sb.NO_BATCH})})


def _open_viewer(ctx: SetupContext, text: Mapping[str, Any]) -> list[int]:
    """Start the viewer with the statement on its stdin, wait until its cover is drawn, then delete the input."""
    shown = {**text, "layout": sb.layout(len(text["pages"]))}
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/statement_viewer.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    ctx.write_file(VIEWER_IN, json.dumps(shown), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {VIEWER_IN} > {RECORD}", name="statementviewer")
    window = ctx.wait_window(f"^{TITLE}$").geometry
    targets = sb.screen_targets(window, len(text["pages"]))
    try:  # mapped is not drawn (TCG); the cover is drawn after the statement was read from stdin
        wait_for(lambda: sb.shown_title(ctx.client.screenshot().image, targets) == "STATEMENT", 120,
                 what="the Statement Viewer drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", VIEWER_IN])  # the viewer has read it: the statement now lives only on screen
    return window


# -- the checker --------------------------------------------------------------------------------------------


def _key(line: Mapping[str, Any]) -> tuple[str, str, str, int]:
    return (line["date"], line["ref"], line["kind"], int(line["amount"]))


def _refs(truth: Mapping[str, Any]) -> str:
    return ", ".join(f"'{line['ref']}'" for line in truth["missing"])


def check_posted(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    """Every missing charge and interest line posted once, as MANUAL, to the account; nothing else changed."""
    rows = probe.sqlite(DB, f"SELECT account, posted, batch, ref, kind, amount_cents FROM entries WHERE ref IN "
                            f"({_refs(truth)})")
    others = probe.sqlite(DB, f"SELECT COUNT(*), IFNULL(SUM(amount_cents), 0) FROM entries WHERE ref NOT IN "
                              f"({_refs(truth)})")
    if rows is None or others is None:
        return Verdict.failed(f"{DB} is missing or not a SQLite database")
    found = [(str(p), str(r), str(k), int(a)) for acc, p, b, r, k, a in rows if acc == truth["account"]
             and b == sb.MANUAL and isinstance(a, int)]
    want = [_key(line) for line in truth["missing"]]
    right = [key[1] for key in want if found.count(key) == 1]
    untouched = tuple(others[0]) == (truth["entries"], truth["total"])
    evidence = (f"{len(right)}/{len(want)} missing lines posted once as MANUAL to {truth['account']} "
                f"({len(rows)} rows carry their refs); the other postings: {others[0][0]} rows, "
                f"{'unchanged' if untouched else 'changed'} (expected {truth['entries']})")
    if len(right) == len(want) == len(rows) and untouched:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if right and untouched else Verdict.failed(evidence)


def read_lines(probe: Probe, path: str) -> list[tuple[str, str, str, int]] | None:
    """The (posted, ref, kind, amount_cents) rows of a CSV the shell wrote; a header line is skipped."""
    text = probe.read_text(path)
    if text is None:
        return None
    found = []
    for row in csv.reader(io.StringIO(text)):
        cells = [c.strip() for c in row]
        if len(cells) >= 4 and re.fullmatch(r"[A-Z]\d{8}", cells[1]) and re.fullmatch(r"-?\d+", cells[3]):
            found.append((cells[0], cells[1], cells[2].upper(), int(cells[3])))
    return found


def _check_listing(probe: Probe, path: str, want: list[tuple[str, str, str, int]]) -> Verdict:
    found = read_lines(probe, path)
    if found is None:
        return Verdict.failed(f"{path} does not exist")
    right = sorted(key[1] for key in want if key in found)
    wrong = sorted({key[1] for key in want} - set(right))
    extra = sorted(key[1] for key in found if key not in want)
    evidence = f"{path} lists {right} right; missing or wrong: {wrong}; lines that do not belong: {extra}"
    if not wrong and not extra and len(found) == len(want):
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if right else Verdict.failed(evidence)


def check_reconciliation_csv(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    return _check_listing(probe, truth["csv"], [_key(line) for line in truth["missing"]])


def check_missing_csv(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    return _check_listing(probe, truth["missing_csv"], [_key(line) for line in truth["missing"]])


def check_confirmed(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = json_record(probe, RECORD)
    if found is None:
        return Verdict.failed("nothing was recorded in the Statement Viewer")
    if found.get("action") != "confirm":
        return Verdict.failed(f"the viewer recorded {found.get('action')!r}, not a confirmed reconciliation")
    return check_number(str(found.get("text", "")), truth["closing"] / 100, abs_tol=0.005)


def check_answer(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    return check_number(probe.episode.answer, truth["closing"] / 100, abs_tol=0.005)


def check_flagged(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    """The viewer flagged a discrepancy naming the lost batch, and no other batch of the statement."""
    found = json_record(probe, RECORD)
    if found is None:
        return Verdict.failed("nothing was recorded in the Statement Viewer")
    text = normalize_text(str(found.get("text", ""))).upper()
    lost = truth[CAUSES][0]
    named = [b for b in truth["batches"] if b in text]
    ok = found.get("action") == "flag" and named == [lost]
    return Verdict.check(ok, f"the viewer recorded {found.get('action')!r} naming batches {named}; expected a "
                             f"flag naming {lost} alone")


def check_untouched(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows = probe.sqlite(DB, "SELECT COUNT(*), IFNULL(SUM(amount_cents), 0) FROM entries")
    if rows is None:
        return Verdict.failed(f"{DB} is missing or not a SQLite database")
    ok = tuple(rows[0]) == (truth["entries"], truth["total"])
    return Verdict.check(ok, f"the ledger has {rows[0][0]} postings summing to {rows[0][1]} cents; it had "
                             f"{truth['entries']} summing to {truth['total']}")


# -- the oracle ---------------------------------------------------------------------------------------------


def _show(ctx: OracleContext, tab: int, title: str) -> Iterator[ActionLike]:
    """Click a viewer button and wait until its page's title reads back (the redraw may trail under TCG)."""
    point = ctx.truth["targets"]["tabs"][tab]
    yield {"kind": "click", "x": point[0], "y": point[1]}
    for _ in range(WAIT_TRIES):
        if sb.shown_title(ctx.obs["screen"], ctx.truth["targets"]) == title:
            return
        yield {"kind": "wait", "seconds": 1}


def missing_sql(account: str, refs: list[str]) -> str:
    values = ", ".join(f"('{ref}')" for ref in refs) or "(NULL)"
    return (f"WITH s(ref) AS (VALUES {values}) SELECT 'MISSING', s.ref FROM s WHERE NOT EXISTS "
            f"(SELECT 1 FROM entries e WHERE e.account = '{account}' AND e.ref = s.ref);")


def posting_sql(account: str, lines: list[dict[str, Any]], month_end: str) -> str:
    rows = ", ".join(f"('{account}', '{line['date']}', '{sb.MANUAL}', '{line['ref']}', '{line['kind']}', "
                     f"{line['amount']}, 'RECONCILIATION')" for line in lines)
    post = f"INSERT INTO entries (account, posted, batch, ref, kind, amount_cents, memo) VALUES {rows};" if rows else ""
    return (f"BEGIN; {post} COMMIT; SELECT printf('BALANCE|%d', a.opening_cents + IFNULL((SELECT SUM(amount_cents) "
            f"FROM entries e WHERE e.account = a.account AND e.posted <= '{month_end}'), 0)) FROM accounts a "
            f"WHERE a.account = '{account}';")


def _listing(path: str, lines: list[dict[str, Any]]) -> str:
    rows = [HEADER] + [f"{line['date']},{line['ref']},{line['kind']},{line['amount']}" for line in lines]
    return f"printf '%s\\n' {' '.join(shlex.quote(r) for r in rows)} > {path}"


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Summary and pages off the viewer (GUI), the missing refs from the ledger (CLI), then post and confirm,
    or list and flag the lost batch and give up."""
    targets, pages = ctx.truth["targets"], ctx.truth["pages"]
    yield from _show(ctx, 0, "SUMMARY")
    summary = sb.read_summary(ctx.obs["screen"], targets) or {"account": "", "closing": 0}
    lines: list[dict[str, Any]] = []
    for page in range(1, pages + 1):
        yield from _show(ctx, page, f"PAGE {page}/{pages}")
        lines += sb.read_page(ctx.obs["screen"], targets)
    account = summary["account"]
    yield {"kind": "shell", "command": f"sqlite3 -separator '|' {DB} "
                                       f"{shlex.quote(missing_sql(account, [line['ref'] for line in lines]))}"}
    gone = set(re.findall(r"^MISSING\|([A-Z]\d{8})\s*$", ctx.obs.get("terminal", "").replace("\r", ""), re.M))
    missing = [line for line in lines if line["ref"] in gone]
    lost = sorted({line["batch"] for line in missing if line["kind"] not in sb.BY_HAND})
    entry = targets["entry"]
    if not lost:
        post = posting_sql(account, missing, ctx.truth["month_end"])
        yield {"kind": "shell", "command": f"sqlite3 {DB} {shlex.quote(post)} && {_listing(ctx.truth['csv'], missing)}"}
        found = re.search(r"^BALANCE\|(-?\d+)\s*$", ctx.obs.get("terminal", "").replace("\r", ""), re.M)
        balance = sb.money(int(found[1]), grouped=False) if found else "unknown"
        note, button = balance, targets["confirm"]
    else:
        yield {"kind": "shell", "command": _listing(ctx.truth["missing_csv"], missing)}
        note, button = lost[0], targets["flag"]
    yield {"kind": "click", "x": entry[0], "y": entry[1]}
    yield {"kind": "type", "text": note}
    yield {"kind": "click", "x": button[0], "y": button[1]}
    # The viewer writes its record as it exits; pgrep sees every account's processes ([r]: not this sh itself).
    yield {"kind": "shell", "command": "timeout 60 sh -c 'while pgrep -f \"statement_viewe[r]\" >/dev/null; do "
                                       "sleep 0.2; done'", "timeout": 90}
    if not lost:
        yield {"kind": "done", "answer": note}
    else:
        batch = [line for line in missing if line["batch"] == lost[0]]
        yield {"kind": "fail", "reason": f"the bank export lost batch {lost[0]} of {batch[0]['date']}: its "
                                         f"{len(batch)} statement lines ({', '.join(b['ref'] for b in batch)}) are "
                                         "not in the ledger, and exported transactions may not be posted by hand"}


TASK = Task(
    id="Weave-Data-4",
    title="Reconcile the month's bank statement with the ledger, or flag the batch the export lost",
    instruction=(
        "The open 'Statement Viewer' window shows the company's bank statement for {month}: its Summary (which "
        "account, opening and closing balance) and its pages of lines (date, export batch, bank ref, kind, "
        "amount) appear when you click their buttons. The company ledger is the SQLite database "
        "/srv/ledger/ledger.db: table accounts (account, name, opened, opening_cents) and table entries, one row "
        "per posting (account, posted as YYYY-MM-DD, batch, ref, kind, amount_cents signed as on the statement, "
        "memo); an account's balance on a day is its opening_cents plus its postings up to that day. Every "
        "statement line must be in the ledger under the statement's account with the same ref. Bank charges "
        "(CHG) and interest (INT) never come through the bank's export: post each one the ledger lacks as a row "
        "with batch MANUAL and the line's date, ref, kind and amount. 1) Post them, and write {csv} with the "
        "header posted,ref,kind,amount_cents and one line per row you posted. 2) In the viewer, type the "
        "account's ledger balance at the end of the month after your postings (for example 1234.56) and press "
        "'Confirm reconciliation'. 3) Finish with done, answering that balance. But if any other statement line "
        "is missing from the ledger, the export lost a whole batch and nothing may be posted by hand: change "
        "nothing in the ledger and write no reconciliation file; instead write {missing_csv} (same header) "
        "listing every statement line the ledger lacks, type the lost batch's id in the viewer, press 'Flag "
        "discrepancy', and give up with fail, naming the lost batch in the reason."),
    channels=Channels(
        gui="read the statement's summary and pages off the viewer, and confirm the balance or flag the lost batch",
        cli="find the statement lines the ledger lacks with SQL, post the charges and interest, write the CSV",
        why_both="the statement exists only as pixels (each page after a click) and the outcome only in the "
                 "viewer's form, while the ledger is a database only the shell's account can open"),
    setup=setup,
    clauses=(
        Clause("missing_posted", "the missing charges and interest are posted once as MANUAL; nothing else changed",
               check_posted, weight=2.0, critical=True, cap=0.5),
        Clause("reconciliation_csv", "the reconciliation CSV lists exactly the rows posted", check_reconciliation_csv),
        Clause("viewer_confirmed", "the viewer confirmed the reconciled balance", check_confirmed, weight=2.0,
               critical=True, cap=0.5),
        Clause("balance_answered", "the answer is the reconciled balance at the end of the month", check_answer,
               critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the Statement Viewer's record (captured by setup)"),
        Deliverable(DB, "cli", description="the ledger /srv/ledger/ledger.db, changed in place by the shell"),
        Deliverable("{csv}", "cli", description="~/reconciliation-<YYYY-MM>.csv"),
    ),
    abstention=Abstention(
        infeasible=lambda seed: seed % 3 == 2,
        candidates=True,  # the lost batch is one of the month's batches
        fabrications=("{csv}",),
        clauses=(
            Clause("lost_batch_flagged", "the viewer flagged the lost batch, and no other", check_flagged,
                   weight=2.0, critical=True, cap=0.5),
            Clause("missing_listed", "the missing-lines CSV lists every statement line the ledger lacks",
                   check_missing_csv),
            Clause("ledger_untouched", "nothing was posted to the ledger", check_untouched, weight=0.0,
                   critical=True),
        ),
        deliverables=(
            Deliverable(RECORD, "gui", owner="root", description="the Statement Viewer's record (captured by setup)"),
            Deliverable("{missing_csv}", "cli", description="~/missing-<YYYY-MM>.csv"),
        ),
    ),
    withheld=("account", "closing", "missing", "batches"),
    oracle=oracle,
    apps=("python3-tk", "sqlite3"),
    max_steps=60,  # the oracle takes 13-25 steps, and at most 4 x WAIT_TRIES waits for a redraw
    time_budget_s=900.0,
)
