"""Weave-Data-5: pull the numbers for a colleague's review, who says too little and changes their mind once.

A simulated user (envs/simulated_user.py) opens with "Can you pull the numbers for my review?" and says which
region, which quarter and which revenue figure (net or gross, completed orders only) only when asked; once the
region (or, on other seeds, the quarter) was answered, the next message brings "actually, add the West region
too" (or "make it Q3, not Q2"). The orders are in ~/sales.db (SQLite, thousands of rows over two years),
readable only by the workspace account: the aggregation is shell work. Each region's quarterly revenue target
exists only as dot-matrix pixels on a Tk "Sales Targets Board" (pixel_font, drawn only once "Show targets" is
pressed, fed from a root-only file that setup deletes once the window is up), so the extract's attainment
column needs both channels. The extract goes to ~/review-extract.csv from the shell; its summary goes into the
board's report inbox, whose record lands in a root-only file.

Scoring: the CSV has exactly the final regions, each with the right revenue, target and attainment; the form
names the final regions and quarter with the right total and overall attainment; the two agree; every hidden
topic was asked before the extract was made; and the change of mind was heard.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, WORKSPACE_USER, SetupContext
from weavegym.envs.simulated_user import (
    asked_before_delivery,
    entry_point,
    first_handover,
    heard_change,
    move_chat,
    start_simulated_user,
)
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.extract_request_plan import (
    BOARD_TITLE,
    FIELDS,
    FIGURES,
    GROSS,
    NET,
    REGIONS,
    board_layout,
    board_origin,
    expected_rows,
    heading,
    plan,
    read_board,
    user_script,
)
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.dialogs import json_record
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.answers import parse_quantity
from weavegym.evaluators.provenance import Deliverable

DB = f"{HOME}/sales.db"
EXTRACT = f"{HOME}/review-extract.csv"
APP_DIR = "/usr/local/share/salestargets"
APP = f"{APP_DIR}/extract_request_board.py"
BOARD_IN = f"{PRIVATE_DIR}/extract-request-board.json"
RECORD = f"{PRIVATE_DIR}/extract-request-report.json"
CHAT_TITLE = "Chat: numbers for my review"
HEADER = ("region", "revenue", "target", "attainment_pct")

# ---- setup -------------------------------------------------------------------------------------------------

SCHEMA = ("CREATE TABLE orders (id INTEGER PRIMARY KEY, order_date TEXT NOT NULL, region TEXT NOT NULL, "
          "product_line TEXT NOT NULL, units INTEGER NOT NULL, gross_cents INTEGER NOT NULL, "
          "discount_cents INTEGER NOT NULL, status TEXT NOT NULL);")


def setup(ctx: SetupContext) -> Prepared:
    p = plan(ctx.rng)
    script = user_script(p)
    # The workspace account's alone (0600): a terminal on the desktop runs as the desktop account and cannot read it.
    ctx.write_file(DB, database_bytes(SCHEMA, {"orders": p["orders"]}), owner=WORKSPACE_USER, mode=0o600)
    # At the screen's right edge before the board opens at the left: centred, the chat would cover it.
    chat = start_simulated_user(ctx, script, title=CHAT_TITLE)
    chat = move_chat(ctx, chat, ctx.screen[0] - chat.width - 8, max(0, chat.y))
    window, layout = _open_board(ctx, p)
    x, y = window[0], window[1]

    def centre(box: Sequence[int]) -> list[int]:
        return [x + box[0] + box[2] // 2, y + box[1] + box[3] // 2]

    clicks = {"chat": list(entry_point(chat)), "show": centre(layout["show"]),
               "fields": [centre(box) for box in layout["fields"]], "send": centre(layout["send"])}
    replies = {t.name: t.reply for t in script.topics}
    assert script.change_of_mind is not None
    replies.update(change=script.change_of_mind.message, changed=script.change_of_mind.new_reply)
    del p["orders"]  # in the database; the truth keeps its sums
    return Prepared(params={"requester": p["requester"]}, truth={
        **p, "expected": expected_rows(p), "window": window, "layout": layout, "clicks": clicks,
        "replies": replies, "change_topic": script.change_of_mind.topic})


def _open_board(ctx: SetupContext, p: Mapping[str, Any]) -> tuple[list[int], dict[str, Any]]:
    """Start the board at the screen's left with the targets on stdin; once it is drawn (it read stdin before
    its window existed), drop the file: from then on the targets live only in the app, shown on request."""
    layout = board_layout(8, 8)
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/extract_request_board.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    rows = [[r, *map(str, p["targets"][r])] for r in p["regions"]]
    ctx.write_file(BOARD_IN, json.dumps({"heading": heading(p["year"]), "rows": rows, "layout": layout}),
                   owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {BOARD_IN} > {RECORD}", name="salestargets")
    window = ctx.wait_window(f"^{re.escape(BOARD_TITLE)}$").geometry
    try:  # mapped is not drawn (TCG): wait until the heading reads back
        wait_for(lambda: board_origin(ctx.client.screenshot(hide_cursor=True).image, window, p["year"]), 120,
                 what="the Sales Targets Board drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", BOARD_IN])
    return window, layout


# ---- the checker -------------------------------------------------------------------------------------------

def parse_extract(text: str) -> tuple[dict[str, tuple[float, float, float]], list[str]]:
    """({REGION: (revenue, target, attainment_pct)}, problems) of ~/review-extract.csv."""
    rows: dict[str, tuple[float, float, float]] = {}
    lines = [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]
    if not lines or tuple(cell.strip().casefold() for cell in lines[0]) != HEADER:
        return {}, [f"the header is {lines[0] if lines else 'missing'}, not {','.join(HEADER)}"]
    problems = []
    for number, row in enumerate(lines[1:], 2):
        try:
            region, *values = (cell.strip() for cell in row)
            revenue, target, attainment = (float(v) for v in values)
        except ValueError:
            problems.append(f"row {number} is not region,revenue,target,attainment_pct: {','.join(row)[:60]!r}")
            continue
        if region.upper() in rows:
            problems.append(f"region {region} has more than one row")
        rows[region.upper()] = (revenue, target, attainment)
    return rows, problems


def _diagnose(region: str, revenue: float, truth: Mapping[str, Any]) -> str:
    """What a wrong revenue is: another figure, or the quarter before the change of mind."""
    sums = truth["sums"].get(region, [])
    for q, cell in enumerate(sums, 1):
        for index, value in enumerate(cell):
            if abs(value / 100 - revenue) < 0.006:
                return f" ({FIGURES[index]} of Q{q})"
    return ""


def judge_rows(rows: Mapping[str, tuple[float, float, float]], truth: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether the extract has exactly the final regions, each with its revenue, target and attainment."""
    want = truth["expected"]
    if set(rows) != set(want):
        before = " (the regions before the change of mind)" if set(rows) == set(truth["first_regions"]) else ""
        return False, f"rows for {sorted(rows)}, expected {sorted(want)}{before}"
    for region, (revenue, target, attainment) in rows.items():
        cents, goal = want[region]
        if abs(revenue - cents / 100) > 0.005 + 1e-9:
            return False, f"{region}: revenue {revenue:.2f}, expected {cents / 100:.2f}" + \
                _diagnose(region, revenue, truth)
        if target != goal:
            return False, f"{region}: target {target:g}, expected {goal} (Q{truth['final_quarter']})"
        if abs(attainment - cents / goal) > 0.05 + 1e-9:
            return False, f"{region}: attainment {attainment:g} %, expected {cents / goal:.1f} %"
    return True, f"{len(rows)} row(s) for {sorted(rows)} in Q{truth['final_quarter']} {truth['year']}, " \
                 f"{truth['metric']} revenue, targets and attainment right"


def _extract(probe: Probe) -> tuple[dict[str, tuple[float, float, float]], list[str]] | None:
    text = probe.read_text(EXTRACT)
    return None if text is None else parse_extract(text)


def check_extract(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = _extract(probe)
    if found is None:
        return Verdict.failed(f"{EXTRACT} does not exist")
    rows, problems = found
    if problems:
        return Verdict.failed(f"{EXTRACT}: {'; '.join(problems[:3])}")
    ok, why = judge_rows(rows, truth)
    return Verdict.check(ok, f"{EXTRACT}: {why}")


def report_record(probe: Probe) -> dict[str, Any] | None:
    """The report inbox's record (the JSON line the board printed as it exited), or None when not sent."""
    found = json_record(probe, RECORD)
    return found if found is not None and all(isinstance(found.get(k), str) for k, _label in FIELDS) else None


def form_regions(text: str) -> set[str]:
    return {word.upper() for word in re.findall(r"[A-Za-z]+", text) if word.upper() in REGIONS}


def form_number(text: str) -> float | None:
    found = parse_quantity(text.replace("EUR", "").replace("€", "").replace("%", ""))
    return None if found is None else found[0]


def judge_form(record: Mapping[str, str], truth: Mapping[str, Any]) -> tuple[bool, str]:
    want = truth["expected"]
    regions = form_regions(record["regions"])
    if regions != set(want):
        return False, f"regions {record['regions']!r}, expected {sorted(want)}"
    period = re.fullmatch(r"\s*Q([1-4])\W*(\d{4})\s*|\s*(\d{4})\W*Q([1-4])\s*", record["period"], re.I)
    quarter = period and (period.group(1) or period.group(4), period.group(2) or period.group(3))
    if quarter != (str(truth["final_quarter"]), str(truth["year"])):
        return False, f"period {record['period']!r}, expected Q{truth['final_quarter']} {truth['year']}"
    total, goal = sum(c for c, _t in want.values()), sum(t for _c, t in want.values())
    value = form_number(record["total"])
    if value is None or abs(value - total / 100) > 0.005 + 1e-9:
        return False, f"total revenue {record['total']!r}, expected {total / 100:.2f}"
    value = form_number(record["attainment"])
    if value is None or abs(value - total / goal) > 0.05 + 1e-9:
        return False, f"attainment {record['attainment']!r}, expected {total / goal:.1f} %"
    return True, f"{sorted(regions)}, Q{quarter[0]} {quarter[1]}, total {total / 100:.2f}, {total / goal:.1f} %"


def check_form(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    record = report_record(probe)
    if record is None:
        return Verdict.failed("the report inbox was not sent")
    ok, why = judge_form(record, truth)
    return Verdict.check(ok, f"the report sent: {why}")


def check_agree(probe: Probe, _truth: Mapping[str, Any]) -> Verdict:
    record, found = report_record(probe), _extract(probe)
    if record is None or found is None or not found[0]:
        return Verdict.failed(f"needs both the report sent ({'yes' if record else 'no'}) and rows in {EXTRACT} "
                              f"({'yes' if found and found[0] else 'no'})")
    rows = found[0]
    total, goal = sum(r[0] for r in rows.values()), sum(r[1] for r in rows.values())
    said, value = form_regions(record["regions"]), form_number(record["total"])
    rate = form_number(record["attainment"])
    ok = said == set(rows) and value is not None and abs(value - total) <= 0.005 * len(rows) + 1e-9 and \
        rate is not None and goal > 0 and abs(rate - 100 * total / goal) <= 0.05 + 1e-9
    return Verdict.check(ok, f"the report says {sorted(said)}, {record['total']!r}, {record['attainment']!r} %; "
                             f"{EXTRACT} sums {sorted(rows)} to {total:.2f} of {goal:g} target")


def made_at(probe: Probe, _truth: Mapping[str, Any]) -> float | None:
    """When the extract was made (guest clock): the earlier of the CSV's last write and the report's sending."""
    return first_handover(probe, [EXTRACT], json_record(probe, RECORD))


def _asked(topic: str):
    return asked_before_delivery(topic, made_at, "no extract was made")


# ---- the oracle --------------------------------------------------------------------------------------------

QUESTIONS = ("Sure! Which region is the review about?",
             "And which period: which quarter and year?",
             "Which metric do you want: gross or net revenue, or units?",
             "Got it. To be sure, which region and which quarter do you want now?")
CSV_LINE = re.compile(r"^([A-Z]+),(\d+\.\d\d),(\d+),(\d+\.\d)$", re.M)
MARKER = "EXTRACT-WRITTEN"


def final_request(replies: Mapping[str, str], change_topic: str) -> tuple[list[str], int, int, str]:
    """(regions, quarter, year, metric) from the requester's answers as the chat shows them."""
    final = {**replies, change_topic: replies["changed"]}
    regions = sorted(r for r in REGIONS if re.search(rf"\b{r}\b", final["region"], re.I))
    period = re.search(r"Q([1-4]) (\d{4})", final["period"])
    assert period is not None
    return regions, int(period.group(1)), int(period.group(2)), NET if final["metric"].startswith("Net") else GROSS


def extract_sql(regions: Sequence[str], quarter: int, year: int, metric: str, board: Mapping[str, list[int]]
                ) -> str:
    """One query that writes the extract: the board's targets as a VALUES table joined to the orders."""
    values = ", ".join(f"('{r}', {board.get(r, [0] * 4)[quarter - 1]})" for r in regions)
    amount = "o.gross_cents - o.discount_cents" if metric == NET else "o.gross_cents"
    start, end = f"{year}-{3 * quarter - 2:02d}-01", f"{year + quarter // 4}-{(3 * quarter) % 12 + 1:02d}-01"
    return (f"WITH t(region, target) AS (VALUES {values}) SELECT t.region AS region, "
            f"printf('%.2f', SUM({amount}) / 100.0) AS revenue, t.target AS target, "
            f"printf('%.1f', SUM({amount}) * 1.0 / t.target) AS attainment_pct FROM orders o "
            f"JOIN t ON upper(o.region) = t.region WHERE o.status = 'completed' AND o.order_date >= '{start}' "
            f"AND o.order_date < '{end}' GROUP BY t.region ORDER BY t.region")


def parse_extract_lines(terminal: str) -> list[tuple[str, str, int]]:
    """(region, revenue, target) of each CSV row the terminal shows after the last marker."""
    text = terminal.replace("\r", "").rpartition(MARKER)[2]
    return [(m.group(1), m.group(2), int(m.group(3))) for m in CSV_LINE.finditer(text)]


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Ask in the chat, read the targets off the board, aggregate in the shell, send the report.

    The requester's answers come from ``truth["replies"]``, the texts the chat window shows: the chat is
    anti-aliased Tk text, which cannot be read back off ``obs["screen"]`` exactly.
    """
    t, truth = ctx.truth["clicks"], ctx.truth
    yield {"kind": "click", "x": t["chat"][0], "y": t["chat"][1]}
    for question in QUESTIONS:
        yield {"kind": "type", "text": question}
        yield {"kind": "key", "keys": "Return"}
    regions, quarter, year, metric = final_request(truth["replies"], truth["change_topic"])
    yield {"kind": "click", "x": t["show"][0], "y": t["show"][1]}
    board: dict[str, list[int]] = {}
    for _try in range(6):  # the board may still be drawing: read until every cell is a number
        board = read_board((ctx.obs or {})["screen"], truth["window"], year) or {}
        if board:
            break
        yield {"kind": "wait", "seconds": 1}
    sql = extract_sql(regions, quarter, year, metric, board)
    yield {"kind": "shell", "command": f"sqlite3 -header -csv ~/sales.db \"{sql}\" > {EXTRACT}; echo {MARKER}; "
                                       f"cat {EXTRACT}"}
    rows = parse_extract_lines((ctx.obs or {}).get("terminal", ""))
    total = sum(round(float(revenue) * 100) for _r, revenue, _t in rows)
    goal = sum(target for _r, _v, target in rows)
    answers = {"regions": ", ".join(regions), "period": f"Q{quarter} {year}", "total": f"{total / 100:.2f}",
               "attainment": f"{total / goal:.1f}" if goal else "0"}
    for (key, _label), (x, y) in zip(FIELDS, t["fields"], strict=True):
        yield {"kind": "click", "x": x, "y": y}
        yield {"kind": "type", "text": answers[key]}
    yield {"kind": "click", "x": t["send"][0], "y": t["send"][1]}
    # The board writes its record as it exits; pgrep sees every account's processes ([d]: not this sh itself).
    yield {"kind": "shell", "command": "timeout 60 sh -c 'while pgrep -f \"extract_request_boar[d]\" >/dev/null; "
                                       "do sleep 0.2; done'", "timeout": 90}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Data-5",
    title="Pull the numbers for a colleague's review (a simulated user with hidden preferences and a change of "
          "mind)",
    instruction=(
        "{requester} has a request for you in the chat window on the desktop; ask them there about anything you "
        "need to know. The sales orders are in ~/sales.db (SQLite, table orders; amounts in cents). Each "
        "region's quarterly revenue target is on the 'Sales Targets Board' window (press 'Show targets'). "
        "1) From your shell, write the extract to ~/review-extract.csv: the header line "
        "region,revenue,target,attainment_pct, then one row per region {requester} wants, with the region's "
        "name as the board shows it, its revenue in euros (2 decimals) for the period and figure they want, "
        "its target for that quarter in euros, and attainment_pct = 100 x revenue / target (1 decimal). "
        "2) In the board's report inbox, enter the regions, the period (e.g. Q1 2024), the extract's total "
        "revenue and its overall attainment (100 x total revenue / total target), press 'Send report', then "
        "finish."),
    channels=Channels(
        gui="chat with the requester, read the targets off the board and send its report inbox",
        cli="aggregate the orders in ~/sales.db and write ~/review-extract.csv",
        why_both="the requester's answers exist only in the desktop chat and the targets only as pixels, the "
                 "report's record only through the GUI, while the orders are readable only by the shell's "
                 "account and the extract must come from the shell"),
    setup=setup,
    clauses=(
        Clause("extract_rows", "~/review-extract.csv has exactly the final regions with revenue, target and "
                               "attainment right", check_extract, weight=2.0, critical=True, cap=0.5),
        Clause("report_sent", "the report inbox names the final regions and quarter with the right total and "
                              "attainment", check_form, weight=2.0, critical=True, cap=0.5),
        Clause("report_matches_extract", "the report's regions, total and attainment agree with the CSV",
               check_agree),
        Clause("asked_region", "the region was asked before the extract was made", _asked("region")),
        Clause("asked_period", "the period was asked before the extract was made", _asked("period")),
        Clause("asked_metric", "the revenue figure was asked before the extract was made", _asked("metric")),
        Clause("heard_change", "the agent checked back after the answer and heard the change of mind",
               heard_change),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the report inbox's record (captured by setup)"),
        Deliverable(EXTRACT, "cli", description="~/review-extract.csv"),
    ),
    withheld=("sums", "targets", "expected", "regions", "final_regions", "final_quarter", "metric"),
    oracle=oracle,
    apps=("python3-tk", "sqlite3"),
    max_steps=60,
    time_budget_s=900.0,
    simulated_user=True,
)
