"""Weave-Spatial-2: recover a deleted OpenSCAD model from the open editor, fix its holes, export and measure it.

The only copy of the bracket's source is the text still open in the OpenSCAD
editor (setup deleted the file; the editor runs as the desktop account, which
the shell's workspace account cannot reach), so it can only be brought back
through the GUI's File > Save As, as ~/bracket.scad: a file of the desktop
account, kept as the editor had it. The model's holes are blind and too small;
fixing the code (into ~/bracket_fixed.scad), exporting the STL and measuring
its volume are command-line work (openscad -o, admesh), files of the workspace
account. The checker measures the STL itself with numpy.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from weavegym.envs.setup_context import HOME, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.games.sgt_common import wait_box, wait_file_action
from weavegym.envs.tasks.spatial.stl_geometry import bbox, polygon_area, triangles, volume
from weavegym.evaluators import Clause, Probe, Verdict

SCAD = f"{HOME}/bracket.scad"
FIXED = f"{HOME}/bracket_fixed.scad"
STL = f"{HOME}/bracket.stl"
REPORT = f"{HOME}/bracket_volume.txt"
SOURCE_DIR = "/tmp/.cad-session"
FN = 48

MODEL = """// Mounting bracket {part_id}
// plate: length x width x thickness (mm)
plate = [{length}, {width}, {thickness}];
hole_d = {wrong_d};      // mounting hole diameter (mm)
margin = {margin};       // hole centre to plate edge (mm)

difference() {{
    cube(plate);
    for (x = [margin, plate[0] - margin], y = [margin, plate[1] - margin])
        translate([x, y, 0])
            cylinder(d = hole_d, h = plate[2] / 2, $fn = {fn});
}}
"""


def setup(ctx: SetupContext) -> Prepared:
    length, width = int(ctx.rng.integers(50, 91)), int(ctx.rng.integers(30, 61))
    thickness, margin = int(ctx.rng.integers(4, 9)), int(ctx.rng.integers(6, 11))
    hole_d = float(ctx.rng.choice([4.5, 5.5, 6.6, 9.0]))
    part_id = f"BRK-{int(ctx.rng.integers(16**5, 16**6)):06X}"
    source = MODEL.format(part_id=part_id, length=length, width=width, thickness=thickness, margin=margin,
                          wrong_d=round(hole_d - 1.5, 1), fn=FN)
    ctx.write_file(f"{SOURCE_DIR}/bracket.scad", source)
    ctx.launch_gui(f"cd {HOME} && {{as_user}} openscad {SOURCE_DIR}/bracket.scad", name="openscad")
    window = ctx.wait_window(r"bracket\.scad.*OpenSCAD", timeout=300)
    ctx.run(["rm", "-f", f"{SOURCE_DIR}/bracket.scad"])  # only the editor still holds the source (OpenSCAD
    # needs its directory to stay)
    expected = (length * width - 4 * polygon_area(hole_d / 2, FN)) * thickness
    return Prepared(params={"hole_d": hole_d},
                    truth={"part_id": part_id, "source": source, "size": [length, width, thickness], "volume": expected,
                           "window": window.geometry})


def _mesh(probe: Probe) -> Any:
    data = probe.read_bytes(STL)
    return None if data is None else triangles(data)


def check_recovered(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(SCAD)
    if text is None:
        return Verdict.failed(f"{SCAD} does not exist")
    same = text.strip() == truth["source"].strip()
    return Verdict.check(same, f"{SCAD} ({len(text)} chars) {'is' if same else 'is not'} the editor's model "
                               f"{truth['part_id']} as it was open")


def check_fixed(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(FIXED)
    if text is None:
        return Verdict.failed(f"{FIXED} does not exist")
    ok = truth["part_id"] in text and "difference" in text and text.strip() != truth["source"].strip()
    return Verdict.check(ok, f"{FIXED} ({len(text)} chars) {'is' if ok else 'is not'} a changed copy of the model "
                             f"{truth['part_id']}")


def check_stl(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    tris = _mesh(probe)
    if tris is None:
        return Verdict.failed(f"{STL} is missing or not an STL file")
    return Verdict.check(len(tris) >= 12, f"{STL} has {len(tris)} triangles")


def check_bbox(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    tris = _mesh(probe)
    if tris is None:
        return Verdict.failed("no STL to measure")
    low, high = bbox(tris)
    size = [h - lo for lo, h in zip(low, high, strict=True)]
    ok = all(abs(s - e) < 0.01 for s, e in zip(size, truth["size"], strict=True))
    return Verdict.check(ok, f"STL bounding box {[round(s, 3) for s in size]} mm, expected {truth['size']}")


def check_volume(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    tris = _mesh(probe)
    if tris is None:
        return Verdict.failed("no STL to measure")
    got = volume(tris)
    return Verdict.check(abs(got - truth["volume"]) <= 0.002 * truth["volume"],
                         f"STL volume {got:.1f} mm^3, expected {truth['volume']:.1f} (four through-holes of the "
                         "required diameter)")


def check_report(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(REPORT)
    number = re.search(r"[-+]?\d+(?:\.\d+)?", text or "")
    if number is None:
        return Verdict.failed(f"{REPORT} is missing or holds no number")
    tris = _mesh(probe)
    measured = volume(tris) if tris is not None else float("nan")
    got = float(number.group())
    ok = abs(got - measured) <= 0.002 * abs(measured) and abs(got - truth["volume"]) <= 0.002 * truth["volume"]
    return Verdict.check(ok, f"reported {got:.1f} mm^3; the STL measures {measured:.1f}, expected "
                         f"{truth['volume']:.1f}")


def _save_as(ctx: OracleContext) -> Iterator[ActionLike]:
    """One File > Save As round; the caller reads ``SAVED`` off the terminal to know whether it landed.

    Under load the dialog can be drawn before its name field takes keys, so the field is cleared (ctrl+a)
    before typing, and a round that did not save is closed with Escape so the next one starts clean.
    """
    x, y, w, _h = ctx.truth["window"]
    yield {"kind": "click", "x": x + w // 2, "y": max(y - 10, 1)}  # the title bar: focus the OpenSCAD window
    assert ctx.obs is not None
    before = ctx.obs["screen"].copy()
    yield {"kind": "key", "keys": "ctrl+shift+s"}  # File > Save As...
    yield from wait_box(ctx, before, tries=60)  # the shell cannot see windows; the screen can
    yield {"kind": "wait", "seconds": 1.0}  # the box is drawn; give its name field a moment to take focus
    yield {"kind": "key", "keys": "ctrl+a"}
    yield {"kind": "type", "text": SCAD}
    for _attempt in range(2):  # a file chooser may swallow the first Return to finish its completion
        yield {"kind": "key", "keys": "Return"}
        yield wait_file_action(SCAD, seconds=15)
        assert ctx.obs is not None
        if "SAVED" in ctx.obs["terminal"]:
            return
    yield {"kind": "key", "keys": "Escape"}  # close whatever is left of the dialog before the next round


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    for _round in range(3):
        yield from _save_as(ctx)
        assert ctx.obs is not None
        if "SAVED" in ctx.obs["terminal"]:
            break
    hole_d = ctx.params["hole_d"]
    yield {"kind": "shell", "timeout": 600, "command": (
        f"cd ~ && sed -e 's|^hole_d = [0-9.]*;|hole_d = {hole_d};|' "
        "-e 's|translate(\\[x, y, 0\\])|translate([x, y, -1])|' -e 's|h = plate\\[2\\] / 2|h = plate[2] + 2|' "
        "bracket.scad > bracket_fixed.scad && grep -n -e hole_d -e translate -e cylinder bracket_fixed.scad && "
        "openscad -o bracket.stl bracket_fixed.scad && admesh bracket.stl | "
        "sed -n 's/.*Volume *: *\\([0-9.]*\\).*/\\1/p' | tee bracket_volume.txt")}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Spatial-2",
    title="Recover the bracket model from the OpenSCAD editor, fix its holes, export and measure",
    instruction=(
        "The mounting bracket's source file was deleted from disk, but its model is still open in the OpenSCAD "
        "editor. 1) Save the editor's model, unchanged, as ~/bracket.scad (from OpenSCAD). 2) With your shell, "
        "write a fixed copy to ~/bracket_fixed.scad: the four mounting holes must be {hole_d} mm in diameter and "
        "go all the way through the plate (keep their positions, the plate and $fn as they are). 3) Export the "
        "fixed model as STL to ~/bracket.stl. 4) Write the STL's volume in mm^3 (e.g. as admesh reports it) to "
        "~/bracket_volume.txt, then finish."),
    channels=Channels(
        gui="save the model still open in the OpenSCAD editor back to disk with File > Save As",
        cli="write the fixed SCAD code, export the STL with openscad and measure its volume with admesh",
        why_both="the source survives only in the GUI editor (the desktop account's, out of the shell's reach), "
                 "while the fix, export and measurement are done with command-line tools"),
    setup=setup,
    clauses=(
        Clause("recovered", "~/bracket.scad holds the model from the editor, unchanged", check_recovered,
               critical=True, cap=0.25),
        Clause("fixed_source", "~/bracket_fixed.scad is a changed copy of the model", check_fixed),
        Clause("stl_valid", "~/bracket.stl is a triangle mesh", check_stl, critical=True, cap=0.5),
        Clause("stl_bbox", "the STL keeps the plate's size", check_bbox),
        Clause("stl_volume", "the STL's volume matches four through-holes of the required diameter",
               check_volume, weight=2.0),
        Clause("volume_report", "~/bracket_volume.txt holds the STL's volume", check_report),
    ),
    deliverables=(
        Deliverable(SCAD, "gui", description="~/bracket.scad (saved by the OpenSCAD editor)"),
        Deliverable(FIXED, "cli", description="~/bracket_fixed.scad"),
        Deliverable(STL, "cli", description="~/bracket.stl"),
        Deliverable(REPORT, "cli", description="~/bracket_volume.txt"),
    ),
    oracle=oracle,
    profile="full",
    apps=("openscad", "admesh"),
    max_steps=90,  # the oracle's screen waits are steps too
    time_budget_s=1200.0,
)
