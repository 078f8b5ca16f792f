"""Weave-Design-7 (shelf brackets) without a VM: the world and its database, the template's volume against real
OpenSCAD meshes, every clause on right and wrong finals, the oracle's shell commands run by the real bash, sqlite3
and admesh (unit), and the real Workshop Sketch on Xvfb through the real agent (xvfb): the sizes read back off the
screen, the refusals, the lock on the next part and the cut-list code."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pixel_apps import pixel_app

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes, opened
from weavegym.envs.tasks.design import _shelf_common as sc
from weavegym.envs.tasks.design import shelf_brackets as sb
from weavegym.envs.tasks.spatial.stl_geometry import triangles, volume
from weavegym.evaluators import GuiArtifactViaCli
from weavegym.evaluators.scoring import Outcome
from weavegym.evaluators.shell_targets import shell_writes
from weavegym.evaluators.trajectory_rules import mentions
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

DATA = Path(__file__).parent / "data"
FIXTURES = Path(sb.__file__).parent / "fixtures"
# tests/data/shelf_bracket_*.stl: OpenSCAD 2021.01 rendered the oracle's program for seed 0's part 1 (as binary STL):
# right, without the clearance, and with the bottom hole 4 mm off.
GOOD = (DATA / "shelf_bracket_good.stl").read_bytes()
NO_CLEARANCE = (DATA / "shelf_bracket_no_clearance.stl").read_bytes()
MOVED = (DATA / "shelf_bracket_moved_hole.stl").read_bytes()
PART = sc.world(np.random.default_rng(0))["parts"][0]
TRUTH = {"parts": [{**{k: PART[k] for k in ("dims", "hole_d", "volume", "mass", "quantity", "density")}, "part": n}
                   for n in (1, 2, 3)]}
CODES = {1: "ABC234", 2: "XYZ789", 3: "KLM456"}


def _final(stl: bytes = GOOD) -> dict[str, bytes]:
    """The files of a job done right: three STLs (the same bracket), the sketch's record and the bill."""
    files = {sc.stl_path(n): stl for n in (1, 2, 3)}
    records = [{"part": 1, "refused": "12", "at": 0.0}]
    records += [{"part": n, "mass": round(PART["mass"], 2), "code": CODES[n], "sha256": hashlib.sha256(stl).hexdigest(),
                 "at": 1.0} for n in (1, 2, 3)]
    files[sc.RECORD] = "".join(json.dumps(r) + "\n" for r in records).encode()
    rows = [f"{n},{CODES[n]},{volume(triangles(stl)):.2f},{PART['mass']:.2f},{PART['quantity']}" for n in (1, 2, 3)]
    files[sc.BOM] = (sc.BOM_HEADER + "\n" + "\n".join(rows) + "\n").encode()
    return files


def _outcomes(files: Mapping[str, bytes]) -> dict[str, Outcome]:
    probe = FilesProbe(files)
    return {c.name: c.check(probe, TRUTH).outcome for c in sb.TASK.clauses}  # type: ignore[arg-type]


ALL_SATISFIED = {c.name: Outcome.SATISFIED for c in sb.TASK.clauses}


@pytest.mark.parametrize("seed", range(12))
def test_every_seed_draws_three_buildable_brackets_of_three_materials(seed: int) -> None:
    w = sc.world(np.random.default_rng(seed))
    assert len({p["material"] for p in w["parts"]}) == sc.COUNT and w["job"] not in {d[0] for d in w["decoys"]}
    for p in w["parts"]:
        d, r = p["dims"], p["hole_d"] / 2
        assert all(isinstance(v, int) and 0 < v < 100 for v in d.values())  # two digits: the labels' width
        assert d["T"] + r + 3 <= d["P"] <= d["A"] - r - 4 and d["T"] + r + 3 <= d["Q"] <= d["B"] - r - 4
        assert d["W"] >= p["hole_d"] + 8
        # A hole without its clearance is off by more than both tolerances: the checker and the sketch tell.
        bare = sc.bracket_volume(d, d["D"])
        assert (bare - p["volume"]) / p["volume"] > 1.5 * max(sc.VOLUME_TOLERANCE, sc.MASS_TOLERANCE)
        assert math.isclose(p["mass"], p["volume"] * p["density"] / 1000)
    with opened(database_bytes(sc.SCHEMA, sc.db_rows(w))) as con:
        for p in w["parts"]:
            rows = con.execute(sb.part_sql(w["job"], p["part"])).fetchall()
            assert rows == [("MAT", p["part"], p["density"], p["clearance"], p["quantity"])]
        assert con.execute("SELECT COUNT(*) FROM parts").fetchone()[0] == 3 * sc.COUNT


def test_the_template_volume_is_openscads() -> None:
    assert math.isclose(volume(triangles(GOOD)), PART["volume"], rel_tol=1e-6)
    assert sb.judge_stl(GOOD, TRUTH["parts"][0]) == ""
    assert sc.polygon_area(1.0, 4) == pytest.approx(2.0)


@pytest.mark.skipif(shutil.which("openscad") is None, reason="needs openscad")
def test_the_oracles_program_and_the_shipped_template_render_in_real_openscad(tmp_path: Path) -> None:
    source = tmp_path / "m.scad"
    source.write_text(sb.scad_program(PART["dims"], PART["hole_d"]))
    subprocess.run(["openscad", "-o", str(tmp_path / "m.stl"), str(source)], check=True, capture_output=True)
    assert sb.judge_stl((tmp_path / "m.stl").read_bytes(), TRUTH["parts"][0]) == ""
    source.write_text(sc.TEMPLATE_SCAD)
    subprocess.run(["openscad", "-o", str(tmp_path / "t.stl"), str(source)], check=True, capture_output=True)
    template = {"A": 60, "B": 40, "W": 20, "T": 4, "P": 30, "Q": 25}
    assert math.isclose(volume(triangles((tmp_path / "t.stl").read_bytes())), sc.bracket_volume(template, 5),
                        rel_tol=1e-6)


def test_a_job_done_right_satisfies_every_clause() -> None:
    assert _outcomes(_final()) == ALL_SATISFIED


def test_wrong_brackets_fail() -> None:
    for stl in (NO_CLEARANCE, MOVED):
        files = _final()
        files[sc.stl_path(2)] = stl
        assert _outcomes(files)["brackets_modelled"] == Outcome.PARTIAL
    assert "not open" in sb.judge_stl(MOVED, TRUTH["parts"][0])
    assert "mm^3" in sb.judge_stl(NO_CLEARANCE, TRUTH["parts"][0])
    shifted = triangles(GOOD) + np.array([1.0, 0.0, 0.0])
    records = np.zeros(len(shifted), dtype=np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")]))
    records["v"] = shifted
    data = GOOD[:80] + len(shifted).to_bytes(4, "little") + records.tobytes()
    assert "expected [0, 0, 0]" in sb.judge_stl(data, TRUTH["parts"][0])
    assert "missing" in sb.judge_stl(b"solid x\nendsolid x\n", TRUTH["parts"][0])
    files = {k: v for k, v in _final().items() if not k.endswith(".stl")}
    assert _outcomes(files)["brackets_modelled"] == Outcome.FAILED


def test_the_sketch_record_must_confirm_each_part_with_the_stl_as_it_is() -> None:
    files = _final()
    files[sc.stl_path(3)] = GOOD + b""  # same bytes: still fine
    assert _outcomes(files)["sketch_confirmed"] == Outcome.SATISFIED
    files[sc.stl_path(3)] = MOVED  # changed after it was confirmed
    assert _outcomes(files)["sketch_confirmed"] == Outcome.PARTIAL
    files = _final()
    files[sc.RECORD] = b"\n".join(line for line in files[sc.RECORD].split(b"\n") if b'"part": 2, "mass"' not in line)
    assert _outcomes(files)["sketch_confirmed"] == Outcome.PARTIAL
    files = _final()
    files[sc.RECORD] = files[sc.RECORD].replace(f'"mass": {round(PART["mass"], 2)}'.encode(), b'"mass": 1.0')
    assert _outcomes(files)["sketch_confirmed"] == Outcome.FAILED
    del files[sc.RECORD]
    got = _outcomes(files)
    assert got["sketch_confirmed"] == got["bill_of_materials"] == Outcome.FAILED  # no code is the sketch's


def test_a_wrong_bill_fails() -> None:
    good = _final()[sc.BOM].decode()
    row2 = good.splitlines()[2]
    fields = row2.split(",")
    for bad, want in (
            (good.replace(CODES[2], "QQQ222"), Outcome.PARTIAL),  # another code
            (good.replace(row2, ",".join([*fields[:4], str(PART["quantity"] + 1)])), Outcome.PARTIAL),
            (good.replace(row2, ",".join([*fields[:2], f"{PART['volume'] * 1.01:.2f}", *fields[3:]])), Outcome.PARTIAL),
            (good.replace(row2, ",".join([*fields[:3], f"{PART['mass'] * 1.01:.2f}", fields[4]])), Outcome.PARTIAL),
            (good + row2 + "\n", Outcome.FAILED),  # a part twice
            (good + "4,AAAAAA,1,1,1\n", Outcome.PARTIAL),  # a part the job does not have
            (good.replace(row2 + "\n", ""), Outcome.PARTIAL),
            ("total: 3 parts\n" + good, Outcome.FAILED)):
        files = _final()
        files[sc.BOM] = bad.encode()
        assert _outcomes(files)["bill_of_materials"] == want, bad
    files = _final()
    del files[sc.BOM]
    assert _outcomes(files)["bill_of_materials"] == Outcome.FAILED


@pytest.mark.skipif(shutil.which("admesh") is None or shutil.which("sqlite3") is None, reason="needs admesh, sqlite3")
def test_the_oracles_shell_commands_run_in_the_real_bash_sqlite3_and_admesh(tmp_path: Path) -> None:
    w = sc.world(np.random.default_rng(0))
    db = tmp_path / "materials.db"
    db.write_bytes(database_bytes(sc.SCHEMA, sc.db_rows(w)))
    out = subprocess.run(["sqlite3", "-separator", "|", str(db), sb.part_sql(w["job"], 1)], check=True,
                         capture_output=True, text=True).stdout
    assert out.strip() == f"MAT|1|{PART['density']}|{PART['clearance']}|{PART['quantity']}"
    workshop, cutlist = tmp_path / "workshop", tmp_path / "cutlist"
    workshop.mkdir()
    cutlist.mkdir()

    def local(command: str) -> str:
        return command.replace(sc.WORKSHOP, str(workshop)).replace(sc.CUTLIST, str(cutlist)).replace(
            "/tmp/.bracket", str(tmp_path / ".bracket"))

    (tmp_path / ".bracket-1.mark").touch()
    os.utime(tmp_path / ".bracket-1.mark", (1, 1))
    (workshop / "bracket-1.stl").write_bytes(GOOD)
    out = subprocess.run(["bash", "-c", local(sb.measure_command(1, PART["density"]))], check=True,
                         capture_output=True, text=True).stdout
    measured = out.split("\n")[0].split()
    assert measured[:2] == ["MEASURED", "1"] and "STL 1 EXISTS" in out
    assert math.isclose(float(measured[2]), PART["volume"], rel_tol=1e-5)
    assert abs(float(measured[3]) - PART["mass"]) <= 0.006
    for n in (1, 2):
        subprocess.run(["bash", "-c", local(sb.bom_command(n, CODES[n], PART["volume"], PART["mass"], 7))], check=True,
                       capture_output=True)
    rows, problem = sb.parse_bom((cutlist / "bom.csv").read_text())
    assert problem == "" and rows[2] == ["2", CODES[2], f"{PART['volume']:.2f}", f"{PART['mass']:.2f}", "7"]
    assert (cutlist / "bom.csv").read_text().splitlines()[0] == sc.BOM_HEADER


def test_the_oracles_shell_commands_do_not_read_as_writing_an_stl() -> None:
    """The task's GUI-artifact rule reads a command that names an STL inside $(…) and writes anywhere as writing it
    (a VM oracle once scored 0 on its own marker's touch)."""
    rule = next(r for r in sb.TASK.rules if isinstance(r, GuiArtifactViaCli))
    commands = [sb.measure_command(part, PART["density"]) for part in (1, 2, 3)]
    commands += [sb.bom_command(1, CODES[1], PART["volume"], PART["mass"], 7), f"touch {sb.mark_path(1)}"]
    for command in commands:
        for path in rule.paths:
            assert all(shell_writes(command, m).sign is None for m in mentions(command, path)), (command, path)


def test_the_oracle_types_a_program_with_the_clearance() -> None:
    text = sb.scad_program({"A": 60, "B": 40, "W": 20, "T": 4, "P": 30, "Q": 25}, 6.5)
    assert "hole_d = 6.5;" in text and "$fn = 24" in text and text.count("\n") == 4


# ---- the real sketch on a real X server, through the real guest agent ----------------------------------------

def _conf(workshop: Path) -> dict[str, Any]:
    return {"parts": [{"dims": p["dims"], "mass": p["mass"]} for p in sc.world(np.random.default_rng(0))["parts"]],
            "workshop": str(workshop), "layout": {**sc.layout(), "at": [0, 0]}}


@pytest.mark.xvfb
def test_the_sketch_shows_sizes_as_pixels_refuses_wrong_entries_and_gives_a_code(xvfb: XvfbDisplay,
                                                                                 client: GuestClient,
                                                                                 tmp_path: Path) -> None:
    workshop = tmp_path / "workshop"
    workshop.mkdir()
    conf = _conf(workshop)

    def find_origin() -> tuple[int, int] | None:
        return pixel_font.find_drawn(client.screenshot().image, sc.HEADING, (0, 0), sc.HEADING_AT, sc.SCALE, reach=30)

    def status() -> str:
        return sc.read_status(client.screenshot().image, at)

    def press(box: tuple[int, int, int, int], index: int = 0) -> None:
        action = sc.box_click(at, box, index)
        client.click(action["x"], action["y"])

    def enter(text: str) -> None:
        press(sc.ENTRY)
        client.key("ctrl+slash")
        client.type_text(text)
        press(sc.CONFIRM)

    with pixel_app(FIXTURES / "workshop_sketch.py", conf, tmp_path, xvfb.display) as proc:
        at = list(wait_for(find_origin, 20, what="the sketch drawn"))
        assert sc.read_part(client.screenshot().image, at, 1) is None  # nothing shown before a click
        press(sc.CONFIRM)
        wait_for(lambda: status() == "OPEN A PART FIRST", 20, what="the refusal before a part")
        press(sc.OPEN, 1)
        wait_for(lambda: status() == "PART 2 LOCKED: CONFIRM PART 1", 20, what="part 2 locked")
        press(sc.OPEN, 0)
        dims = wait_for(lambda: sc.read_part(client.screenshot().image, at, 1), 20, what="part 1's sizes")
        assert dims == conf["parts"][0]["dims"]
        enter("x" * 300)
        wait_for(lambda: status() == "TYPE THE MASS IN GRAMS", 20, what="the refusal of odd text")
        mass = conf["parts"][0]["mass"]
        enter(f"{mass:.2f}")
        wait_for(lambda: status() == "NO BRACKET-1.STL YET", 20, what="the refusal without an STL")
        (workshop / "bracket-1.stl").write_bytes(GOOD)
        enter(f"{mass * 1.004:.2f}")
        wait_for(lambda: status() == "MASS FOR PART 1 IS WRONG", 20, what="the refusal of a wrong mass")
        assert json.loads(proc.stdout.readline())["refused"] == f"{mass * 1.004:.2f}"
        enter(f"{mass:.2f}".replace(".", ","))
        line = json.loads(proc.stdout.readline())
        assert line["part"] == 1 and line["sha256"] == hashlib.sha256(GOOD).hexdigest() and len(line["code"]) == 6
        wait_for(lambda: sc.result_code(sc.read_result(client.screenshot().image, at, 1), 1) == line["code"], 20,
                 what="the code read back off the screen")
        press(sc.OPEN, 1)
        dims = wait_for(lambda: sc.read_part(client.screenshot().image, at, 2), 20, what="part 2's sizes")
        assert dims == conf["parts"][1]["dims"]
