"""Weave-Data-8: calibrate the lab's three sensors from the bench plots, between a Bench Scope, a LIMS form and the
shell.

Three apps, the data flowing sensor by sensor between them. The Bench Scope (a Tk app, the desktop account's) shows
one sensor's calibration run at a time: its tag, 6-10 reference/raw reading pairs and their scatter plot, every
number in the dot-matrix font only (the runs reach the window from a root-only file setup deletes once drawn). One
pair of each run is a bad reading, off the line of the others. The instruments database (SQLite, the workspace
account's alone) holds each sensor's model tolerances, the factor from the bench's unit to the instrument's own,
and its calibration history. Per sensor the agent reads the run off the scope (GUI), fits gain and offset in the
shell without the bad pair and judges the drift from the previous calibration against the tolerances (CLI),
enters gain, offset and verdict in the LIMS form (a second Tk app, the desktop account's), which refuses anything
but the run's fit and then issues a random certificate number, drawn as pixels only (GUI), and adds the sensor's
line to the calibration report in a folder only the workspace account may write (CLI). The scope shows the next
run only once its entry holds the certificate of the run before. At the end the shell draws the drift plot (a
PNG) beside the report.

Scoring: the LIMS's root-only record (every sensor certified with the run's coefficients, the right verdicts), the
report's lines (tag, coefficients, verdict and the LIMS's certificate per sensor, in run order) and the drift
plot (a real, non-blank PNG of the workspace account's).
"""

from __future__ import annotations

import inspect
import json
import re
import textwrap
from collections.abc import Generator, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import DESKTOP_USER, HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.data import _calibration as cb
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.games.sgt_common import python_command
from weavegym.envs.tasks.item_records import numbered_records, per_item_verdict
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.probes_media import decode_image
from weavegym.evaluators.provenance import Deliverable

APP_DIR = "/usr/local/share/calbench"
SCOPE_IN, LIMS_IN = f"{PRIVATE_DIR}/bench-scope.json", f"{PRIVATE_DIR}/lims.json"
RECORD = f"{PRIVATE_DIR}/lims-record.jsonl"
ISSUE_DIR = "/var/lib/calbench"  # the desktop account's alone: the LIMS tells the scope what it issued
ISSUED = f"{ISSUE_DIR}/issued.txt"
DB_DIR = "/srv/instruments"
DB = f"{DB_DIR}/instruments.db"
OUT = f"{HOME}/calibration"
REPORT, PLOT = f"{OUT}/report.csv", f"{OUT}/drift.png"
HEADER = "sensor,gain,offset,verdict,certificate"
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
REPORT_LINE = re.compile(rf"^\s*([A-Za-z]{{2}}-\d{{3}})\s*,\s*({NUMBER})\s*,\s*({NUMBER})\s*,\s*([A-Za-z]+)\s*,"
                         r"\s*([A-Za-z0-9]{6})\s*$")
PLOT_MIN = (200, 150)  # the drift plot's least width and height
PLOT_INK = 0.01  # the least share of its pixels that differ from its background


# ---- setup ---------------------------------------------------------------------------------------------------

def setup(ctx: SetupContext) -> Prepared:
    world = cb.bench(ctx.rng)
    sensors = world["sensors"]
    # The instruments database is the workspace account's alone: a terminal on the desktop cannot read a row of it.
    ctx.run(["install", "-d", "-m", "0700", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, DB_DIR])
    ctx.write_file(DB, database_bytes(cb.SCHEMA, world["rows"]), owner=WORKSPACE_USER, mode=0o600)
    # The report's folder: only the workspace account may write in it.
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, OUT])
    # The certificates the LIMS issues, for the scope: the desktop account's alone (the shell cannot read them).
    ctx.run(["install", "-d", "-m", "0700", "-o", DESKTOP_USER, "-g", SHARED_GROUP, ISSUE_DIR])
    ctx.run(["env", "DISPLAY=:0", "xset", "r", "off"], user=ctx.user)  # typed numbers must not repeat a key
    for name in ("bench_scope.py", "lims_form.py"):
        ctx.write_file(f"{APP_DIR}/{name}", ctx.fixture(__package__, f"fixtures/{name}"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    scope = {"runs": [{k: s[k] for k in ("tag", "kind", "bench_unit", "pairs")} for s in sensors], "issued": ISSUED,
             "layout": cb.scope_layout()}
    lims = {"sensors": [{k: s[k] for k in ("gain", "offset", "span")} for s in sensors],
            "tolerance": [cb.GAIN_REL_TOL, cb.OFFSET_SPAN_TOL], "issued": ISSUED, "layout": cb.lims_layout()}
    scope_at = _open(ctx, SCOPE_IN, scope, f"{APP_DIR}/bench_scope.py < {SCOPE_IN}", cb.SCOPE_TITLE,
                     cb.SCOPE_HEADING, cb.SCOPE_AT)
    lims_at = _open(ctx, LIMS_IN, lims, f"{APP_DIR}/lims_form.py < {LIMS_IN} > {RECORD}", cb.LIMS_TITLE,
                    cb.LIMS_HEADING, cb.LIMS_AT)
    if scope_at[0] + cb.SCOPE_SIZE[0] > lims_at[0]:
        raise TaskError(f"{ctx.task_id} setup: the Bench Scope at {scope_at} and the LIMS at {lims_at} overlap")
    return Prepared(params={"db": DB, "report": REPORT.replace(HOME, "~"), "plot": PLOT.replace(HOME, "~")},
                    truth={"sensors": sensors, "scope_at": list(scope_at), "lims_at": list(lims_at)})


def _open(ctx: SetupContext, path: str, content: Mapping[str, Any], command: str, title: str, heading: str,
          at: Sequence[int]) -> tuple[int, int]:
    """Start one window with ``content`` on stdin, put it at ``at``, wait until its heading reads back, then delete
    the stdin file; return the window's top-left on screen."""
    ctx.write_file(path, json.dumps(content), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {command}", name=title.lower().replace(" ", "-"))
    placed = ctx.place_window(ctx.wait_window(f"^{title}$").id, at)
    try:
        found = wait_for(lambda: cb.origin(ctx.client.screenshot(hide_cursor=True).image, placed[:2], heading), 120,
                         what=f"the {title} drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", path])  # the window has read it: what it held now lives only on screen
    return found


# ---- the checker ---------------------------------------------------------------------------------------------

def lims_records(probe: Probe) -> dict[int, dict[str, Any]]:
    """{sensor: its certificate record} of the LIMS's root-only record (refusals left out)."""
    return numbered_records(probe, RECORD, "sensor", accept=lambda r: isinstance(r.get("certificate"), str))


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("nan")


def check_certified(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    records, problems = lims_records(probe), []
    for number, sensor in enumerate(truth["sensors"], 1):
        record = records.get(number)
        if record is None:
            problems.append(f"sensor {number} ({sensor['tag']}) has no certificate in the LIMS")
            continue
        gain, offset = _number(record.get("gain")), _number(record.get("offset"))
        ok_gain, ok_offset = cb.coefficients_match(gain, offset, sensor)
        problems.append("" if ok_gain and ok_offset else
                        f"sensor {number}: gain {gain:.6g}, offset {offset:.6g}; the run's fit {sensor['gain']:.6g}, "
                        f"{sensor['offset']:.6g}")
    return per_item_verdict(problems, "certified in the LIMS with the run's fit without its bad pair", "sensors")


def check_verdicts(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    records, problems = lims_records(probe), []
    for number, sensor in enumerate(truth["sensors"], 1):
        said = str(records.get(number, {}).get("verdict") or "(none)")
        problems.append("" if said == sensor["verdict"] else
                        f"sensor {number}: {said}, the drift ({cb.drift_ratio(sensor):.2f} tolerances) says "
                        f"{sensor['verdict']}")
    return per_item_verdict(problems, "the verdict the drift from the previous calibration gives", "sensors")


def parse_report(text: str | None) -> tuple[list[tuple[str, float, float, str, str]], str]:
    """([(tag, gain, offset, verdict, certificate)] in file order, problem) of the report (a header is skipped)."""
    if text is None:
        return [], f"{REPORT} does not exist"
    rows = []
    for number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip() or (number == 1 and line.replace(" ", "").lower() == HEADER):
            continue
        found = REPORT_LINE.match(line)
        if found is None:
            return [], f"{REPORT} line {number} is not '{HEADER}': {line[:80]!r}"
        rows.append((found.group(1).upper(), float(found.group(2)), float(found.group(3)), found.group(4).upper(),
                     found.group(5).upper()))
    return rows, "" if rows else f"{REPORT} has no sensor line"


def check_report(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, problem = parse_report(probe.read_text(REPORT))
    if problem:
        return Verdict.failed(problem)
    sensors, records = truth["sensors"], lims_records(probe)
    tags = [s["tag"] for s in sensors]
    if [r[0] for r in rows] != tags:
        return Verdict.failed(f"the report lists {[r[0] for r in rows]}, the bench ran {tags} in that order")
    problems = []
    for number, (sensor, (tag, gain, offset, verdict, cert)) in enumerate(zip(sensors, rows, strict=True), 1):
        want = str(records.get(number, {}).get("certificate") or "")
        if not all(cb.coefficients_match(gain, offset, sensor)):
            problems.append(f"{tag}: gain {gain:.6g}, offset {offset:.6g} are not the run's fit")
        elif verdict != sensor["verdict"]:
            problems.append(f"{tag}: verdict {verdict}, the drift says {sensor['verdict']}")
        elif not want or cert != want:
            problems.append(f"{tag}: certificate {cert!r}, the LIMS issued {want or '(none)'!r}")
    return Verdict.check(not problems, "; ".join(problems) if problems else
                         f"every sensor's fit, verdict and the LIMS's certificate, in run order ({len(rows)} lines)")


def check_plot(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    data = probe.read_bytes(PLOT)
    if data is None:
        return Verdict.failed(f"{PLOT} does not exist")
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return Verdict.failed(f"{PLOT} is not a PNG file")
    image = decode_image(data)
    if image is None:
        return Verdict.failed(f"{PLOT} does not decode as an image")
    height, width = image.shape[:2]
    if width < PLOT_MIN[0] or height < PLOT_MIN[1]:
        return Verdict.failed(f"{PLOT} is {width}x{height}, smaller than {PLOT_MIN[0]}x{PLOT_MIN[1]}")
    rgb = image[:, :, :3].astype(np.int64)
    packed = ((rgb[:, :, 0] << 16) | (rgb[:, :, 1] << 8) | rgb[:, :, 2]).ravel()
    colours, counts = np.unique(packed, return_counts=True)
    inked = 1.0 - counts.max() / len(packed)
    return Verdict.check(inked >= PLOT_INK, f"{PLOT}: {width}x{height}, {len(colours)} colours, {inked:.1%} of it "
                                            f"drawn (at least {PLOT_INK:.0%} wanted)")


# ---- the oracle ----------------------------------------------------------------------------------------------

def fit_command(run: Mapping[str, Any]) -> str:
    """The oracle's CLI step: the guest's python3 looks the sensor up in the instruments database and runs fit_run's
    and calibration_verdict's own source on the pairs read off the Bench Scope (typed as an argument)."""
    main = ("import sqlite3, sys\n"
            "tag = sys.argv[1]\n"
            "pairs = [tuple(float(v) for v in p.split(':')) for p in sys.argv[2].split(',')]\n"
            f"con = sqlite3.connect('file:{DB}?mode=ro', uri=True)\n"
            "factor, unit, tol, otol = con.execute('SELECT i.bench_to_unit, i.unit, m.gain_tol_pct, m.offset_tol "
            "FROM instruments i JOIN models m ON m.model = i.model WHERE i.tag = ?', (tag,)).fetchone()\n"
            "prev_gain, prev_offset, when = con.execute('SELECT gain, offset, cal_date FROM calibrations "
            "WHERE tag = ? ORDER BY cal_date DESC LIMIT 1', (tag,)).fetchone()\n"
            "gain, offset, bad = fit_run(pairs, factor)\n"
            "verdict = calibration_verdict(gain, offset, prev_gain, prev_offset, tol, otol)\n"
            "print('BAD P%d; %s per bench unit; previous %s: gain %.8g offset %.8g' % (bad + 1, unit, when, "
            "prev_gain, prev_offset))\n"
            "print('DRIFT %s %.6f' % (tag, (gain - prev_gain) / prev_gain * 100))\n"
            "print('RESULT %s %.8g %.8g %s' % (tag, gain, offset, verdict))")
    source = "\n".join(textwrap.dedent(inspect.getsource(f)) for f in (cb.fit_run, cb.calibration_verdict))
    pairs = ",".join(f"{ref}:{raw}" for ref, raw in run["pairs"])
    return python_command(f"from __future__ import annotations\n{source}\n{main}", run["tag"], pairs)


def report_command(line: str) -> str:
    target = REPORT.replace(HOME, "~")
    return f"[ -s {target} ] || echo {HEADER} > {target}; echo {line} >> {target}; cat {target}"


PLOT_SOURCE = '''
import struct, sys, zlib
W, H = 480, 320
px = [[(255, 255, 255)] * W for _ in range(H)]
def box(x0, y0, x1, y1, c):
    for y in range(max(0, min(y0, y1)), min(H, max(y0, y1))):
        for x in range(max(0, x0), min(W, x1)):
            px[y][x] = c
drifts = [(a.split('=')[0], float(a.split('=')[1])) for a in sys.argv[1:]]
top = max([abs(d) for _t, d in drifts] + [0.5]) * 1.2
zero = H // 2
box(40, 20, 42, H - 20, (0, 0, 0))
box(40, zero, W - 20, zero + 2, (0, 0, 0))
colours = [(31, 95, 191), (214, 120, 20), (176, 0, 0)]
for i, (_tag, d) in enumerate(drifts):
    x = 80 + i * 130
    h = int(d / top * (zero - 30))
    box(x, zero - h, x + 80, zero, colours[i % 3])
raw = b''.join(b'\\x00' + bytes(v for p in row for v in p) for row in px)
def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data) & 0xffffffff)
png = b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', W, H, 8, 2, 0, 0, 0))
png += chunk(b'IDAT', zlib.compress(raw, 9)) + chunk(b'IEND', b'')
open(__OUT__, 'wb').write(png)
print('PLOT', len(png), 'bytes')
'''


def plot_command(drifts: Sequence[tuple[str, float]]) -> str:
    """The shell's drift plot: a bar per sensor (its gain drift in percent), written by the guest's python3."""
    source = PLOT_SOURCE.replace("__OUT__", repr(PLOT))
    return python_command(source, *(f"{tag}={drift:.6f}" for tag, drift in drifts))


TRIES, WAITS = 4, 10


def _screen(ctx: OracleContext) -> np.ndarray:
    assert ctx.obs is not None
    return ctx.obs["screen"]


def _terminal(ctx: OracleContext) -> str:
    return str((ctx.obs or {}).get("terminal", ""))


def _click(at: Sequence[int], box: Sequence[int]) -> dict[str, Any]:
    x, y = cb.centre(at, box)
    return {"kind": "click", "x": x, "y": y}


def _show_run(ctx: OracleContext, number: int, previous: str) -> Generator[ActionLike, Any, dict[str, Any] | None]:
    """Open run ``number`` on the Bench Scope (with the certificate of the run before) until it reads back whole;
    None when it never shows (the cli-only ablation's clicks cannot reach the desktop)."""
    at = ctx.truth["scope_at"]
    for _try in range(TRIES):
        run = cb.read_run(_screen(ctx), at, number)
        if run is not None:
            return run
        if number == 1:
            yield _click(at, cb.SCOPE_SHOW)
        else:
            yield _click(at, cb.SCOPE_ENTRY)
            yield {"kind": "key", "keys": "Escape"}
            yield {"kind": "type", "text": previous}
            yield {"kind": "key", "keys": "Return"}
        for _ in range(WAITS):
            run = cb.read_run(_screen(ctx), at, number)
            if run is not None:
                return run
            yield {"kind": "wait", "seconds": 1}
    return None


def _certify(ctx: OracleContext, number: int, values: Sequence[str]) -> Generator[ActionLike, Any, str]:
    """Type gain, offset and verdict into the LIMS form until it shows sensor ``number``'s certificate ('' if
    never)."""
    at = ctx.truth["lims_at"]
    for _try in range(TRIES):
        found = cb.read_certificate(_screen(ctx), at, number)
        if found is not None:
            return found[1]
        for index, value in enumerate(values):
            yield _click(at, cb.field_box(index))
            if index == 0:
                yield {"kind": "key", "keys": "Escape"}  # clears the three fields
            yield {"kind": "type", "text": value}
        yield {"kind": "key", "keys": "Return"}
        for _ in range(WAITS):
            found = cb.read_certificate(_screen(ctx), at, number)
            if found is not None:
                return found[1]
            yield {"kind": "wait", "seconds": 1}
    return ""


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Per sensor: open its run on the Bench Scope and read it (GUI), fit and judge it with the instruments database
    (CLI), enter it in the LIMS and read the certificate (GUI), add the report line (CLI); then the drift plot."""
    certificate, drifts = "", []
    for number in range(1, cb.SENSORS + 1):
        run = yield from _show_run(ctx, number, certificate)
        if run is None:
            break
        yield {"kind": "shell", "command": fit_command(run), "timeout": 120}
        found = re.findall(rf"^RESULT {run['tag']} ({NUMBER}) ({NUMBER}) (PASS|ADJUST|FAIL)\s*$", _terminal(ctx),
                           re.M)
        drift = re.findall(rf"^DRIFT {run['tag']} ({NUMBER})\s*$", _terminal(ctx), re.M)
        if not found:
            break  # gui-only: its terminal cannot read the database
        gain, offset, verdict = found[-1]
        certificate = yield from _certify(ctx, number, (gain, offset, verdict))
        if not certificate:
            break
        yield {"kind": "shell", "command": report_command(f"{run['tag']},{gain},{offset},{verdict},{certificate}")}
        drifts.append((run["tag"], float(drift[-1]) if drift else 0.0))
    if drifts:
        yield {"kind": "shell", "command": plot_command(drifts), "timeout": 120}
    yield {"kind": "done"}


INSTRUCTION = (
    "You calibrate the lab's three sensors today. The 'Bench Scope' window holds their calibration runs, one at a "
    "time: press 'Show next run' to see the first. A run shows the sensor's tag, its reference readings (in the "
    "bench's unit) paired with the sensor's raw readings (in mV), as a table and a scatter plot. One pair of each "
    "run is a bad reading, clearly off the line of the others: leave it out. The instruments database {db} "
    "(SQLite; tables instruments, models and calibrations) has each sensor's model, the factor bench_to_unit that "
    "converts the bench's reference into the instrument's own unit, its model's tolerances (gain_tol_pct, in "
    "percent of the gain, and offset_tol, in the instrument's unit) and its calibration history. The calibration "
    "is the least-squares line value = gain * raw + offset through the run's other pairs, with value the "
    "reference times bench_to_unit. Compare it with the sensor's previous calibration (its latest cal_date): the "
    "verdict is PASS when the gain drifted by at most gain_tol_pct percent of the previous gain and the offset by "
    "at most offset_tol; FAIL when either drift is more than three times its tolerance; ADJUST otherwise. Enter "
    "each sensor's gain and offset (6 significant digits or more) and its verdict in the 'LIMS Calibration Entry' "
    "window, in the bench's order, then press Enter or 'Issue certificate': the LIMS shows the sensor's "
    "certificate number. The Bench Scope shows the next run once you type that certificate number into its entry "
    "and press Enter (or 'Show next run'). From your shell, write the calibration report {report}: the header "
    "line sensor,gain,offset,verdict,certificate and one line per sensor in the bench's order, e.g. "
    "PT-123,0.0125034,-1.03376,ADJUST,K7PQ2M. Finally draw the drift plot {plot} from your shell: a PNG image "
    "(at least 200x150 pixels) with one bar per sensor showing its gain drift in percent. Then finish.")


TASK = Task(
    id="Weave-Data-8",
    title="Calibrate three sensors from the bench plots: fit each run without its bad reading, judge the drift, "
          "certify it in the LIMS, and write the report and the drift plot",
    instruction=INSTRUCTION,
    channels=Channels(
        gui="read each run's tag and reading pairs off the Bench Scope, enter the fit and verdict in the LIMS form, "
            "read the certificate number back and type it into the scope for the next run",
        cli="look each sensor up in the instruments database, fit its run without the bad pair, judge the drift "
            "from its previous calibration, and write the calibration report and the drift plot",
        why_both="the runs exist only as the Bench Scope's pixels and the certificates only as the LIMS's, and only "
                 "the desktop's windows can certify a sensor, while the unit factors, tolerances and previous "
                 "calibrations are in a database only the shell's account can read and the report belongs in a "
                 "folder only the shell's account can write"),
    setup=setup,
    clauses=(
        Clause("certified", "the LIMS certified every sensor with its run's least-squares fit without the bad pair",
               check_certified, weight=3.0, critical=True),
        Clause("verdicts", "every sensor's verdict in the LIMS follows its drift from the previous calibration",
               check_verdicts, weight=2.0, critical=True, cap=0.5),
        Clause("report", "~/calibration/report.csv lists every sensor's fit, verdict and LIMS certificate in the "
                         "bench's order", check_report, weight=2.0, critical=True, cap=0.5),
        Clause("drift_plot", "~/calibration/drift.png is a real, non-blank PNG image", check_plot, weight=1.0),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the LIMS's record (captured by setup)"),
        Deliverable(REPORT, "cli", description="~/calibration/report.csv"),
        Deliverable(PLOT, "cli", description="~/calibration/drift.png"),
    ),
    withheld=("sensors",),
    oracle=oracle,
    profile="base",
    apps=("Bench Scope (python3-tk)", "LIMS Calibration Entry (python3-tk)", "sqlite3", "python3"),
    max_steps=220,
    time_budget_s=3000.0,
)
