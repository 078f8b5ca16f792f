"""Weave-Games-6 (proof desk) without a VM: the nonogram model (clues, the solution count, the drawn submissions,
Pattern's moves), the oracle's solver and print-list commands run by the real python3 and bash, the clauses on
right and wrong finals and on a save the real sgt-pattern wrote (unit), and the real Proof Desk on Xvfb through the
real agent (xvfb): the clues read back off the screen, the refusals, the verdicts and the slot code."""

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
from weavegym.envs.tasks.games import _proof_common as pc
from weavegym.envs.tasks.games import _proof_oracle as po
from weavegym.envs.tasks.games import proof_desk as pd
from weavegym.envs.tasks.games.nonogram import clues, draw_puzzle, game_id, judge_puzzle, replay_pattern
from weavegym.envs.tasks.games.sgt_common import record, solver_command
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(pd.__file__).parent / "fixtures"
# tests/data/pattern_proof.sav: sgt-pattern 20230122 saved this game after the oracle played SOUND's solution on Xvfb.
SOUND = {"kind": "sound", "id": "6x6:2.2/1.3/1.1.1/3.2/1/3.1/2.1.1/1.4/1.1.1/2/2.1/1.2.1",
         "solution": "##.#.#/#.####/.#.#.#/.##.../##.#../#.##.#"}
BROKEN = {"kind": "broken", "id": "6x6:1.2/4/2/2.1/1.1/1.1.1/1/2/4/1.1.1/2.1/2.1.1", "solution": ""}
AMBIGUOUS = {"kind": "ambiguous", "id": "6x6:1.1.1/2.1/1.1/1.1/1.2/1.2/1/2.1.1/1/1.1.1/3/3.1", "solution": ""}
SAVED = (Path(__file__).parent / "data" / "pattern_proof.sav").read_bytes()
TRUTH = {"puzzles": [SOUND, BROKEN, AMBIGUOUS], "at": list(pc.DESK_AT), "grid": [400.0, 426.0, 23.5, 23.5]}


def save_text(ident: str, moves: list[str]) -> str:
    """A Pattern save as the game writes it: the clues, then one MOVE record per fill."""
    size, desc = ident.split(":", 1)
    head = [("SAVEFILE", "Simon Tatham's Portable Puzzle Collection"), ("VERSION", "1"), ("GAME", "Pattern"),
            ("PARAMS", size), ("CPARAMS", size), ("DESC", desc), ("NSTATES", str(len(moves) + 1)),
            ("STATEPOS", str(len(moves) + 1))]
    return "".join(record(k, v) for k, v in [*head, *(("MOVE", m) for m in moves)])


def fills(solution: str) -> list[str]:
    return [f"F{x},{y},1,1" for y, row in enumerate(solution.split("/")) for x, ch in enumerate(row) if ch == "#"]


def _final(slot: str = "ABC234", proof: bytes = SAVED) -> dict[str, bytes]:
    """The files of a week proofed right: the sound puzzle's proof, the desk's record and the print list."""
    records = [{"puzzle": 1, "verdict": "sound", "sha256": hashlib.sha256(proof).hexdigest(), "slot": slot},
               {"puzzle": 2, "verdict": "broken", "sha256": None, "slot": None},
               {"puzzle": 3, "verdict": "ambiguous", "sha256": None, "slot": None}]
    return {pc.proof_path(1): proof, pc.RECORD: "".join(json.dumps(r) + "\n" for r in records).encode(),
            pc.PRINT_LIST: f"1 | {slot} | {SOUND['solution']}\n".encode()}


def _outcomes(files: Mapping[str, bytes]) -> dict[str, Outcome]:
    probe = FilesProbe(files)
    return {c.name: c.check(probe, TRUTH).outcome for c in pd.TASK.clauses}  # type: ignore[arg-type]


ALL_SATISFIED = {c.name: Outcome.SATISFIED for c in pd.TASK.clauses}


def test_the_solution_count_tells_sound_ambiguous_and_broken_apart() -> None:
    assert judge_puzzle(SOUND["id"]) == "SOUND " + SOUND["solution"]
    assert judge_puzzle(BROKEN["id"]) == "BROKEN" and judge_puzzle(AMBIGUOUS["id"]) == "AMBIGUOUS"
    assert judge_puzzle("2x2:1/1/1/1") == "AMBIGUOUS"  # the two diagonals
    assert judge_puzzle("2x2:2/2/2/2") == "SOUND ##/##" and judge_puzzle("2x2:2/1/2/2") == "BROKEN"
    assert clues(("##.", ".#.", "#.#")) == ([[1, 1], [2], [1]], [[2], [1], [1, 1]])
    assert game_id([[1, 1], [2], [1]], [[2], [1], [1, 1]]) == "3x3:1.1/2/1/2/1/1.1"


@pytest.mark.parametrize("seed", range(6))
def test_every_seed_draws_one_or_two_sound_puzzles_each_of_its_kind(seed: int) -> None:
    rng = np.random.default_rng(seed)
    kinds = pd.pick_kinds(rng)
    assert 1 <= kinds.count("sound") <= 2 and len(kinds) == pc.COUNT
    for kind in kinds:
        puzzle = draw_puzzle(rng, kind)
        verdict = judge_puzzle(puzzle["id"])
        assert verdict.split()[0].lower() == kind and puzzle["id"] == game_id(puzzle["columns"], puzzle["rows"])
        assert all(clue for clue in (*puzzle["columns"], *puzzle["rows"]))  # no blank line
        if kind == "sound":
            assert clues(tuple(puzzle["solution"].split("/"))) == (puzzle["columns"], puzzle["rows"])


def test_the_moves_of_pattern_replay_and_a_solve_does_not_count() -> None:
    grid, problem = replay_pattern("3x2:1/1/1/2/1", ["F0,0,2,1", "E1,0,1,1", "F2,1,1,1", "U2,1,1,1", "F1,0,1,1"])
    assert problem == "" and grid == ("##.", "...")
    assert replay_pattern("3x2:1/1/1/2/1", ["S101010"])[1] == "the saved game used Game > Solve"
    assert "not a move" in replay_pattern("3x2:1/1/1/2/1", ["F2,0,2,1"])[1]


def test_a_week_proofed_right_satisfies_every_clause_with_the_real_apps_save() -> None:
    assert _outcomes(_final()) == ALL_SATISFIED
    assert _outcomes(_final(proof=save_text(SOUND["id"], fills(SOUND["solution"])).encode())) == ALL_SATISFIED
    written_otherwise = SOUND["id"].replace("/1/", "/01/", 1)  # the same clues: Pattern takes 01 for 1
    assert _outcomes(_final(proof=save_text(written_otherwise, fills(SOUND["solution"])).encode())) == ALL_SATISFIED


def test_a_wrong_unsolved_or_revealed_proof_fails() -> None:
    for proof in (save_text(SOUND["id"], fills(SOUND["solution"])[:-1]),  # one cell short
                  save_text(BROKEN["id"], fills(SOUND["solution"])),  # another puzzle's clues
                  save_text(SOUND["id"], ["S" + SOUND["solution"].replace("/", "").replace("#", "1")
                                          .replace(".", "0")])):  # Game > Solve
        got = _outcomes(_final(proof=proof.encode()))
        assert got["proofs_solved"] == Outcome.FAILED and got["proofs_recorded"] == Outcome.SATISFIED


def test_wrong_verdicts_a_changed_proof_and_a_wrong_print_list_fail() -> None:
    files = _final()
    files[pc.RECORD] = files[pc.RECORD].replace(b'"broken"', b'"ambiguous"')
    assert _outcomes(files)["verdicts"] == Outcome.PARTIAL
    files = _final()
    files[pc.proof_path(1)] += b"\n"
    assert _outcomes(files)["proofs_recorded"] == Outcome.FAILED
    files = _final()
    del files[pc.RECORD]
    got = _outcomes(files)
    assert got["verdicts"] == got["proofs_recorded"] == got["print_list"] == Outcome.FAILED
    for text in (b"1 | ABC235 | " + SOUND["solution"].encode(),  # another slot
                 b"1 | ABC234 | " + SOUND["solution"].replace("#", ".", 1).encode(),  # another solution
                 b"1 | ABC234 | " + SOUND["solution"].encode() + b"\n3 | ABC234 | ##/##",  # an ambiguous one listed
                 b"N | slot | solution\n1 | ABC234 | " + SOUND["solution"].encode()):  # a header line
        files = _final()
        files[pc.PRINT_LIST] = text
        assert _outcomes(files)["print_list"] == Outcome.FAILED, text


def test_the_oracles_solver_and_print_list_run_in_the_real_python_and_bash(tmp_path: Path) -> None:
    (tmp_path / "issue").mkdir()
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    for puzzle, want in ((SOUND, "SOUND " + SOUND["solution"]), (BROKEN, "BROKEN"), (AMBIGUOUS, "AMBIGUOUS")):
        answer = tmp_path / "issue" / "verdict.txt"
        out = subprocess.run(["bash", "-c", solver_command(judge_puzzle, puzzle["id"], answer_file=str(answer),
                                                           label="VERDICT")],
                             check=True, capture_output=True, text=True, env=env, cwd=tmp_path).stdout
        assert out.strip() == f"VERDICT {want}" and answer.read_text().strip() == want
    lines = [f"1 | ABC234 | {SOUND['solution']}", "3 | XYZ789 | ##.../#...."]
    subprocess.run(["bash", "-c", po.print_command(lines)], check=True, capture_output=True, env=env)
    rows, problem = pd.parse_print_list((tmp_path / "issue" / "print_list.txt").read_text())
    assert problem == "" and rows == {1: ("ABC234", SOUND["solution"]), 3: ("XYZ789", "##.../#....")}


# ---- the real desk on a real X server, through the real guest agent ------------------------------------------

@pytest.mark.xvfb
def test_the_desk_shows_clues_as_pixels_and_records_verdicts_with_a_slot_code(xvfb: XvfbDisplay,
                                                                              client: GuestClient,
                                                                              tmp_path: Path) -> None:
    proofs = tmp_path / "proofs"
    proofs.mkdir()
    puzzles = [SOUND, BROKEN, AMBIGUOUS]
    conf = {"puzzles": [{"columns": [[int(n) for n in c.split(".")] for c in p["id"][4:].split("/")[:6]],
                         "rows": [[int(n) for n in c.split(".")] for c in p["id"][4:].split("/")[6:]]}
                        for p in puzzles], "proofs": str(proofs), "layout": pc.layout()}

    def status() -> str:
        image = client.screenshot().image
        return pixel_font.read_text(image, at[0] + pc.STATUS[0] + pc.PAD, at[1] + pc.STATUS[1] + pc.PAD, pc.SCALE, 34)

    def press(action: Mapping[str, int]) -> None:
        client.click(action["x"], action["y"])

    with pixel_app(FIXTURES / "proof_desk.py", conf, tmp_path, xvfb.display) as proc:
        at = list(wait_for(lambda: pc.origin(client.screenshot().image), 20, what="the desk drawn"))
        assert po.read_clues(client.screenshot().image, at, 1) is None  # nothing shown before a click
        press(po._box_click(at, pc.VERDICT, 0))
        wait_for(lambda: status() == "OPEN A PUZZLE FIRST", 20, what="the refusal before a puzzle")
        for number, puzzle in enumerate(puzzles, 1):
            press(po._box_click(at, pc.OPEN, number - 1))
            got = wait_for(lambda n=number: po.read_clues(client.screenshot().image, at, n), 20,
                           what=f"puzzle {number}'s clues read back")
            assert got == puzzle["id"]
        press(po._box_click(at, pc.OPEN, 0))
        wait_for(lambda: po.read_clues(client.screenshot().image, at, 1), 20, what="puzzle 1 again")
        press(po._box_click(at, pc.VERDICT, 0))
        wait_for(lambda: status() == "NO PROOF PUZZLE1.SAV YET", 20, what="the refusal without a proof")
        (proofs / "puzzle1.sav").write_bytes(SAVED)
        press(po._box_click(at, pc.VERDICT, 0))
        line = json.loads(proc.stdout.readline())
        assert line["puzzle"] == 1 and line["verdict"] == "sound"
        assert line["sha256"] == hashlib.sha256(SAVED).hexdigest() and len(line["slot"]) == 6
        wait_for(lambda: po.read_result(client.screenshot().image, at, 1) == f"PUZZLE 1: SOUND  SLOT {line['slot']}",
                 20, what="the slot code read back off the screen")
        press(po._box_click(at, pc.OPEN, 2))
        wait_for(lambda: po.read_clues(client.screenshot().image, at, 3), 20, what="puzzle 3")
        press(po._box_click(at, pc.VERDICT, 1))
        line = json.loads(proc.stdout.readline())
        assert line == {**line, "puzzle": 3, "verdict": "ambiguous", "sha256": None, "slot": None}
        wait_for(lambda: po.read_result(client.screenshot().image, at, 3) == "PUZZLE 3: AMBIGUOUS", 20,
                 what="the verdict read back")
