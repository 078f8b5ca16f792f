"""Weave-Spatial-7 (campsite) without a VM: the Tents model (game ids, the placement search, random fields, saved
moves), the oracle's solver and sheet commands run by the real python3 and bash, the clauses on right and wrong
finals and on a save the real sgt-tents wrote (unit), and the real Campsite Office on Xvfb through the real agent
(xvfb): the plans read back off the screen, the refusals, the allocation and the permit code."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from pixel_apps import pixel_app

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.games.sgt_common import record, solver_command
from weavegym.envs.tasks.spatial import _campsite_common as cc
from weavegym.envs.tasks.spatial import _campsite_oracle as co
from weavegym.envs.tasks.spatial import campsite as cs
from weavegym.envs.tasks.spatial.tents import decode, encode, parse_refs, pitch_tents, replay_tents
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(cs.__file__).parent / "fixtures"
# tests/data/tents_field.sav: sgt-tents 20230122 saved this game after its twelve tents were clicked on Xvfb.
SAVED = (Path(__file__).parent / "data" / "tents_field.sav").read_bytes()
EIGHT = {"id": "8x8:fakci_clbabaa,2,1,1,1,1,3,0,3,2,0,1,3,0,3,0,3", "w": 8, "h": 8,
         "pitches": ["A1", "F1", "F3", "B4", "D4", "H4", "C6", "E6", "H6", "A8", "F8", "H8"]}
SIX = {"id": "6x6:bk_g__ha,1,2,1,1,1,1,1,1,0,3,0,2", "w": 6, "h": 6,
       "pitches": ["B1", "D2", "A4", "C4", "E4", "B6", "F6"]}
SEVEN = {"id": "7x7:bgb__bhhaah,1,2,1,0,3,0,3,1,3,1,2,0,2,1", "w": 7, "h": 7,
         "pitches": ["G1", "A2", "C2", "E2", "G3", "B4", "E4", "E6", "G6", "B7"]}
FIELDS = [EIGHT, SIX, SEVEN]
MANY = "4x3:acf,1,0,1,0,1,1,0"  # two trees, two placements
TRUTH = {"fields": FIELDS, "at": list(cc.OFFICE_AT), "board": [47, 211, 32]}


def save_text(field: Mapping[str, object], moves: list[str]) -> str:
    """A Tents save as the game writes it: the field, then one MOVE record per click."""
    size, desc = str(field["id"]).split(":", 1)
    head = [("SAVEFILE", "Simon Tatham's Portable Puzzle Collection"), ("VERSION", "1"), ("GAME", "Tents"),
            ("PARAMS", size + "de"), ("CPARAMS", size + "de"), ("DESC", desc), ("NSTATES", str(len(moves) + 1)),
            ("STATEPOS", str(len(moves) + 1))]
    return "".join(record(k, v) for k, v in [*head, *(("MOVE", m) for m in moves)])


def clicks(field: Mapping[str, object]) -> list[str]:
    return [f"T{x},{y}" for x, y in sorted(parse_refs(" ".join(field["pitches"]), 8, 8) or set())]  # type: ignore


def _final(permits: tuple[str, ...] = ("ABC234", "XYZ789", "KLM456")) -> dict[str, bytes]:
    """The files of a campsite pitched right: the three saves, the office's record and the sheet."""
    saves = [SAVED, save_text(SIX, clicks(SIX)).encode(), save_text(SEVEN, clicks(SEVEN)).encode()]
    files = {cc.save_path(n): data for n, data in enumerate(saves, 1)}
    records = [{"field": n, "pitches": sorted(f["pitches"]), "sha256": hashlib.sha256(saves[n - 1]).hexdigest(),
                "permit": permits[n - 1]} for n, f in enumerate(FIELDS, 1)]
    files[cc.RECORD] = "".join(json.dumps(r) + "\n" for r in records).encode()
    files[cc.SHEET] = "".join(f"{n} | {permits[n - 1]} | {' '.join(f['pitches'])}\n"
                              for n, f in enumerate(FIELDS, 1)).encode()
    return files


def _outcomes(files: Mapping[str, bytes]) -> dict[str, Outcome]:
    probe = FilesProbe(files)
    return {c.name: c.check(probe, TRUTH).outcome for c in cs.TASK.clauses}  # type: ignore[arg-type]


ALL_SATISFIED = {c.name: Outcome.SATISFIED for c in cs.TASK.clauses}


def test_the_search_finds_the_one_placement_and_tells_none_and_many() -> None:
    for field in FIELDS:
        assert pitch_tents(field["id"]) == "PITCHES " + " ".join(field["pitches"])  # type: ignore[arg-type]
    assert pitch_tents("2x1:_a,0,1,1") == "PITCHES B1" and pitch_tents("2x1:_a,1,0,1") == "NONE"
    assert pitch_tents("3x1:aa,1,0,0,1") == "PITCHES A1" and pitch_tents("3x3:dd,0,1,0,0,1,0") == "NONE"
    assert pitch_tents("3x3:dd,1,0,0,1,0,0") == "NONE"  # a tent beside the tree only diagonally: not allowed
    assert pitch_tents("3x1:aa,1,0,1,1") == "NONE"  # two tents for one tree
    assert pitch_tents("4x2:_f_,0,1,1,0,1,1") == "NONE"  # the two tents would touch
    assert pitch_tents(MANY) == "MANY"
    w, h, trees, cols, rows = decode(EIGHT["id"])  # type: ignore[arg-type]
    assert (w, h, len(trees), sum(cols), sum(rows)) == (8, 8, 12, 12, 12) and trees[0] == (6, 0)
    assert encode(w, h, trees, parse_refs(" ".join(EIGHT["pitches"]), 8, 8) or set()) == EIGHT["id"]
    assert encode(30, 1, [(29, 0)], [(28, 0)]).startswith("30x1:zd_,")  # 29 open squares: z (25) then d (4)
    with pytest.raises(ValueError):
        decode("6x6:bk_g__h,1,2,1,1,1,1,1,1,0,3,0,2")  # one square short


@pytest.mark.parametrize("seed", range(4))
def test_every_seed_draws_three_sizes_each_with_one_placement(seed: int) -> None:
    fields = cs.draw_fields(np.random.default_rng(seed))
    assert sorted(f["w"] for f in fields) == list(cc.SIZES)
    for number, field in enumerate(fields, 1):
        assert pitch_tents(field["id"]) == "PITCHES " + " ".join(field["pitches"])
        lines = cc.plan_lines(number, field)
        assert not any(pixel_font.unsupported(line) for line in lines) and len(lines) == field["h"] + 3


def test_tents_moves_replay_and_a_solve_does_not_count() -> None:
    tents, problem = replay_tents(SIX["id"], ["T1,0", "N0,0", "T2,1;T3,1", "B2,1"])  # type: ignore[arg-type]
    assert problem == "" and tents == {(1, 0), (3, 1)}
    assert replay_tents(SIX["id"], ["S;T1,0"])[1] == "the saved game used Game > Solve"  # type: ignore[arg-type]
    assert "on a tree" in replay_tents(SIX["id"], ["T2,0"])[1]  # type: ignore[arg-type]
    assert "not a Tents move" in replay_tents(SIX["id"], ["X1,1"])[1]  # type: ignore[arg-type]


def test_a_campsite_pitched_right_satisfies_every_clause_with_the_real_apps_save() -> None:
    assert _outcomes(_final()) == ALL_SATISFIED
    files = _final()
    files[cc.SHEET] = files[cc.SHEET].replace(b"A1 F1 F3", b"f3, a1 F1")  # any order, case and separator
    assert _outcomes(files) == ALL_SATISFIED


def test_a_wrong_unpitched_or_solved_save_fails() -> None:
    for save in (save_text(SIX, clicks(SIX)[:-1]),  # one tent short
                 save_text(SIX, [*clicks(SIX), "T5,0"]),  # one tent too many
                 save_text(SEVEN, clicks(SEVEN)),  # another field
                 save_text(SIX, ["S;" + ";".join(clicks(SIX))])):  # Game > Solve
        files = _final()
        files[cc.save_path(2)] = save.encode()
        got = _outcomes(files)
        assert got["fields_pitched"] == Outcome.PARTIAL and got["allocated"] == Outcome.PARTIAL, save


def test_missing_allocations_a_changed_save_and_a_wrong_sheet_fail() -> None:
    files = _final()
    files[cc.save_path(1)] += b"\n"
    assert _outcomes(files)["allocated"] == Outcome.PARTIAL
    files = _final()
    del files[cc.RECORD]
    got = _outcomes(files)
    assert got["allocated"] == got["allocation_sheet"] == Outcome.FAILED and got["fields_pitched"] == Outcome.SATISFIED
    for text in (b"1 | ABC235 | A1 F1 F3 B4 D4 H4 C6 E6 H6 A8 F8 H8\n",  # another permit, fields missing
                 _final()[cc.SHEET].replace(b"A8 F8 H8", b"A8 F8 G8"),  # a wrong pitch
                 _final()[cc.SHEET].replace(b"XYZ789", b"XYZ788"),  # a wrong permit
                 b"N | permit | pitches\n" + _final()[cc.SHEET]):  # a header line
        files = _final()
        files[cc.SHEET] = text
        assert _outcomes(files)["allocation_sheet"] == Outcome.FAILED, text


def test_the_oracles_solver_and_sheet_run_in_the_real_python_and_bash(tmp_path: Path) -> None:
    (tmp_path / "office").mkdir()
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    answer = tmp_path / "office" / "answer.txt"
    out = subprocess.run(["bash", "-c", solver_command(pitch_tents, EIGHT["id"], answer_file=str(answer),  # type: ignore
                                                       label="ANSWER")],
                         check=True, capture_output=True, text=True, env=env, cwd=tmp_path).stdout
    assert out.strip() == "ANSWER PITCHES " + " ".join(EIGHT["pitches"])
    for number, permit in ((1, "ABC234"), (2, "XYZ789")):
        subprocess.run(["bash", "-c", co.sheet_command(f"{number} | {permit} | A1 C3")], check=True,
                       capture_output=True, env=env)
    rows, problem = cs.parse_sheet((tmp_path / "office" / "allocations.txt").read_text())
    assert problem == "" and rows == {1: ("ABC234", "A1 C3"), 2: ("XYZ789", "A1 C3")}


# ---- the real office on a real X server, through the real guest agent ----------------------------------------

@pytest.mark.xvfb
def test_the_office_shows_plans_as_pixels_and_allocates_with_a_permit(xvfb: XvfbDisplay, client: GuestClient,
                                                                     tmp_path: Path) -> None:
    campsite = tmp_path / "campsite"
    campsite.mkdir()
    fields = [EIGHT, SIX]
    conf = {"fields": [{"lines": cc.plan_lines(n, f), "desc": str(f["id"]).split(":", 1)[1], "pitches": f["pitches"],
                        "w": f["w"], "h": f["h"]} for n, f in enumerate(fields, 1)],
            "campsite": str(campsite), "layout": cc.layout()}

    def shot() -> np.ndarray:
        return client.screenshot().image

    def press(action: Mapping[str, int]) -> None:
        client.click(action["x"], action["y"])

    def allocate(text: str, status: str) -> None:
        press(co._box_click(at, cc.ENTRY))
        client.type_text(text)
        press(co._box_click(at, cc.ALLOCATE))
        wait_for(lambda: co.read_status(shot(), at) == status, 20, what=f"the office saying {status}")
        press(co._box_click(at, cc.ENTRY))
        client.key("ctrl+a")  # Tk: to the start of the line
        client.key("ctrl+k")  # Tk: delete to its end

    with pixel_app(FIXTURES / "campsite_office.py", conf, tmp_path, xvfb.display) as proc:
        at = list(wait_for(lambda: cc.origin(shot()), 20, what="the office drawn"))
        assert co.read_plan(shot(), at, 1) is None  # nothing shown before a click
        press(co._box_click(at, cc.ALLOCATE))
        wait_for(lambda: co.read_status(shot(), at) == "SHOW THE FIELD FIRST", 20, what="the refusal before a plan")
        press(co._box_click(at, cc.SHOW))
        assert wait_for(lambda: co.read_plan(shot(), at, 1), 20, what="field 1's plan read back") == EIGHT["id"]
        allocate(" ".join(EIGHT["pitches"]), "NO SAVE FIELD-1.SAV YET")  # type: ignore[arg-type]
        (campsite / "field-1.sav").write_text(save_text(SIX, []))
        allocate(" ".join(EIGHT["pitches"]), "FIELD-1.SAV IS NOT THIS FIELD")  # type: ignore[arg-type]
        (campsite / "field-1.sav").write_bytes(SAVED)
        allocate("A1 F1 F3 B4 D4 H4 C6 E6 H6 A8 F8 G8", "THOSE PITCHES DO NOT FIT FIELD 1")
        allocate("A1 Z9 " + "\u00e9\u4e2d" * 40, "NOT A SQUARE OF THE FIELD: Z9")
        allocate("A1 " * 200, "THAT LIST IS TOO LONG")
        press(co._box_click(at, cc.ENTRY))
        client.type_text(" ".join(reversed(EIGHT["pitches"])).lower())  # type: ignore[arg-type]
        press(co._box_click(at, cc.ALLOCATE))
        line = json.loads(proc.stdout.readline())
        assert line["field"] == 1 and line["sha256"] == hashlib.sha256(SAVED).hexdigest() and len(line["permit"]) == 6
        wait_for(lambda: co.read_result(shot(), at, 1) == f"FIELD 1: PERMIT {line['permit']}", 20,
                 what="the permit code read back off the screen")
        assert co.read_status(shot(), at) == "FIELD 1 ALLOCATED" and co.read_plan(shot(), at, 2) is None
        press(co._box_click(at, cc.SHOW))
        assert wait_for(lambda: co.read_plan(shot(), at, 2), 20, what="field 2's plan") == SIX["id"]
