"""Weave-Design-7: three shelf brackets modelled in OpenSCAD from a carpenter's sketch that exists only as pixels.

Three apps, the data flowing part by part between the channels. The Workshop Sketch (a Tk app, the desktop
account's) draws one bracket's dimensioned sketch at a time, its sizes as dot-matrix labels only; part N+1 opens
only once part N is confirmed. The materials database (SQLite, in a folder only the workspace account may open)
says which material the job's part is made of: its density and the clearance its holes need on top of the
sketch's nominal diameter. The agent sets the template's parameters in OpenSCAD's editor (GUI), renders and
exports the part's STL into ~/workshop, which only the desktop account may write; the shell measures the STL
(admesh) and works out the mass of one bracket; the sketch takes that mass, checks it against its own figure,
records the STL's SHA-256 and shows a random cut-list code as pixels only. At the end of each part the shell adds
the part's row (code, volume, mass, quantity) to the bill of materials in ~/cutlist (the workspace account's).

Scoring: every STL is the part's bracket (bounding box at the origin, volume within 0.1 %, both holes open at
their places with the clearance, solid around them); the sketch's record confirms every part with the STL as it
is now; the bill of materials holds exactly the three parts with the sketch's codes, their volumes, masses and
the database's quantities. The seeds vary every size, the materials, quantities and the job; the codes are drawn
in the VM at each confirmation.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Generator, Iterator, Mapping
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import DESKTOP_USER, HOME, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.design import _shelf_common as sc
from weavegym.envs.tasks.games.sgt_common import changed_box, changed_pixels
from weavegym.envs.tasks.item_records import numbered_records, per_item_verdict
from weavegym.envs.tasks.spatial.stl_geometry import bbox, triangles, volume
from weavegym.evaluators import Clause, GuiArtifactViaCli, Probe, Verdict

VIEW_BG = (255, 255, 229)  # OpenSCAD's 3D view ("Cornfield" scheme): where the editor dock ends
SCAD_CONF = f"{HOME}/.config/OpenSCAD/OpenSCAD.conf"
# No autocompletion, auto-indent or line wrap (typed code stays as typed), no Customizer or Error-Log docks.
SCAD_SETTINGS = """[General]
launcher/showOnStartup=false

[advanced]
enableSoundNotification=false

[design]
autoReload=false

[editor]
enableAutocomplete=false
autoIndent=false
enableBraceMatching=false
lineWrap=None

[view]
hideCustomizer=true
hideErrorLog=true
hideEditorToolbar=true
hideConsole=false
"""
WAITS, TRIES = 12, 3


# ---- setup -------------------------------------------------------------------------------------------------

def view_left(image: np.ndarray, window: list[int]) -> int | None:
    """The x where OpenSCAD's 3D view starts (the editor dock is left of it); None until the view is drawn."""
    x, y, width, height = window
    found = []
    for row in (y + height // 3, y + height // 2, y + height * 2 // 3):
        line = image[row, x:x + width, :3].astype(int)
        hits = np.flatnonzero(np.abs(line - VIEW_BG).max(axis=1) <= 3)
        if hits.size:
            found.append(int(hits[0]))
    return x + min(found) if found else None


def setup(ctx: SetupContext) -> Prepared:
    w = sc.world(ctx.rng)
    ctx.run(["install", "-d", "-m", "0700", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, sc.DB_DIR])
    ctx.write_file(sc.DB, database_bytes(sc.SCHEMA, sc.db_rows(w)), owner=WORKSPACE_USER, mode=0o600)
    # ~/workshop: the desktop account's alone to write (OpenSCAD exports there); ~/cutlist: the workspace's alone.
    ctx.run(["install", "-d", "-m", "2755", "-o", DESKTOP_USER, "-g", SHARED_GROUP, sc.WORKSHOP])
    ctx.write_file(sc.TEMPLATE, sc.TEMPLATE_SCAD, mode=0o644)
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, sc.CUTLIST])
    ctx.write_file(SCAD_CONF, SCAD_SETTINGS, mode=0o644)
    ctx.run(["env", "DISPLAY=:0", "xset", "r", "off"], user=ctx.user)  # code is typed: no autorepeat on a stall
    at = _open_sketch(ctx, w)
    ctx.launch_gui(f"cd {sc.WORKSHOP} && {{as_user}} openscad {sc.TEMPLATE}", name="openscad")
    found = ctx.wait_window(r"bracket\.scad.*OpenSCAD", timeout=400)
    window = ctx.place_window(found.id, sc.SCAD_AT, size=sc.SCAD_SIZE)
    _widen_editor(ctx, window)
    parts = [{"part": p["part"], "dims": p["dims"], "hole_d": p["hole_d"], "volume": p["volume"], "mass": p["mass"],
              "quantity": p["quantity"], "density": p["density"]} for p in w["parts"]]
    return Prepared(params={"job": w["job"]}, truth={"parts": parts, "sketch": list(at), "openscad": window})


def _open_sketch(ctx: SetupContext, w: Mapping[str, Any]) -> tuple[int, int]:
    """Start the sketch with the parts on its stdin, wait until it is drawn, delete the input."""
    ctx.write_file(sc.APP, ctx.fixture(__package__, "fixtures/workshop_sketch.py"), owner="root")
    ctx.write_file(f"{sc.APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    conf = {"parts": [{"dims": p["dims"], "mass": p["mass"]} for p in w["parts"]], "workshop": sc.WORKSHOP,
            "layout": sc.layout()}
    ctx.write_file(sc.CONF, json.dumps(conf), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {sc.APP} < {sc.CONF} > {sc.RECORD}", name="workshopsketch")
    window = ctx.wait_window(f"^{sc.TITLE}$")
    ctx.place_window(window.id, sc.SKETCH_AT)
    try:
        at = wait_for(lambda: sc.origin(ctx.client.screenshot(hide_cursor=True).image), 120, what="the sketch drawn",
                      max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", sc.CONF])  # the sizes now live only in the sketch's memory
    return at


def _widen_editor(ctx: SetupContext, window: list[int]) -> None:
    """Wait for OpenSCAD's 3D view, then drag the splitter right so that the editor shows whole lines (OpenSCAD
    opens it a few characters wide); the oracle finds the split on its screen again, so a drag that did not
    take costs nothing but legibility."""
    try:
        left = wait_for(lambda: view_left(ctx.client.screenshot(hide_cursor=True).image, window), 300,
                        what="OpenSCAD's 3D view drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    y = window[1] + window[3] // 3
    target = window[0] + 430
    moves = []
    for step in range(1, 7):
        moves += ["mousemove", str(left - 3 + (target - left) * step // 6), str(y), "sleep", "0.2"]
    ctx.run(["env", "DISPLAY=:0", "xdotool", "mousemove", str(left - 3), str(y), "sleep", "0.3", "mousedown", "1",
             *moves, "mouseup", "1", "sleep", "0.3", "mousemove", str(window[0] + 200), str(window[1] - 20)],
            user=ctx.user, check=False)


# ---- the checker -------------------------------------------------------------------------------------------

def confirmations(probe: Probe) -> dict[int, dict[str, Any]]:
    """{part: its last confirmation} of the sketch's root-only record (refusals left out)."""
    return numbered_records(probe, sc.RECORD, "part", accept=lambda r: isinstance(r.get("code"), str))


def judge_stl(data: bytes | None, part: Mapping[str, Any]) -> str:
    """'' when the STL is the part's bracket, else what is wrong with it."""
    number = part["part"]
    tris = triangles(data) if data else None
    if tris is None:
        return f"bracket-{number}.stl is missing or not an STL"
    low, high = bbox(tris)
    dims = part["dims"]
    want = [dims["A"], dims["W"], dims["B"]]
    size = [h - lo for lo, h in zip(low, high, strict=True)]
    if any(abs(c) > 0.02 for c in low) or any(abs(s - e) > 0.02 for s, e in zip(size, want, strict=True)):
        return (f"bracket-{number}.stl spans {[round(c, 2) for c in low]}..{[round(c, 2) for c in high]} mm, expected "
                f"[0, 0, 0]..{want}")
    got = volume(tris)
    if abs(got - part["volume"]) > sc.VOLUME_TOLERANCE * part["volume"]:
        return f"bracket-{number}.stl holds {got:.1f} mm^3, expected {part['volume']:.1f}"
    holes = sc.hole_problems(tris, dims, part["hole_d"])
    return f"bracket-{number}.stl: {'; '.join(holes)}" if holes else ""


def check_brackets(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    problems = [judge_stl(probe.read_bytes(sc.stl_path(p["part"])), p) for p in truth["parts"]]
    return per_item_verdict(problems, "the sketch's size, holes with clearance, volume", "brackets")


def check_confirmed(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = confirmations(probe)
    problems = []
    for part in truth["parts"]:
        number = part["part"]
        entry = found.get(number)
        if entry is None:
            problems.append(f"part {number} was never confirmed at the sketch")
            continue
        mass = entry.get("mass")
        if not isinstance(mass, (int, float)) or abs(mass - part["mass"]) > max(sc.MASS_TOLERANCE * part["mass"],
                                                                                0.011):
            problems.append(f"part {number} confirmed with {mass} g, expected {part['mass']:.2f}")
        elif entry.get("sha256") != probe.sha256(sc.stl_path(number)):
            problems.append(f"part {number} was confirmed with another bracket-{number}.stl than the one there now")
        else:
            problems.append("")
    return per_item_verdict(problems, "confirmed with the right mass and the STL as it is", "parts")


def parse_bom(text: str | None) -> tuple[dict[int, list[str]], str]:
    """{part: its row's fields} of the bill of materials, and what is wrong with its form ('' when nothing)."""
    if text is None:
        return {}, f"{sc.BOM} is missing"
    rows: dict[int, list[str]] = {}
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if not line.strip() or fields[0].lower() == "part":
            continue
        if len(fields) != 5 or not fields[0].isdigit():
            return {}, f"{sc.BOM} has a line that is no part row: {line[:60]!r}"
        if int(fields[0]) in rows:
            return {}, f"{sc.BOM} lists part {fields[0]} twice"
        rows[int(fields[0])] = fields
    return rows, ""


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def check_bom(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, problem = parse_bom(probe.read_text(sc.BOM))
    if problem:
        return Verdict.failed(problem)
    found = confirmations(probe)
    numbers = {p["part"] for p in truth["parts"]}
    problems = [f"{sc.BOM} lists part {n}, which the job does not have" for n in sorted(set(rows) - numbers)]
    for part in truth["parts"]:
        number = part["part"]
        row = rows.get(number)
        if row is None:
            problems.append(f"part {number} is not in {sc.BOM}")
            continue
        code, vol, mass, qty = row[1], _number(row[2]), _number(row[3]), row[4]
        wrong = []
        if code != (found.get(number) or {}).get("code", "-"):
            wrong.append(f"code {code!r} is not the sketch's")
        if vol is None or abs(vol - part["volume"]) > sc.VOLUME_TOLERANCE * part["volume"]:
            wrong.append(f"volume {row[2]!r} (expected {part['volume']:.1f})")
        if mass is None or abs(mass - part["mass"]) > max(sc.MASS_TOLERANCE * part["mass"], 0.011):
            wrong.append(f"mass {row[3]!r} (expected {part['mass']:.2f})")
        if qty != str(part["quantity"]):
            wrong.append(f"quantity {qty!r} (expected {part['quantity']})")
        problems.append(f"part {number}: {', '.join(wrong)}" if wrong else "")
    return per_item_verdict(problems, "code, volume, mass and quantity right", "rows")


# ---- the oracle --------------------------------------------------------------------------------------------

def _frame(ctx: OracleContext) -> np.ndarray:
    assert ctx.obs is not None
    return ctx.obs["screen"]


def _terminal(ctx: OracleContext) -> str:
    return (ctx.obs or {}).get("terminal", "").replace("\r", "")


def _open_part(ctx: OracleContext, part: int) -> Generator[ActionLike, Any, dict[str, int] | None]:
    """Press 'Part N' until its sketch shows; its sizes read off the screen (None: it never showed)."""
    at = ctx.truth["sketch"]
    for _try in range(TRIES):
        yield sc.box_click(at, sc.OPEN, part - 1)
        for _ in range(WAITS):
            dims = sc.read_part(_frame(ctx), at, part)
            if dims:
                return dims
            yield {"kind": "wait", "seconds": 1}
    return None


def part_sql(job: str, part: int) -> str:
    return (f"SELECT 'MAT', p.part, m.density_g_cm3, m.clearance_mm, p.quantity FROM parts p JOIN materials m "
            f"ON m.name = p.material WHERE p.job = '{job}' AND p.part = {part};")


def scad_program(dims: Mapping[str, int], hole_d: float) -> str:
    """The template's model with the part's parameters, as the oracle types it over the editor's text."""
    return (f"leg_a = {dims['A']}; leg_b = {dims['B']}; width = {dims['W']}; thick = {dims['T']}; "
            f"hole_d = {hole_d:g}; hole_a = {dims['P']}; hole_b = {dims['Q']};\n"
            "difference() { union() { cube([leg_a, width, thick]); cube([thick, width, leg_b]); }\n"
            "translate([hole_a, width / 2, -1]) cylinder(d = hole_d, h = thick + 2, $fn = 24);\n"
            "translate([-1, width / 2, hole_b]) rotate([0, 90, 0]) cylinder(d = hole_d, h = thick + 2, $fn = 24); }\n")


def _settle(ctx: OracleContext, region: tuple[int, int, int, int], before: np.ndarray | None
            ) -> Iterator[ActionLike]:
    """Waits until ``region`` of the screen differs from ``before`` (if given) and two looks agree on it."""
    x, y, width, height = region
    previous = None
    for _ in range(WAITS * 2):
        now = _frame(ctx)[y:y + height, x:x + width]
        changed = before is None or not np.array_equal(now, before)
        if changed and previous is not None and np.array_equal(now, previous):
            return
        previous = now.copy()
        yield {"kind": "wait", "seconds": 1}


def _dialog(ctx: OracleContext, before: np.ndarray, min_size: tuple[int, int]) -> Generator[ActionLike, Any, bool]:
    """Waits until a box at least ``min_size`` px shows over ``before`` and holds still; whether it did."""
    previous = None
    for _ in range(WAITS * 2):
        frame = _frame(ctx)
        box = changed_box(frame, before)
        if (box is not None and previous is not None and box[2] - box[0] >= min_size[0]
                and box[3] - box[1] >= min_size[1] and int(changed_pixels(frame, previous).sum()) <= 400):
            return True
        previous = frame
        yield {"kind": "wait", "seconds": 1}
    return False


def _changed(ctx: OracleContext, before: np.ndarray, pixels: int) -> Generator[ActionLike, Any, bool]:
    """Waits until at least ``pixels`` px differ from ``before`` and two looks agree; whether they did."""
    previous = None
    for _ in range(WAITS):
        frame = _frame(ctx)
        if (previous is not None and int(changed_pixels(frame, before).sum()) >= pixels
                and int(changed_pixels(frame, previous).sum()) <= 400):
            return True
        previous = frame
        yield {"kind": "wait", "seconds": 1}
    return False


def _model(ctx: OracleContext, dims: Mapping[str, int], hole_d: float, part: int, exists: bool
           ) -> Iterator[ActionLike]:
    """Type the part's model over the editor's text, render it (F6) and export it as STL (F7) to its path."""
    window = ctx.truth["openscad"]
    left = view_left(_frame(ctx), window) or window[0] + 80
    yield {"kind": "click", "x": window[0] + max(60, (left - window[0]) * 2 // 3), "y": window[1] + window[3] // 2}
    yield {"kind": "key", "keys": "ctrl+a"}
    yield {"kind": "type", "text": scad_program(dims, hole_d)}
    view = (left + 4, window[1] + 40, window[0] + window[2] - left - 8, window[3] // 2)
    x, y, width, height = view
    before = _frame(ctx)[y:y + height, x:x + width].copy()
    yield {"kind": "key", "keys": "F6"}
    yield from _settle(ctx, view, before)
    for _try in range(TRIES):
        before = _frame(ctx).copy()
        yield {"kind": "key", "keys": "F7"}
        shown = yield from _dialog(ctx, before, (300, 150))
        if shown:
            break
        yield {"kind": "key", "keys": "Escape"}
    else:
        return
    yield {"kind": "key", "keys": "ctrl+a"}
    yield {"kind": "type", "text": sc.stl_path(part)}
    before = _frame(ctx).copy()
    yield {"kind": "key", "keys": "Return"}
    if exists:  # "bracket-N.stl already exists. Do you want to replace it?" (grey on the grey file dialog:
        # not a box of change, but its focus greys the file dialog's title bar too)
        asked = yield from _changed(ctx, before, 3000)
        if asked:
            yield {"kind": "key", "keys": "alt+y"}


def mark_path(part: int) -> str:
    """The marker an export must be newer than to count as this round's."""
    return f"/tmp/.bracket-{part}.mark"


def measure_command(part: int, density: float) -> str:
    """Wait for the part's STL newer than the marker, then its volume (admesh) and the mass of one bracket.

    It writes nothing, the marker included (the next round's ``touch`` is a command of its own): a command that
    names the STL and also writes somewhere is one the GUI-artifact rule reads as writing the STL.
    """
    stl, mark = sc.stl_path(part), mark_path(part)
    return (f"timeout 90 sh -c 'until [ -s {stl} ] && [ {stl} -nt {mark} ]; do sleep 0.5; done'; sleep 1; "
            f"V=$(admesh {stl} | sed -n 's/.*Volume *: *\\([0-9.]*\\).*/\\1/p'); "
            f"echo \"MEASURED {part} $V $(python3 -c \"print(round(float('${{V:-0}}') * {density} / 1000, 2))\")\"; "
            f"[ -e {stl} ] && echo STL {part} EXISTS")


def _confirm(ctx: OracleContext, part: int, mass: float) -> Generator[ActionLike, Any, str | None]:
    """Type the mass at the sketch and confirm until the part's code shows; the code (None: it never showed)."""
    at = ctx.truth["sketch"]
    for _try in range(TRIES):
        yield sc.box_click(at, sc.ENTRY)
        yield {"kind": "key", "keys": "ctrl+slash"}  # Tk's select-all in an entry: the typed text replaces it
        yield {"kind": "type", "text": f"{mass:.2f}"}
        yield sc.box_click(at, sc.CONFIRM)
        for _ in range(WAITS):
            code = sc.result_code(sc.read_result(_frame(ctx), at, part), part)
            if code:
                return code
            if sc.read_status(_frame(ctx), at).startswith(f"MASS FOR PART {part}"):
                return None
            yield {"kind": "wait", "seconds": 1}
    return None


def bom_command(part: int, code: str, vol: float, mass: float, quantity: int) -> str:
    return (f"cd {sc.CUTLIST} && {{ [ -s bom.csv ] || echo '{sc.BOM_HEADER}' > bom.csv; }} && "
            f"echo '{part},{code},{vol:.2f},{mass:.2f},{quantity}' >> bom.csv && cat bom.csv")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Per part: the sketch's sizes (GUI) -> the material's figures (CLI) -> the model typed, rendered and exported
    in OpenSCAD (GUI) -> its volume and mass, checked against the sizes read (CLI; a lost key means another round)
    -> the mass confirmed at the sketch, its code read (GUI) -> the part's row in the bill (CLI)."""
    job = ctx.params["job"]
    for part in range(1, sc.COUNT + 1):
        dims = yield from _open_part(ctx, part)
        if dims is None:
            break
        yield {"kind": "shell", "command": f"sqlite3 -separator '|' {sc.DB} {shlex.quote(part_sql(job, part))}; "
                                           f"touch {mark_path(part)}"}
        found = re.search(rf"^MAT\|{part}\|([0-9.]+)\|([0-9.]+)\|(\d+)\s*$", _terminal(ctx), re.M)
        if found is None:
            break
        density, clearance, quantity = float(found[1]), float(found[2]), int(found[3])
        hole_d = round(dims["D"] + clearance, 2)
        expected = sc.bracket_volume(dims, hole_d)
        measured: tuple[float, float] | None = None
        exists = False
        for _round in range(TRIES):
            yield from _model(ctx, dims, hole_d, part, exists)
            yield {"kind": "shell", "timeout": 150, "command": measure_command(part, density)}
            exists = exists or re.search(rf"^STL {part} EXISTS\s*$", _terminal(ctx), re.M) is not None
            got = re.findall(rf"^MEASURED {part} ([0-9.]+) ([0-9.]+)\s*$", _terminal(ctx), re.M)
            if got and abs(float(got[-1][0]) - expected) <= 0.0005 * expected:
                measured = float(got[-1][0]), float(got[-1][1])
                break
            yield {"kind": "shell", "command": f"touch {mark_path(part)}"}  # the next round waits for a newer export
        if measured is None:
            break
        code = yield from _confirm(ctx, part, measured[1])
        if code is None:
            break
        yield {"kind": "shell", "command": bom_command(part, code, measured[0], measured[1], quantity)}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Design-7",
    title="Model the shelf brackets in OpenSCAD from the carpenter's sketch, weigh them and write the cut list",
    instruction=(
        "Job {job} needs three shelf brackets. The 'Workshop Sketch' window shows one bracket's dimensioned sketch "
        "at a time (press 'Part 1', ...; a part opens once the one before it is confirmed): an L of a bottom leg "
        "A long and an upright B high, both T thick and W wide, with one through-hole in each leg, of nominal "
        "diameter D, the bottom one's centre P from the outer corner, the upright's Q up from it (all mm). The "
        "materials database " + sc.DB + " (SQLite, for your shell) has the tables parts (job, part, material, "
        "quantity) and materials (name, density_g_cm3, clearance_mm): a hole's diameter is D plus its part's "
        "material's clearance_mm. For each part in turn: in OpenSCAD (its editor holds the template " + sc.TEMPLATE
        + ", keep its model and $fn, only ~/workshop is OpenSCAD's to write) set the parameters from the sketch, "
        "render (F6) and export the STL (F7) as ~/workshop/bracket-N.stl (N the part number); measure its volume "
        "in mm^3 (e.g. with admesh) and work out the mass of one bracket in grams (volume x density_g_cm3 / 1000, "
        "two decimals); type that mass in the sketch and press Confirm, which shows the part's cut-list code; then "
        "add the part's row to the bill of materials " + sc.BOM + " (CSV, a header line '" + sc.BOM_HEADER + "', "
        "then one line per part: its number, the sketch's code, the volume, the mass of one, the job's quantity). "
        "Then finish with done."),
    channels=Channels(
        gui="read each bracket's sizes off the Workshop Sketch; set the template's parameters in OpenSCAD, render "
            "and export each part's STL; confirm each part's mass at the sketch and read its cut-list code",
        cli="look up each part's material (density, clearance) and quantity in the materials database; measure each "
            "exported STL and work out its mass; write the bill of materials with the codes",
        why_both="the sizes exist only as pixels on the sketch and only OpenSCAD may write the workshop folder, "
                 "while the clearances, densities and quantities are in a database only the shell can open and the "
                 "bill of materials is the shell's; the sketch shows each code only for the right mass"),
    setup=setup,
    clauses=(
        Clause("brackets_modelled", "each STL is its part's bracket: size, volume, holes with the clearance",
               check_brackets, weight=3.0, critical=True, cap=0.3),
        Clause("sketch_confirmed", "the sketch confirmed every part with the right mass and the STL as it is now",
               check_confirmed, weight=2.0, critical=True, cap=0.0),  # no confirmation: no work seen at all
        Clause("bill_of_materials", "the bill lists every part with the sketch's code, its volume, mass and quantity",
               check_bom, weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        *(Deliverable(sc.stl_path(n), "gui", description=f"~/workshop/bracket-{n}.stl (exported by OpenSCAD)")
          for n in range(1, sc.COUNT + 1)),
        Deliverable(sc.BOM, "cli", description="~/cutlist/bom.csv"),
    ),
    rules=(GuiArtifactViaCli([sc.stl_path(n) for n in range(1, sc.COUNT + 1)],
                             "the STLs must be exported by the OpenSCAD window"),),
    withheld=("parts",),
    oracle=oracle,
    profile="full",
    apps=("Workshop Sketch (python3-tk)", "openscad", "admesh", "sqlite3"),
    max_steps=500,  # the oracle took 93-128 steps in the VM (seeds 0, 3, 6), and may wait 24 times per render or dialog
    time_budget_s=3600.0,
)
