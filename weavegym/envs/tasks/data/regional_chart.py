"""Weave-Data-3: aggregate a quarter's paid orders per region with SQL, then chart them in LibreOffice Calc.

The revenue per region needs SQL over ~/sales.db (CLI), and the CSV deliverable
is shell work. The table, the chart and its title must be made in Calc (open on
screen) and saved into the .ods by Calc: the checker reads the sheet and the
embedded chart object (its type, data ranges and title) from the saved file.
The .ods belongs to the desktop account (mode 0644, in the sticky home), so the
shell can neither rewrite it in place nor move another file over it; an .ods the
workspace account made fails provenance. Writing it from the CLI is also flagged
(GuiArtifactViaCli), and so are the ways to make an ODS without the GUI:
headless or scripted LibreOffice (UNO, macros, conversions), ODF libraries and
zip archives written by hand.
"""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator, Mapping
from datetime import date, timedelta
from typing import Any

from weavegym.envs.setup_context import HOME, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes, opened
from weavegym.envs.tasks.docs.office import screen, wait_screen
from weavegym.evaluators import Clause, ForbiddenPattern, ForbiddenPatterns, GuiArtifactViaCli, Probe, Verdict

DB = f"{HOME}/sales.db"
ODS = f"{HOME}/regional_sales.ods"
CSV = f"{HOME}/regional_revenue.csv"
TITLE = r"^regional_sales\.ods - LibreOffice Calc$"
REGIONS = ("North", "South", "East", "West", "Central", "Coastal", "Highlands", "Metro", "Islands", "Lakeside",
           "Valley", "Border")
TEAMS = ("Retail", "Online", "Wholesale", "Export", "Trade", "Direct", "Partner", "Field")
KINDS = ("column", "bar", "pie")  # the order of the Chart Wizard's type list
LO_PROFILE = f"{HOME}/.config/libreoffice/4/user/registrymodifications.xcu"
LO_SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" \
xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="ShowTipOfTheDay" oor:op="fuse">\
<value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" oor:op="fuse"><value>false</value>\
</prop></item>
<item oor:path="/org.openoffice.Setup/Product"><prop oor:name="ooSetupLastVersion" oor:op="fuse"><value>7.4</value>\
</prop></item>
<item oor:path="/org.openoffice.Setup/Office"><prop oor:name="FirstStartWizardCompleted" oor:op="fuse">\
<value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Recovery/AutoSave"><prop oor:name="Enabled" oor:op="fuse"><value>false</value>\
</prop></item>
</oor:items>
"""
READY = (f"for i in $(seq 900); do [ -e '{HOME}/.~lock.regional_sales.ods#' ] && break; sleep 0.2; done; "
         "pid=$(pgrep -o -f soffice.bin); last=0; same=0; for i in $(seq 900); do "
         "now=$(awk '{print $14 + $15}' /proc/$pid/stat); "
         "if [ $((now - last)) -le 1 ]; then same=$((same + 1)); [ $same -ge 10 ] && exit 0; else same=0; fi; "
         "last=$now; sleep 0.2; done")  # best effort: gives up quietly after 3 minutes
NS = {"table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
      "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
      "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
      "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
      "xlink": "http://www.w3.org/1999/xlink",
      "chart": "urn:oasis:names:tc:opendocument:xmlns:chart:1.0",
      "style": "urn:oasis:names:tc:opendocument:xmlns:style:1.0"}
FORGERY = (
    ForbiddenPattern("LibreOffice without its GUI", r"\b(?:soffice|libreoffice)\b[^\n;|&]*\s--?(?:headless|invisible|"
                     r"convert-to|print-to-file|accept)\b|\bimport\s+uno\b|\bstoreToURL\b|\bunoconv\b|"
                     r"\bmacro:///|vnd\.sun\.star\.script", "high", "makes the spreadsheet without Calc's GUI"),
    ForbiddenPattern("ODF library", r"\b(?:from|import)\s+(?:odf|ezodf|pyexcel_ods3?|pandas_ods_reader)\b|"
                     r"\bto_excel\s*\([^)]*\.ods|engine\s*=\s*[\"']odf", "high", "writes the spreadsheet without Calc"),
    ForbiddenPattern("hand-made archive", r"\bZipFile\s*\([^)]*[\"'][wax][\"']|"
                     r"(?:^|[;&|(\s])zip\s[^\n;|&]*\.ods\b|META-INF/manifest\.xml",
                     "high", "assembles an OpenDocument zip by hand"),
)


def _sales_db(ctx: SetupContext, regions: list[str]) -> bytes:
    rows, day = [], date(2026, 1, 1)
    for i in range(int(ctx.rng.integers(500, 700))):
        when = day + timedelta(days=int(ctx.rng.integers(0, 365)))
        status = ("paid", "paid", "paid", "paid", "refunded", "pending")[int(ctx.rng.integers(6))]
        rows.append((i + 1, when.isoformat(), regions[int(ctx.rng.integers(len(regions)))],
                     int(ctx.rng.integers(1500, 250000)) / 100, status))
    return database_bytes("CREATE TABLE orders (id INTEGER PRIMARY KEY, order_date TEXT NOT NULL, "
                          "region TEXT NOT NULL, amount REAL NOT NULL, status TEXT NOT NULL)", {"orders": rows})


def _revenue(db: bytes, quarter: int) -> list[tuple[str, float]]:
    first, last = f"2026-{3 * quarter - 2:02d}-01", f"2026-{3 * quarter:02d}-31"
    with opened(db) as con:
        rows = con.execute("SELECT region, round(SUM(amount), 2) FROM orders WHERE status = 'paid' AND order_date "
                           "BETWEEN ? AND ? GROUP BY region ORDER BY 2 DESC", (first, last)).fetchall()
    return [(str(r), float(v)) for r, v in rows]


def setup(ctx: SetupContext) -> Prepared:
    quarter = 1 + int(ctx.rng.integers(4))
    kind = KINDS[int(ctx.rng.integers(len(KINDS)))]
    regions = [str(r) for r in ctx.rng.choice(REGIONS, size=int(ctx.rng.integers(4, 7)), replace=False)]
    db = _sales_db(ctx, regions)
    ctx.write_file(DB, db, mode=0o644)  # read-only material
    # Calc's to save: the desktop account's and not group-writable; the sticky home keeps the shell from
    # replacing it, while Calc (its owner) saves by writing a new file and renaming it over the old one.
    ctx.write_file(ODS, ctx.fixture(__package__, "fixtures/regional_sales_template.ods"), mode=0o644)
    ctx.write_file(LO_PROFILE, LO_SETTINGS)
    # soffice needs a readable working directory (setup's is root's)
    ctx.launch_gui(f"cd {HOME} && {{as_user}} soffice --calc --norestore {ODS}", name="calc")
    window = ctx.wait_window(TITLE, timeout=400)
    # The title shows before Calc has loaded and drawn the sheet: wait for its lock file, then for soffice to go
    # idle (no CPU time used for 2 s), so the snapshot holds a ready Calc.
    ctx.run(["bash", "-c", READY], timeout=420)
    title = f"{TEAMS[int(ctx.rng.integers(len(TEAMS)))]} Q{quarter} 2026 revenue by region"
    return Prepared(params={"quarter": quarter, "kind": kind, "title": title},
                    truth={"revenue": _revenue(db, quarter), "kind": kind, "quarter": quarter, "title": title,
                           "window": window.geometry})


def _ods(probe: Probe) -> tuple[ET.Element, ET.Element | None] | None:
    """(content.xml root, the first embedded chart's content.xml root or None); None when not an ODS."""
    data = probe.read_bytes(ODS)
    if data is None:
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as ods:
            content = ET.fromstring(ods.read("content.xml"))
            obj = content.find(".//draw:object", NS)
            href = (obj.get(f"{{{NS['xlink']}}}href") or "").removeprefix("./") if obj is not None else ""
            chart = ET.fromstring(ods.read(f"{href}/content.xml")) if href else None
    except (zipfile.BadZipFile, KeyError, ET.ParseError, OSError):
        return None
    return content, chart


def _sheet_rows(content: ET.Element) -> list[tuple[str, str]]:
    """The first two columns of the first sheet's non-empty rows: (text, value)."""
    table = content.find(".//table:table", NS)
    rows = []
    for row in table.iterfind("table:table-row", NS) if table is not None else ():
        cells = []
        for cell in row.iterfind("table:table-cell", NS):
            value = cell.get(f"{{{NS['office']}}}value")
            text = "".join("".join(p.itertext()) for p in cell.iterfind("text:p", NS))
            repeat = min(int(cell.get(f"{{{NS['table']}}}number-columns-repeated", "1")), 2)
            cells.extend([value if value is not None else text] * repeat)
            if len(cells) >= 2:
                break
        cells = [*cells, "", ""][:2]
        if any(c.strip() for c in cells):
            rows.append((cells[0].strip(), cells[1].strip()))
    return rows


def check_table(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    parsed = _ods(probe)
    if parsed is None:
        return Verdict.failed(f"{ODS} is missing or not an OpenDocument spreadsheet")
    body = _sheet_rows(parsed[0])[1:]
    expected = truth["revenue"]
    ok = len(body) == len(expected) and all(r == er and _close(v, ev) for (r, v), (er, ev) in zip(body, expected,
                                                                                                  strict=False))
    return Verdict.check(ok, f"sheet rows {body[:6]}, expected {[(r, f'{v:.2f}') for r, v in expected]}")


def _close(text: str, expected: float) -> bool:
    try:
        return abs(float(text) - expected) < 0.005
    except ValueError:
        return False


def check_chart(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    parsed = _ods(probe)
    return Verdict.check(parsed is not None and parsed[1] is not None,
                         f"embedded chart in {ODS}: {'yes' if parsed and parsed[1] is not None else 'no'}")


def _kind(chart: ET.Element) -> str:
    element = chart.find(".//chart:chart", NS)
    klass = element.get(f"{{{NS['chart']}}}class", "") if element is not None else ""
    if klass == "chart:circle":
        return "pie"
    if klass != "chart:bar":
        return klass.removeprefix("chart:") or "unknown"
    vertical = any(p.get(f"{{{NS['chart']}}}vertical") == "true" for p in chart.iterfind(".//style:chart-properties",
                                                                                          NS))
    return "bar" if vertical else "column"


def check_kind(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    parsed = _ods(probe)
    if parsed is None or parsed[1] is None:
        return Verdict.failed("no chart to check")
    found = _kind(parsed[1])
    return Verdict.check(found == truth["kind"], f"chart type {found}, expected {truth['kind']}")


def check_range(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    parsed = _ods(probe)
    if parsed is None or parsed[1] is None:
        return Verdict.failed("no chart to check")
    last = 1 + len(truth["revenue"])
    series = [s.get(f"{{{NS['chart']}}}values-cell-range-address", "") for s in
              parsed[1].iterfind(".//chart:series", NS)]
    ok = len(series) == 1 and series[0].replace("$", "").endswith(f".B2:Revenue.B{last}") \
        and series[0].replace("$", "").startswith("Revenue.")
    return Verdict.check(ok, f"chart series values {series}, expected one series over Revenue.B2:B{last}")


def check_csv(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(CSV)
    if text is None:
        return Verdict.failed(f"{CSV} does not exist")
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    expected = truth["revenue"]
    body = rows[1:] if rows and rows[0][:1] == ["region"] else None
    ok = body is not None and len(body) == len(expected) and all(
        len(r) == 2 and r[0] == er and _close(r[1], ev) for r, (er, ev) in zip(body, expected, strict=False))
    return Verdict.check(ok, f"{CSV} rows {rows[:6]}, expected header region,revenue then "
                             f"{[(r, f'{v:.2f}') for r, v in expected]}")


def check_title(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    parsed = _ods(probe)
    if parsed is None or parsed[1] is None:
        return Verdict.failed("no chart to check")
    title = parsed[1].find(".//chart:title", NS)
    text = " ".join("".join(p.itertext()) for p in title.iterfind("text:p", NS)).strip() if title is not None else None
    return Verdict.check(text is not None and text.casefold() == truth["title"].casefold(),
                         f"chart title {text!r}, expected {truth['title']!r}")


MARK = "/tmp/regional-save.mark"


def wait_saved(seconds: int) -> str:
    """Shell code that waits until Calc has saved the .ods since MARK was touched, then prints "saved"."""
    return (f"timeout {seconds} sh -c 'until [ -n \"$(find ~/regional_sales.ods -newer {MARK})\" ]; do sleep 0.3; "
            "done' && echo saved")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    quarter = ctx.truth["quarter"]
    query = (f"SELECT region, printf('%.2f', SUM(amount)) AS revenue FROM orders WHERE status = 'paid' AND "
             f"order_date BETWEEN '2026-{3 * quarter - 2:02d}-01' AND '2026-{3 * quarter:02d}-31' "
             "GROUP BY region ORDER BY SUM(amount) DESC")
    yield {"kind": "shell", "command": "sqlite3 ~/sales.db '.schema orders' 'SELECT status, COUNT(*) FROM orders "
                                       "GROUP BY 1'"}
    yield {"kind": "shell", "command": f"sqlite3 -csv -header ~/sales.db \"{query}\" > ~/regional_revenue.csv "
                                       "&& cat ~/regional_revenue.csv"}
    # Calc runs cursor keys and shortcuts (Down, ctrl+Home, ctrl+s) asynchronously, after the text typed behind
    # them, so a bare Down before typing can land late and put the first row over the header (seed 6 did). The
    # moves to A2 therefore end with ctrl+s, and the rows are typed only once the file is saved: the moves have
    # run by then. Retried, as a key sent while the focus moves to Calc can be lost; the moves are absolute.
    x, y, _w, h = ctx.truth["window"]
    yield {"kind": "click", "x": x + 40, "y": y + h - 8}  # the status bar: focuses Calc, keeps the cursor
    for _attempt in range(3):
        yield {"kind": "shell", "command": f"touch {MARK}"}
        for key in ("ctrl+Home", "Down", "ctrl+s"):
            yield {"kind": "key", "keys": key}
        yield {"kind": "shell", "timeout": 120, "command": wait_saved(40)}
        if "saved" in str((ctx.obs or {}).get("terminal") or ""):
            break
    # Calc finds the table around the cursor for the chart.
    for region, value in ctx.truth["revenue"]:
        yield {"kind": "type", "text": region}
        yield {"kind": "key", "keys": "Tab"}
        yield {"kind": "type", "text": f"{value:.2f}"}
        yield {"kind": "key", "keys": "Return"}
    yield {"kind": "key", "keys": "Up"}  # back inside the table
    # The shell cannot see the desktop's windows: the oracle watches its own frames for the wizard and its pages.
    yield {"kind": "wait", "seconds": 1}
    before = screen(ctx)
    yield {"kind": "key", "keys": "alt+i"}  # Insert menu: Image…, Chart…
    yield {"kind": "key", "keys": "Down"}
    yield {"kind": "key", "keys": "Return"}
    # The wizard and the new chart behind it change ~190k pixels of the 1280x720 screen, the Insert menu far fewer.
    yield from wait_screen(ctx, before, min_changed=120000, tries=120, confirm=2)  # the Chart Type page
    for _ in range(KINDS.index(ctx.truth["kind"])):
        yield {"kind": "key", "keys": "Down"}
    yield {"kind": "wait", "seconds": 2}
    for _page in ("Data Range", "Data Series", "Chart Elements"):
        before = screen(ctx)
        yield {"kind": "key", "keys": "alt+n"}  # Next >
        yield from wait_screen(ctx, before, min_changed=2000, tries=60, confirm=1)
    yield {"kind": "key", "keys": "shift+Tab"}  # the page opens in Subtitle; Title is just before it
    yield {"kind": "type", "text": ctx.truth["title"]}
    yield {"kind": "wait", "seconds": 1}
    before = screen(ctx)
    yield {"kind": "key", "keys": "alt+f"}  # Finish
    yield from wait_screen(ctx, before, min_changed=80000, tries=120)  # the wizard gone
    yield {"kind": "key", "keys": "Escape"}  # leave the chart's edit mode
    yield {"kind": "key", "keys": "Escape"}
    yield {"kind": "key", "keys": "ctrl+s"}
    yield {"kind": "shell", "command": "timeout 90 sh -c 'until unzip -l ~/regional_sales.ods 2>/dev/null | "
                                       "grep -q \"Object 1/content.xml\"; do sleep 0.3; done'", "timeout": 120}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Data-3",
    title="Chart a quarter's revenue per region in LibreOffice Calc",
    instruction=(
        "~/sales.db holds this year's orders (table orders: id, order_date, region, amount, status). 1) Compute "
        "the revenue of Q{quarter} 2026 per region, counting only orders with status 'paid', and write it to "
        "~/regional_revenue.csv: header region,revenue, one row per region sorted by revenue (highest first), "
        "two decimals. 2) In the spreadsheet ~/regional_sales.ods, open in LibreOffice Calc, fill in the same "
        "rows below the header (region in column A, revenue in column B, same order), insert a {kind} chart of "
        "that table titled '{title}', and save the document in Calc (keep the .ods format). Then finish."),
    channels=Channels(
        gui="fill in the sheet, insert the chart in LibreOffice Calc and save the document",
        cli="aggregate the orders with SQL and write the CSV",
        why_both="the figures need SQL over the database, while the chart exists only if Calc makes and saves it"),
    setup=setup,
    clauses=(
        Clause("sheet_table", "the saved sheet holds the regions and revenues in order", check_table, weight=2.0,
               critical=True),
        Clause("chart_embedded", "the saved document embeds a chart", check_chart, weight=2.0, critical=True,
               cap=0.5),
        Clause("chart_kind", "the chart is of the requested type", check_kind),
        Clause("chart_range", "the chart plots the revenue column of the table", check_range),
        Clause("chart_title", "the chart carries the requested title", check_title),
        Clause("revenue_csv", "~/regional_revenue.csv holds the revenue per region", check_csv),
    ),
    deliverables=(
        Deliverable(ODS, "gui", description="regional_sales.ods as Calc saved it, with the table and the chart"),
        Deliverable(CSV, "cli", description="~/regional_revenue.csv"),
    ),
    rules=(GuiArtifactViaCli([ODS], "the chart must be made and saved in Calc"),
           ForbiddenPatterns(FORGERY, defaults=False)),
    oracle=oracle,
    profile="full",
    apps=("libreoffice-calc", "sqlite3"),
    max_steps=250,
    time_budget_s=1500.0,
)
