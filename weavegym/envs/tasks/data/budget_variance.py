"""Weave-Data-6: the quarter's budget-variance workbook, typed into Gnumeric, and the shell's over-budget memo.

The budgets exist only as pixels: a Tk "Board pack" window (the desktop account's, fed from a root-only file
that setup deletes once it is up) draws each quarter's bar chart behind a tab, the cost-centre code under each
bar in dot-matrix text, and a bar's budget only once that bar is clicked. The actuals exist only for the shell:
a SQLite ledger of the whole year (invoices, credit notes, reversals; a closed centre; centres not on the
chart) in a folder only the workspace account may open. The names (accents, CJK, Arabic, Hebrew) are in the
ledger alone. So per centre: click its bar (GUI) -> look up its name, status and actual (CLI) -> type its row.

The workbook is a real Gnumeric (the desktop account's) on a template in ~/finance, which only the desktop
account can write (2755): the shell reads it through the group but can neither save nor replace it, and a
desktop terminal is terminal work. The checker reads the saved gzip XML: each row's exact name, budget and
actual, and a variance cell that is a formula over its own row. The memo is the shell's (its own 2755
outbox) and depends on the saved workbook: its SHA-256 and the over-budget centres' variances.
"""

from __future__ import annotations

import json
import re
import shlex
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import DESKTOP_USER, HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.data import budget_books as bb
from weavegym.envs.tasks.data.gnumeric import Cell, evaluate, read_workbook, references
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.evaluators import Clause, GuiArtifactViaCli, Probe, Verdict

APP_DIR = "/usr/local/share/boardpack"
PACK_IN = f"{PRIVATE_DIR}/boardpack.json"
DB_DIR = "/srv/costledger"
DB = f"{DB_DIR}/ledger.db"
FINANCE = f"{HOME}/finance"
WORKBOOK = f"{FINANCE}/budget-variance.gnumeric"
OUTBOX = f"{HOME}/outbox"
MEMO = f"{OUTBOX}/variance-memo.txt"
TITLE = "Board pack"
SHEET_TITLE = r"^budget-variance\.gnumeric - Gnumeric$"
BOARD_AT, GNUMERIC_AT, GNUMERIC_SIZE = (0, 40), (722, 40), (552, 640)
WAIT_TRIES = 12


def setup(ctx: SetupContext) -> Prepared:
    world = bb.books(ctx.rng)
    quarter = world["quarter"]
    ctx.run(["install", "-d", "-m", "0700", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, DB_DIR])
    ctx.write_file(DB, database_bytes(bb.SCHEMA, bb.ledger_rows(world)), owner=WORKSPACE_USER, mode=0o600)
    # ~/finance: the desktop account's alone to write (its Gnumeric saves there); the shell reads via the group.
    ctx.run(["install", "-d", "-m", "2755", "-o", DESKTOP_USER, "-g", SHARED_GROUP, FINANCE])
    ctx.write_file(WORKBOOK, ctx.fixture(__package__, "fixtures/variance_template.gnumeric"), mode=0o644)
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, OUTBOX])
    # The rows are long typed strings; on a loaded TCG host the guest's X server can stall between a key's press
    # and its release for longer than the autorepeat delay, and "Córdoba" lands as "Córdoooba". Nothing in the
    # episode needs a held key to repeat (a key action has no hold), so the server's autorepeat is off.
    ctx.run(["env", "DISPLAY=:0", "xset", "r", "off"], user=ctx.user)
    board = _open_board(ctx, bb.chart(world))
    ctx.launch_gui(f"cd {FINANCE} && {{as_user}} gnumeric {WORKBOOK}", name="gnumeric")
    sheet = ctx.place_window(ctx.wait_window(SHEET_TITLE, timeout=400).id, GNUMERIC_AT, GNUMERIC_SIZE)
    board = ctx.place_window(board, BOARD_AT)
    if board[0] + board[2] + 8 > sheet[0]:
        raise TaskError(f"{ctx.task_id} setup: the Board pack {board} and Gnumeric {sheet} overlap")
    first, last = bb.quarter_bounds(quarter)
    months = bb.QUARTER_MONTHS[quarter]
    bars = sum(1 for c in world["centres"] if c["on_chart"])
    return Prepared(
        params={"quarter": f"{bb.QUARTERS[quarter - 1]} {bb.YEAR}", "first": first, "last": last,
                "months": f"{months[0]} to {months[1]} {bb.YEAR}"},
        truth={"quarter": quarter, "first": first, "last": last, "bars": bars, "sheet": sheet,
               "targets": bb.screen_targets(board, bars), "rows": world["rows"]})


def _open_board(ctx: SetupContext, chart: Mapping[str, Any]) -> int:
    """Start the Board pack with the budgets on its stdin, wait until its cover is drawn, delete the input."""
    bars = len(chart["codes"])
    ctx.write_file(f"{APP_DIR}/board_pack.py", ctx.fixture(__package__, "fixtures/board_pack.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    ctx.write_file(PACK_IN, json.dumps({**chart, "layout": bb.layout(bars)}), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP_DIR}/board_pack.py < {PACK_IN}", name="boardpack")
    window = ctx.wait_window(f"^{TITLE}$")
    targets = bb.screen_targets(window.geometry, bars)
    try:  # mapped is not drawn (TCG); the cover is drawn after the budgets were read from stdin
        wait_for(lambda: bb.shown_title(ctx.client.screenshot().image, targets) == "BOARD PACK", 120,
                 what="the Board pack drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", PACK_IN])  # the window has read it: the budgets now live only on screen
    return window.id


# -- the checker --------------------------------------------------------------------------------------------


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text.strip())


def _sheet(probe: Probe) -> tuple[dict[tuple[int, int], Cell] | None, str]:
    data = probe.read_bytes(WORKBOOK)
    if data is None:
        return None, f"{WORKBOOK} does not exist"
    try:
        sheets = read_workbook(data)
    except ValueError as exc:
        return None, f"{WORKBOOK}: {exc}"
    if not sheets:
        return None, f"{WORKBOOK} has no sheet"
    return next(iter(sheets.values())), ""


def _rows(cells: Mapping[tuple[int, int], Cell]) -> dict[int, str]:
    """The workbook's data rows (0-based row -> name in column A), below the header."""
    return {row: _nfc(cell.value) for (row, col), cell in sorted(cells.items())
            if row >= 1 and col == 0 and not cell.formula and cell.value.strip()}


def _number(cells: Mapping[tuple[int, int], Cell], row: int, col: int) -> float | None:
    cell = cells.get((row, col))
    if cell is None or cell.formula or cell.value_type != 40:
        return None
    return float(cell.value)


def check_workbook(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    cells, why = _sheet(probe)
    if cells is None:
        return Verdict.failed(why)
    rows = _rows(cells)
    return Verdict.check(bool(rows), f"{WORKBOOK} is a Gnumeric workbook with {len(rows)} data row(s) below the "
                                     "header (the template has none)")


def check_names(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    cells, why = _sheet(probe)
    if cells is None:
        return Verdict.failed(why)
    found = list(_rows(cells).values())
    want = [_nfc(row["name"]) for row in truth["rows"]]
    right = [name for name in want if found.count(name) == 1]
    extra = [name for name in found if name not in want]
    evidence = (f"{len(right)}/{len(want)} open cost centres named exactly once; rows that do not belong: "
                f"{extra or 'none'}")
    if len(right) == len(want) == len(found):
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if len(right) * 2 >= len(want) else Verdict.failed(evidence)


RowCheck = Callable[[Mapping[tuple[int, int], Cell], int, Mapping[str, Any]], tuple[bool, str]]


def _per_row(probe: Probe, truth: Mapping[str, Any], what: str, right: RowCheck) -> Verdict:
    """A verdict over every expected centre's row: ``right(cells, row, expected)`` -> (ok, shown)."""
    cells, why = _sheet(probe)
    if cells is None:
        return Verdict.failed(why)
    by_name = {name: row for row, name in _rows(cells).items()}
    good, bad = 0, []
    for expected in truth["rows"]:
        row = by_name.get(_nfc(expected["name"]))
        ok, shown = right(cells, row, expected) if row is not None else (False, "no row")
        good += ok
        if not ok:
            bad.append(f"{expected['name']}: {shown}")
    evidence = f"{good}/{len(truth['rows'])} rows have the right {what}; wrong: {'; '.join(bad[:4]) or 'none'}"
    if good == len(truth["rows"]):
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if good * 2 >= len(truth["rows"]) else Verdict.failed(evidence)


def check_budgets(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    def right(cells: Mapping[tuple[int, int], Cell], row: int, expected: Mapping[str, Any]) -> tuple[bool, str]:
        found = _number(cells, row, 1)
        return found is not None and abs(found - expected["budget"]) < 0.005, f"B{row + 1}={found}"
    return _per_row(probe, truth, "budget in B", right)


def check_actuals(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    def right(cells: Mapping[tuple[int, int], Cell], row: int, expected: Mapping[str, Any]) -> tuple[bool, str]:
        found = _number(cells, row, 2)
        return found is not None and abs(found - expected["actual_cents"] / 100) < 0.005, f"C{row + 1}={found}"
    return _per_row(probe, truth, "actual in C", right)


def check_formulas(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    """D is a formula over its own row's B and C that computes actual minus budget from the sheet's values."""
    def right(cells: Mapping[tuple[int, int], Cell], row: int, expected: Mapping[str, Any]) -> tuple[bool, str]:
        cell = cells.get((row, 3))
        if cell is None or not cell.formula:
            return False, f"D{row + 1} is {'empty' if cell is None else 'a constant'}"
        budget, actual = _number(cells, row, 1), _number(cells, row, 2)
        try:
            value = evaluate(cell.value, cells)
        except ValueError as exc:
            return False, str(exc)
        own = {f"B{row + 1}", f"C{row + 1}"} <= references(cell.value)
        ok = own and budget is not None and actual is not None and abs(value - (actual - budget)) < 0.005
        return ok, f"D{row + 1}{cell.value} = {value:.2f}"
    return _per_row(probe, truth, "variance formula in D (actual minus budget of its row)", right)


def over_budget(truth: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(name, variance cents) of the over-budget centres, largest variance first."""
    rows = sorted((row for row in truth["rows"] if row["variance_cents"] > 0), key=lambda r: -r["variance_cents"])
    return [(row["name"], row["variance_cents"]) for row in rows]


def check_memo(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(MEMO)
    if text is None:
        return Verdict.failed(f"{MEMO} does not exist")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    digest = probe.sha256(WORKBOOK)
    head = re.fullmatch(r"workbook sha256 ([0-9a-fA-F]{64})", lines[0]) if lines else None
    same = head is not None and digest is not None and head[1].lower() == digest
    found = []
    for line in lines[1:]:
        match = re.fullmatch(r"(.+?)\s*:\s*(-?\d+(?:\.\d+)?)", line)
        found.append((_nfc(match[1]), round(float(match[2]) * 100)) if match else (line, None))
    want = [(_nfc(name), cents) for name, cents in over_budget(truth)]
    listed = len(found) == len(want) and all(f[0] == w[0] and f[1] is not None and abs(f[1] - w[1]) <= 1
                                             for f, w in zip(found, want, strict=False))
    evidence = (f"first line {'names' if same else 'does not name'} the saved workbook's SHA-256; "
                f"{len(found)} over-budget line(s) {'match' if listed else 'do not match'} the {len(want)} expected "
                "(name: variance, largest first)")
    return Verdict.check(same and listed, evidence)


# -- the oracle ---------------------------------------------------------------------------------------------


def _shown(ctx: OracleContext, read: Any, want: Any = None) -> Iterator[ActionLike]:
    """Wait steps until ``read(screen)`` gives ``want`` (or anything but None): the redraw may trail under TCG."""
    for _ in range(WAIT_TRIES):
        assert ctx.obs is not None
        found = read(ctx.obs["screen"])
        if (found == want) if want is not None else (found is not None):
            return
        yield {"kind": "wait", "seconds": 1}


def centre_sql(code: str, first: str, last: str) -> str:
    return (f"SELECT 'CENTRE', c.code, c.status, IFNULL(SUM(p.amount_cents), 0), c.name FROM cost_centres c "
            f"LEFT JOIN postings p ON p.code = c.code AND p.posted BETWEEN '{first}' AND '{last}' "
            f"WHERE c.code = '{code}' GROUP BY c.code;")


MEMO_PY = """import csv
with open({csv!r}, newline="", encoding="utf-8") as f:
    rows = [r for r in csv.reader(f)][1:]
over = sorted(((r[0], float(r[3])) for r in rows if len(r) > 3 and r[0] and r[3]), key=lambda r: -r[1])
with open({memo!r}, "w", encoding="utf-8") as f:
    f.write("workbook sha256 {digest}\\n" + "".join(f"{{name}}: {{v:.2f}}\\n" for name, v in over if v > 0))
print(open({memo!r}, encoding="utf-8").read())
"""


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Per bar: its code and budget off the Board pack (GUI), its name, status and actual from the ledger (CLI),
    its row typed into Gnumeric (GUI); then save, and the memo from the saved workbook (CLI)."""
    truth, targets = ctx.truth, ctx.truth["targets"]
    tab = targets["tabs"][truth["quarter"] - 1]
    yield {"kind": "click", "x": tab[0], "y": tab[1]}
    yield from _shown(ctx, lambda s: bb.shown_title(s, targets), bb.title_text(truth["quarter"]))
    sx, sy, sw, _sh = truth["sheet"]
    row, on_sheet = 2, False
    for bar in range(truth["bars"]):
        assert ctx.obs is not None
        code = bb.read_code(ctx.obs["screen"], targets, bar)
        point = targets["bars"][bar]
        yield {"kind": "click", "x": point[0], "y": point[1]}
        on_sheet = False
        yield from _shown(ctx, lambda s, b=bar: bb.read_value(s, targets, b))
        budget = bb.read_value(ctx.obs["screen"], targets, bar)
        sql = centre_sql(code, truth["first"], truth["last"])
        yield {"kind": "shell", "command": f"sqlite3 -separator '|' {DB} {shlex.quote(sql)}"}
        found = re.search(r"^CENTRE\|(CC\d+)\|(open|closed)\|(-?\d+)\|(.+?)\s*$",
                          ctx.obs.get("terminal", "").replace("\r", ""), re.M)
        if found is None or found[2] != "open":
            continue
        cents = int(found[3])
        actual = f"{'-' if cents < 0 else ''}{abs(cents) // 100}.{abs(cents) % 100:02d}"
        yield {"kind": "click", "x": sx + sw // 2, "y": max(sy - 10, 1)}  # Gnumeric's title bar: focus, cell kept
        yield {"kind": "type", "text": f"{found[4]}\t{budget}\t{actual}\t=C{row}-B{row}\n"}
        row, on_sheet = row + 1, True
    if not on_sheet:  # the last bar was a closed centre: the Board pack has the focus
        yield {"kind": "click", "x": sx + sw // 2, "y": max(sy - 10, 1)}
    yield {"kind": "key", "keys": "ctrl+s"}
    book = shlex.quote(WORKBOOK)
    yield {"kind": "shell", "timeout": 150,
           "command": f"timeout 120 sh -c 'until gzip -t {book} 2>/dev/null && zcat {book} | grep -q "
                      f"\"Row=.{row - 2}. Col=.3.\"; do sleep 0.5; done' && echo SAVED"}
    # Reading the saved workbook (a conversion into /tmp, its checksum printed) never writes it.
    yield {"kind": "shell", "command": f"ssconvert --export-type=Gnumeric_stf:stf_csv {book} /tmp/variance.csv "
                                       f"2>/dev/null && sha256sum {book}"}
    digest = re.search(r"^([0-9a-f]{64}) ", ctx.obs.get("terminal", ""), re.M)
    memo = MEMO_PY.format(csv="/tmp/variance.csv", memo=MEMO, digest=digest[1] if digest else "unknown")
    yield {"kind": "python", "code": memo}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Data-6",
    title="Type the quarter's budget variance into Gnumeric from the board's chart and the ledger, then memo it",
    instruction=(
        "Prepare the budget-variance workbook for {quarter} ({months}). The board's budgets are in the open 'Board "
        "pack' window: click the {quarter} tab for its bar chart (the cost-centre code is under each bar), then "
        f"click a bar to show its budget, in whole euros, above it. The ledger is the SQLite database {DB}: table "
        "cost_centres (code, name, status 'open' or 'closed', closed_on) and table postings (id, code, posted as "
        "YYYY-MM-DD, kind invoice, credit_note or reversal, amount_cents signed: credit notes and reversals are "
        "negative, reverses, memo). A centre's actual for the quarter is the sum of its amount_cents posted from "
        "{first} to {last}, in euros. The workbook " + WORKBOOK + " is open in Gnumeric (only Gnumeric can save "
        "in ~/finance). Below its header, from row 2 down, type one row per cost centre on the chart that is "
        "still open (leave out closed ones): in A its name exactly as the ledger spells it, in B its budget, in C "
        "its actual in euros with the cents (for example 51234.56), and in D its variance, actual minus budget, "
        "as a formula over that row (for example =C2-B2 in row 2). Save it with Ctrl+S, keeping its name and the "
        "Gnumeric format. Then, from your shell, write " + MEMO + ": its first line is 'workbook sha256 ' "
        "followed by the SHA-256 (64 hex digits) of the saved workbook file, then one line per over-budget cost "
        "centre (variance above zero) as '<name>: <variance with 2 decimals>', largest variance first, taken "
        "from the saved workbook (ssconvert converts it to CSV). Then finish with done."),
    channels=Channels(
        gui="reveal each bar's budget in the Board pack, type each centre's row (name, budget, actual, variance "
            "formula) into Gnumeric and save the workbook",
        cli="look up each charted code's name, status and quarter actual in the ledger; convert the saved workbook "
            "and write the memo with its checksum and the over-budget centres",
        why_both="the budgets exist only as pixels in the Board pack and the workbook only Gnumeric can save, while "
                 "the names and actuals are in a ledger only the shell can open and the memo (the saved "
                 "workbook's checksum and figures) belongs in the shell's outbox"),
    setup=setup,
    clauses=(
        Clause("workbook_saved", "the workbook Gnumeric saved holds data rows", check_workbook, critical=True),
        Clause("centre_names", "one row per open charted centre, named exactly as the ledger spells it",
               check_names, weight=2.0, critical=True, cap=0.3),
        Clause("budgets", "each row's budget is the chart's figure for the quarter", check_budgets, weight=2.0,
               critical=True, cap=0.5),
        Clause("actuals", "each row's actual is the ledger's signed sum for the quarter", check_actuals,
               weight=2.0, critical=True, cap=0.5),
        Clause("variance_formulas", "each variance is a formula over its own row: actual minus budget",
               check_formulas, critical=True, cap=0.5),
        Clause("memo", "the memo names the saved workbook's SHA-256 and its over-budget centres, largest first",
               check_memo, critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(WORKBOOK, "gui", description="~/finance/budget-variance.gnumeric (saved by Gnumeric)"),
        Deliverable(MEMO, "cli", description="~/outbox/variance-memo.txt"),
    ),
    rules=(GuiArtifactViaCli([WORKBOOK], "the workbook must be typed and saved in Gnumeric"),),
    withheld=("rows",),
    oracle=oracle,
    profile="full",
    apps=("gnumeric", "Board pack (python3-tk)", "sqlite3", "ssconvert"),
    max_steps=160,  # the oracle takes 31-45 steps, and up to WAIT_TRIES waits per redraw
    time_budget_s=1800.0,
)
