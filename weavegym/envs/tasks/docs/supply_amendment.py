"""Weave-Docs-4: bill a quarter of electricity under a price amendment that exists only as a scan, and answer a
question about the bill.

The agreement's terms (sites, peak hours, Schedule A's rates, the period's spend cap, the site review level) and
about two hundred daily CSVs of half-hourly meter readings are in /srv/metering, a folder only the workspace
account can read (a desktop terminal sees nothing). The signed amendment that changes the rates from an
effective date inside the period exists only as pixels: a Tk "Document Viewer" (desktop account) shows its
four pages as dot-matrix text (``pixel_font``) one page per button, fed from a root-only stdin file that setup
deletes once the cover is drawn; the schedule page with the effective date and the new rates is never the
first one shown. The seeds are drawn so that every question's answer differs without the amendment. The
question varies by seed (the period's total, the day the running total passes the cap, the sites over the
review level); the answer is scored from ``done(answer=...)``, the per-site table the shell writes to
~/site-charges.csv, and the amount approved in the viewer's form (a root-only record).
"""

from __future__ import annotations

import calendar
import csv
import datetime as dt
import io
import json
import re
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.dialogs import json_record
from weavegym.envs.tasks.docs import _metering as metering
from weavegym.envs.tasks.pixel_font import read_text
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.answers import check_date, check_items, check_number
from weavegym.evaluators.provenance import Deliverable

FOLDER = "/srv/metering"
TABLE = f"{HOME}/site-charges.csv"
COLUMNS = ("site", "peak_kwh", "offpeak_kwh", "standing_eur", "energy_eur", "total_eur")
APP_DIR = "/usr/local/share/documentviewer"
APP = f"{APP_DIR}/document_viewer.py"
DOC_IN = f"{PRIVATE_DIR}/document.json"
BUNDLE = f"{PRIVATE_DIR}/metering.tgz"
RECORD = f"{PRIVATE_DIR}/approval.json"
TITLE = "Document Viewer"
PAGES = 4
SIGNERS = ("J. OKAFOR", "M. LINDQVIST", "A. ROSSI", "K. TANAKA", "S. MORENO", "P. HOLM", "R. IYER", "D. WEBER")
MONTHS = tuple(calendar.month_name[i].upper() for i in range(1, 13))
TOLERANCE = 0.01  # euros: an answer rounded to the cent is within half a cent of the exact bill

# The viewer's geometry (pixels inside its window): the fixture draws here, the oracle reads and clicks here.
WIDTH, HEIGHT = 900, 600
CANVAS = (130, 10, 760, 500)
SCALE, TEXT_X, HEADER_Y, RULE_Y, FIRST_LINE_Y, LINE_H, LINES, LINE_CHARS = 2, 24, 14, 40, 52, 22, 20, 58
WAIT_TRIES = 20


def layout() -> dict[str, Any]:
    """Where the viewer puts everything, the same for every seed (so none of it says anything secret)."""
    return {"width": WIDTH, "height": HEIGHT, "canvas": list(CANVAS), "scale": SCALE, "text_x": TEXT_X,
            "header_y": HEADER_Y, "rule_y": RULE_Y, "first_line_y": FIRST_LINE_Y, "line_h": LINE_H,
            "buttons": [[10, 12 + i * 44, 110, 36] for i in range(PAGES)], "entry": [356, 518, 220, 32],
            "approve": [690, 516, 200, 36], "status_y": 562}


# -- the scan ---------------------------------------------------------------------------------------------------


def _spoken_date(iso: str) -> str:
    year, month, day = (int(p) for p in iso.split("-"))
    return f"{day} {MONTHS[month - 1]} {year}"


def _rate(value: int) -> str:
    return f"{value / 10000:.4f}"


def document(world: Mapping[str, Any], rng: np.random.Generator) -> tuple[list[list[str]], int]:
    """The amendment's pages (upper-case lines the dot-matrix font draws) and the schedule's page number (2 or 3,
    never the cover the viewer opens on)."""
    contract, old, new = world["contract"], world["schedule_a"], world["amendment"]
    number = int(rng.integers(1, 5))
    cover = [f"AMENDMENT NO. {number}", f"TO THE ELECTRICITY SUPPLY AGREEMENT {contract}", "(THE AGREEMENT)", "",
             "BETWEEN", world["customer"].upper(), "(THE CUSTOMER)", "AND", world["supplier"].upper(),
             "(THE SUPPLIER)", "", "THE PARTIES AGREE TO AMEND SCHEDULE A (PRICES) OF THE",
             "AGREEMENT AS SET OUT IN THIS DOCUMENT."]
    terms = ["1. DEFINITIONS", "WORDS DEFINED IN THE AGREEMENT HAVE THE SAME MEANING HERE.", "",
             "2. SCOPE", "THIS AMENDMENT REPLACES THE RATES OF SCHEDULE A WITH THOSE",
             "OF SCHEDULE B. THE SITES, THE PEAK HOURS, THE SPEND CAP", "AND THE SITE REVIEW LEVEL ARE UNCHANGED.",
             "", "3. TRANSITION", "DAYS BEFORE THE EFFECTIVE DATE ARE BILLED AT THE RATES OF",
             "SCHEDULE A; THE EFFECTIVE DATE AND LATER DAYS AT THE RATES", "OF SCHEDULE B.", "",
             "4. ALL OTHER TERMS OF THE AGREEMENT REMAIN IN FORCE."]
    items = (("PEAK ENERGY (EUR/KWH)", "peak"), ("OFF-PEAK ENERGY (EUR/KWH)", "offpeak"),
             ("STANDING CHARGE (EUR/DAY)", "standing"))
    schedule = ["SCHEDULE B - AMENDED RATES", f"AGREEMENT {contract}", "",
                f"EFFECTIVE FROM: {_spoken_date(new['effective'])}", "",
                f"{'ITEM':<28}{'SCHEDULE A':>12}{'SCHEDULE B':>12}",
                *(f"{label:<28}{_rate(old[key]):>12}{_rate(new[key]):>12}" for label, key in items), "",
                "STANDING CHARGES ARE PER SITE. RATES EXCLUDE VAT."]
    effective = dt.date.fromisoformat(new["effective"])
    signed = [(effective - dt.timedelta(days=int(rng.integers(4, 30)))).isoformat() for _ in range(2)]
    names = rng.choice(SIGNERS, size=2, replace=False)
    signatures = ["SIGNED FOR THE CUSTOMER", f"NAME: {names[0]}", f"DATE: {_spoken_date(signed[0])}", "",
                  "SIGNED FOR THE SUPPLIER", f"NAME: {names[1]}", f"DATE: {_spoken_date(signed[1])}"]
    at = int(rng.integers(2, 4))
    middle = [schedule, terms] if at == 2 else [terms, schedule]
    return [cover, *middle, signatures], at


def _open_viewer(ctx: SetupContext, pages: list[list[str]]) -> list[int]:
    """Start the viewer with the scan on its stdin, wait until the cover is drawn, then delete the input."""
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/document_viewer.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.write_file(DOC_IN, json.dumps({"pages": pages, "layout": layout()}), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {DOC_IN} > {RECORD}", name="documentviewer")
    window = ctx.wait_window(f"^{TITLE}$").geometry
    try:  # mapped is not drawn (TCG): wait until the cover's header and last line read back (the pointer,
        # which starts in the screen's middle, would cover a letter)
        wait_for(lambda: _drawn(ctx.client.screenshot(hide_cursor=True).image, window, pages[0]), 120,
                 what="the Document Viewer's cover drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", DOC_IN])  # the viewer has read it: the amendment now lives only on screen
    return window


def _drawn(image: np.ndarray, window: Sequence[int], cover: list[str]) -> bool:
    return shown_page(image, window) == 1 and read_page(image, window)[len(cover) - 1] == cover[-1]


# -- reading the scan (the oracle's eyes) ---------------------------------------------------------------------


def shown_page(image: np.ndarray, window: Sequence[int]) -> int | None:
    x, y = window[0] + CANVAS[0] + TEXT_X, window[1] + CANVAS[1] + HEADER_Y
    match = re.fullmatch(rf"PAGE (\d) OF {PAGES}", read_text(image, x, y, SCALE, 12))
    return None if match is None else int(match[1])


def read_page(image: np.ndarray, window: Sequence[int]) -> list[str]:
    """Every text line of the page on screen ("" for a blank one)."""
    x, y = window[0] + CANVAS[0] + TEXT_X, window[1] + CANVAS[1] + FIRST_LINE_Y
    return [read_text(image, x, y + i * LINE_H, SCALE, LINE_CHARS) for i in range(LINES)]


def parse_amendment(lines: Sequence[str]) -> dict[str, Any] | None:
    """The amendment as the bill takes it (effective ISO date, Schedule B's rates in 1e-4 EUR), or None when
    the lines are not its schedule page."""
    text = "\n".join(lines)
    date = re.search(r"^EFFECTIVE FROM: (\d{1,2}) ([A-Z]+) (\d{4})$", text, re.M)
    rates = {key: re.search(rf"^{re.escape(label)}\s+\d+\.\d{{4}}\s+(\d+\.\d{{4}})$", text, re.M)
             for label, key in (("PEAK ENERGY (EUR/KWH)", "peak"), ("OFF-PEAK ENERGY (EUR/KWH)", "offpeak"),
                                ("STANDING CHARGE (EUR/DAY)", "standing"))}
    if date is None or date[2] not in MONTHS or any(m is None for m in rates.values()):
        return None
    iso = f"{int(date[3]):04d}-{MONTHS.index(date[2]) + 1:02d}-{int(date[1]):02d}"
    return {"effective": iso, **{k: round(float(m[1]) * 10000) for k, m in rates.items() if m is not None}}


# -- setup ------------------------------------------------------------------------------------------------------


def bundle(world: Mapping[str, Any]) -> bytes:
    """contract.txt and readings/ as one gzipped tar (one upload instead of two hundred)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        files = {"contract.txt": world["contract_txt"]} | {f"readings/{k}": v for k, v in world["readings"].items()}
        for name, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o600, 1780000000
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def question(kind: str) -> str:
    if kind == "total":
        return "what is the total payable for the period over all the agreement's sites, in EUR to the cent?"
    if kind == "cap":
        return ("on which date did the period's running total (all sites, counted from the period's first day) "
                "first exceed the spend cap of contract.txt? Answer with the date as YYYY-MM-DD.")
    return ("which sites' charges for the period exceed the site review level of contract.txt? Answer with their "
            "meter ids, comma-separated.")


def setup(ctx: SetupContext) -> Prepared:
    kind = metering.kind_of(ctx.seed)
    world = metering.make_world(ctx.rng)
    pages, at = document(world, ctx.rng)
    right, plain = metering.expected(world, world["amendment"]), metering.expected(world, None)
    answer = {"total": round(right["total"], 2), "cap": right["cap_date"], "sites": right["over"]}[kind]
    alone = {"total": round(plain["total"], 2), "cap": plain["cap_date"], "sites": plain["over"]}[kind]
    if answer == alone or not answer:  # make_world draws against it: the shell alone must answer wrong
        raise TaskError(f"{ctx.task_id} setup: seed {ctx.seed} answers {answer!r} without the amendment too")
    ctx.make_private_dir()
    ctx.run(["install", "-d", "-m", "0700", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, FOLDER])
    ctx.write_file(BUNDLE, bundle(world), owner="root", mode=0o600)
    # The workspace account's alone (0700 folders, 0600 files): a desktop terminal cannot read one reading.
    ctx.run(["sh", "-c", f"tar -xzf {BUNDLE} -C {FOLDER} --no-same-owner && rm -f {BUNDLE} && "
                         f"chown -R {WORKSPACE_USER}:{SHARED_GROUP} {FOLDER} && chmod 0700 {FOLDER}/readings && "
                         f"find {FOLDER} -type f -exec chmod 0600 {{}} +"])
    window = _open_viewer(ctx, pages)
    x, y = window[0], window[1]
    lay = layout()
    targets = {"pages": [_center(x, y, box) for box in lay["buttons"]], "entry": _center(x, y, lay["entry"]),
               "approve": _center(x, y, lay["approve"])}
    return Prepared(
        params={"contract": world["contract"], "start": world["start"], "end": world["end"],
                "question": question(kind)},
        truth={"kind": kind, "window": window, "targets": targets, "schedule_page": at,
               "amendment": world["amendment"], "table": right["table"], "total": right["total"],
               "answer": answer})


def _center(x: int, y: int, box: Sequence[int]) -> list[int]:
    return [x + box[0] + box[2] // 2, y + box[1] + box[3] // 2]


# -- the checker ------------------------------------------------------------------------------------------------


def check_answer(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    answer = probe.episode.answer
    if truth["kind"] == "total":
        return check_number(answer, truth["answer"], abs_tol=TOLERANCE, unit="eur")
    if truth["kind"] == "cap":
        return check_date(answer, dt.date.fromisoformat(truth["answer"]))
    return check_items(answer, truth["answer"])


def parse_table(text: str) -> dict[str, list[str]]:
    """{site: its other fields} of the CSV's rows (the header is required, as the instruction gives it)."""
    reader = csv.reader(io.StringIO(text))
    header = [c.strip().lower() for c in next(reader, [])]
    if header != list(COLUMNS):
        raise ValueError(f"the header is {','.join(header)!r}, not {','.join(COLUMNS)!r}")
    return {row[0].strip(): [c.strip() for c in row[1:]] for row in reader if row and row[0].strip()}


def _row_ok(cells: list[str], want: Sequence[float]) -> bool:
    try:
        numbers = [float(c) for c in cells]
    except ValueError:
        return False
    tolerances = (0.0015, 0.0015, 0.011, 0.011, 0.011)
    return len(numbers) == len(want) and all(abs(n - w) <= t for n, w, t in zip(numbers, want, tolerances,
                                                                                   strict=True))


def check_table(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(TABLE)
    if text is None:
        return Verdict.failed(f"{TABLE} does not exist")
    found, want = parse_table(text), truth["table"]  # a wrong header raises: that fails the clause
    right = sorted(site for site, row in want.items() if site in found and _row_ok(found[site], row))
    wrong, extra = sorted(set(want) - set(right)), sorted(set(found) - set(want))
    evidence = f"{TABLE} has right rows for {right}; missing or wrong: {wrong}; sites not in the agreement: {extra}"
    if not wrong and not extra:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if right else Verdict.failed(evidence)


def check_approval(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = json_record(probe, RECORD)
    if found is None:
        return Verdict.failed("nothing was approved for payment in the Document Viewer")
    verdict = check_number(str(found.get("amount", "")), truth["total"], abs_tol=TOLERANCE, unit="eur")
    return Verdict.check(verdict.outcome == "satisfied", f"the Document Viewer's approval: {verdict.evidence}")


# -- the oracle -------------------------------------------------------------------------------------------------

LINE = re.compile(r"^(ROW|TOTAL|CAPDATE|OVER) ?(.*?)\s*$", re.M)


def parse_output(terminal: str) -> dict[str, Any]:
    """The program's lines as the terminal shows them: rows, total, cap date and the sites over the level."""
    found: dict[str, Any] = {"rows": []}
    for match in LINE.finditer(terminal.replace("\r", "")):
        if match[1] == "ROW":
            found["rows"].append(match[2])
        else:
            found[match[1].lower()] = match[2]
    return found


def spoken(kind: str, output: Mapping[str, Any]) -> str:
    """The oracle's answer from what its program printed ("" when it printed nothing)."""
    if kind == "total":
        return f"{output['total']} EUR" if output.get("total") else ""
    if kind == "cap":
        return output.get("capdate", "")
    return ", ".join(s for s in output.get("over", "").split(";") if s)


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Schedule page (GUI), read the amendment off the screen, bill the readings (CLI), approve the total (GUI)."""
    truth, targets, window = ctx.truth, ctx.truth["targets"], ctx.truth["window"]
    page = truth["schedule_page"]
    yield {"kind": "click", "x": targets["pages"][page - 1][0], "y": targets["pages"][page - 1][1]}
    for _ in range(WAIT_TRIES):  # the click's redraw may trail the observation under TCG
        assert ctx.obs is not None
        if shown_page(ctx.obs["screen"], window) == page:
            break
        yield {"kind": "wait", "seconds": 1}
    assert ctx.obs is not None
    amendment = parse_amendment(read_page(ctx.obs["screen"], window))
    yield {"kind": "python", "code": metering.program(amendment, FOLDER, TABLE), "timeout": 120}
    output = parse_output((ctx.obs or {}).get("terminal", ""))
    if amendment is not None and output.get("total"):
        yield {"kind": "click", "x": targets["entry"][0], "y": targets["entry"][1]}
        yield {"kind": "type", "text": output["total"]}
        yield {"kind": "click", "x": targets["approve"][0], "y": targets["approve"][1]}
        # The viewer writes its record as it exits; pgrep sees every account's processes ([r]: not this sh).
        yield {"kind": "shell", "command": "timeout 60 sh -c 'while pgrep -f \"document_vie[w]er\" >/dev/null; "
                                           "do sleep 0.2; done'", "timeout": 90}
    yield {"kind": "done", "answer": spoken(truth["kind"], output)}


TASK = Task(
    id="Weave-Docs-4",
    title="Bill a quarter of electricity under a price amendment that exists only as a scan",
    instruction=(
        "The supplier's invoice under electricity supply agreement {contract} covers {start} to {end} "
        "(inclusive). The agreement's terms (its sites, peak hours, Schedule A's rates, the period's spend cap and "
        "the site review level) are in /srv/metering/contract.txt, and every meter's half-hourly readings in "
        "/srv/metering/readings/ (one CSV per day). A signed amendment to the rates exists only as a scan, open in "
        "the 'Document Viewer' window (its page buttons turn the pages). Bill the period as the agreement and the "
        "amendment say, interval by interval, without rounding before the end. 1) Write ~/site-charges.csv with "
        "the header site,peak_kwh,offpeak_kwh,standing_eur,energy_eur,total_eur and one line per site of the "
        "agreement: its peak and off-peak energy (kWh), its standing charges, its energy charges and its total "
        "(euros to the cent). 2) In the Document Viewer, enter the period's total over all sites (EUR) under "
        "'Amount approved' and press 'Approve for payment'. 3) Finish with done, answering: {question}"),
    channels=Channels(
        gui="turn the scanned amendment's pages, read its effective date and new rates, approve the total",
        cli="bill every site's half-hourly readings under Schedule A and the amendment, write the per-site table",
        why_both="the amendment's date and rates exist only as pixels of the scan (after a page click), while the "
                 "terms and the readings are in files only the shell's account can read; every answer needs both"),
    setup=setup,
    clauses=(
        Clause("answer", "the answer to the seed's question about the amended bill is right", check_answer,
               weight=2.0, critical=True),
        Clause("site_charges", "~/site-charges.csv has the right row for every site of the agreement, and no other",
               check_table),
        Clause("payment_approved", "the Document Viewer approved the period's amended total", check_approval,
               weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the Document Viewer's approval (captured by setup)"),
        Deliverable(TABLE, "cli", description="~/site-charges.csv"),
    ),
    withheld=("amendment", "table", "total", "answer"),
    oracle=oracle,
    apps=("python3-tk", "python3"),
    max_steps=50,
    time_budget_s=900.0,
)
