"""Weave-Games-5 (league night) without a VM: the board choice, the oracle's solver and table command run by the
real python3 and bash, the clauses on right and wrong finals (unit), and the real League Scoreboard on Xvfb with
a stand-in for sgt-pegs, through the real agent (xvfb): the start file, its deletion, the refusals, the record
and the code read back off the screen."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from pixel_apps import pixel_app
from puzzle_frames import blank_screen, screen_with

from weavegym.core.deadline import wait_for
from weavegym.envs.task import OracleContext
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.games import league_night as ln
from weavegym.envs.tasks.games.peg_solitaire import board_text, plan_jumps, replay
from weavegym.envs.tasks.games.sgt_common import record, solver_command
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(ln.__file__).parent / "fixtures"
# Boards sgt-pegs 0.0~20230410 generated for "5x5random#11", "#22" and "#33" (the first of six each).
DESCS = ["OOHOOPPPPOPPHPPPPPPPPPOPO", "POOOOHOOPOPPPPPPPPPOOPHPP", "OOPOPOOPPPPPHPPPPPOPPHPPO"]
TRUTH = {"descs": DESCS, "at": list(ln.BOARD_AT)}


def save_text(desc: str, moves: list[str]) -> str:
    """A Pegs save as the game writes it: the description, then one MOVE record per jump."""
    head = [("SAVEFILE", "Simon Tatham's Portable Puzzle Collection"), ("VERSION", "1"), ("GAME", "Pegs"),
            ("PARAMS", "5x5random"), ("CPARAMS", "5x5random"), ("DESC", desc), ("NSTATES", str(len(moves) + 1)),
            ("STATEPOS", str(len(moves) + 1))]
    return "".join(record(k, v) for k, v in [*head, *(("MOVE", m) for m in moves)])


def _final(codes: tuple[str, ...] = ("ABCDEF", "GHJKLM", "NPQRST")) -> dict[str, bytes]:
    """The files of a night played right: saves, plans, the scoreboard's record and the table."""
    files: dict[str, bytes] = {}
    records, table = [], []
    for number, (desc, code) in enumerate(zip(DESCS, codes, strict=True), 1):
        plan = plan_jumps(board_text(desc))
        save = save_text(desc, plan).encode()
        files[ln.save_path(number)] = save
        files[ln.plan_path(number)] = "".join(m + "\n" for m in plan).encode()
        records.append({"round": number, "sha256": hashlib.sha256(save).hexdigest(), "code": code, "at": 1.0})
        table.append(f"{number} | {len(plan)} | {code}")
    files[ln.RECORD] = "".join(json.dumps(r) + "\n" for r in records).encode()
    files[ln.TABLE] = "".join(line + "\n" for line in table).encode()
    return files


def _outcomes(files: Mapping[str, bytes]) -> dict[str, Outcome]:
    probe = FilesProbe(files)
    return {c.name: c.check(probe, TRUTH).outcome for c in ln.TASK.clauses}  # type: ignore[arg-type]


ALL_SATISFIED = {c.name: Outcome.SATISFIED for c in ln.TASK.clauses}


def test_the_test_boards_are_solvable_and_the_pick_skips_small_or_unsolvable_ones() -> None:
    for desc in DESCS:
        plan = plan_jumps(board_text(desc))
        assert plan and replay(desc, plan) == (1, None) and desc.count("P") >= ln.MIN_PEGS
    unsolvable = "PPOOOOOOOOOOOOOOOOOOOOOOO"  # two pegs side by side, no hole to jump into
    assert ln.pick_board(["HPPOOOOOOOOOOOOOOOOOOOOOO", unsolvable, DESCS[1]]) == DESCS[1]


def test_the_board_is_read_off_the_pegs_window_once_it_sits_where_the_scoreboard_moves_it() -> None:
    desc, xs, ys = ln.read_board(screen_with("pegs_round1_start"))  # type: ignore[misc]
    assert board_text(desc) == "PPPPO/PPPPP/PHPPO/PPPPO/OOPOO"  # seed 0's first board, as the truth had it
    assert [round(x) for x in xs] == [73, 106, 139, 172, 205] and [round(y) for y in ys] == [117, 150, 183, 216, 249]
    assert ln.read_board(screen_with("pegs_round2_one_jump"))[0] == "POOOOPOHOOPPHPPOPPPPOOPPO"  # type: ignore[index]
    # Where openbox first maps it, the window is about to move: drags there would land on the desktop.
    assert ln.read_board(screen_with("pegs_round2_before_move")) is None
    assert ln.read_board(blank_screen()) is None


def test_a_board_whose_first_column_is_all_obstacles_keeps_its_columns() -> None:
    screen = screen_with("pegs_round1_start")
    yy, xx = np.mgrid[:720, :1280]
    for y in (117, 150, 183, 216, 249):  # paint column 0's pegs over with the window's background
        screen[(xx - 73) ** 2 + (yy - y) ** 2 <= 15 ** 2] = 213  # the drawing area's background
    desc, xs, _ys = ln.read_board(screen)  # type: ignore[misc]
    assert board_text(desc) == "OPPPO/OPPPP/OHPPO/OPPPO/OOPOO" and round(xs[0]) == 73


def test_the_oracle_plays_the_board_it_reads_off_the_screen_not_the_truths() -> None:
    truth = ln.TASK.oracle_truth(TRUTH)
    assert "descs" not in truth
    ctx = OracleContext({}, truth, (1280, 720), {"screen": screen_with("pegs_round2_before_move"), "terminal": ""}, {})
    steps = ln.oracle(ctx)
    assert next(steps)["kind"] == "click"  # Start
    seen = [next(steps) for _ in range(3)]  # the window has not moved yet: only waits
    assert all(step["kind"] == "wait" for step in seen)
    ctx.obs = {"screen": screen_with("pegs_round1_start"), "terminal": ""}
    step = next(steps)
    while step["kind"] != "shell":
        step = next(steps)
    assert "PPPPO/PPPPP/PHPPO/PPPPO/OOPOO" in step["command"]


def test_a_night_played_right_satisfies_every_clause() -> None:
    assert _outcomes(_final()) == ALL_SATISFIED


def test_an_unsolved_or_swapped_save_fails_the_saves() -> None:
    files = _final()
    plan = plan_jumps(board_text(DESCS[0]))
    files[ln.save_path(1)] = save_text(DESCS[0], plan[:-1]).encode()
    got = _outcomes(files)
    assert got["saves_solved"] == Outcome.PARTIAL and got["recorded"] == Outcome.PARTIAL
    files = _final()
    files[ln.save_path(1)], files[ln.save_path(2)] = files[ln.save_path(2)], files[ln.save_path(1)]
    assert _outcomes(files)["saves_solved"] == Outcome.PARTIAL


def test_forged_codes_a_missing_record_or_a_save_changed_after_recording_fail() -> None:
    files = _final()
    files[ln.TABLE] = files[ln.TABLE].replace(b"GHJKLM", b"GHJKLN")
    assert _outcomes(files)["league_table"] == Outcome.FAILED
    files = _final()
    files[ln.RECORD] = b"".join(line + b"\n" for line in files[ln.RECORD].splitlines()[:2])
    got = _outcomes(files)
    assert got["recorded"] == Outcome.PARTIAL and got["league_table"] == Outcome.FAILED
    files = _final()
    del files[ln.RECORD]
    assert _outcomes(files)["recorded"] == Outcome.FAILED
    files = _final()
    files[ln.save_path(3)] += b"\n"
    assert _outcomes(files)["recorded"] == Outcome.PARTIAL


def test_a_plan_that_was_not_played_or_a_wrong_jump_count_fails() -> None:
    files = _final()
    files[ln.plan_path(2)] = b"0,0-2,0\n"
    got = _outcomes(files)
    assert got["plans"] == Outcome.PARTIAL and got["played_plans"] == Outcome.PARTIAL
    assert got["saves_solved"] == Outcome.SATISFIED
    files = _final()
    files[ln.TABLE] = files[ln.TABLE].replace(b"1 | ", b"1 | 9", 1)
    assert _outcomes(files)["league_table"] == Outcome.FAILED
    files = _final()
    files[ln.TABLE] = b"round | jumps | code\n" + files[ln.TABLE]
    assert _outcomes(files)["league_table"] == Outcome.FAILED


def test_the_oracles_solver_and_table_run_in_the_real_python_and_bash(tmp_path: Path) -> None:
    (tmp_path / "league").mkdir()
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    answer = tmp_path / "league" / "round1.txt"
    out = subprocess.run(["bash", "-c", solver_command(plan_jumps, board_text(DESCS[0]), answer_file=str(answer),
                                                       label="PLAN")],
                         check=True, capture_output=True, text=True, env=env, cwd=tmp_path).stdout
    plan = answer.read_text().split()
    assert out.startswith("PLAN ") and out.split()[1:] == plan and replay(DESCS[0], plan) == (1, None)
    lines = ["1 | 12 | ABCDEF", "2 | 13 | GHJKLM"]
    subprocess.run(["bash", "-c", ln.table_command(lines)], check=True, capture_output=True, env=env)
    rows, problem = ln.parse_table((tmp_path / "league" / "table.txt").read_text())
    assert problem == "" and rows == {1: (12, "ABCDEF"), 2: (13, "GHJKLM")}


# ---- the real scoreboard on a real X server, through the real guest agent ------------------------------------

STAND_IN = """import shutil, sys, tkinter as tk
shutil.copy(sys.argv[2], sys.argv[0] + ".loaded")
root = tk.Tk()
root.title("Pegs")
root.geometry("200x200+300+300")
root.mainloop()
"""


@pytest.mark.xvfb
def test_the_scoreboard_starts_rounds_and_records_saves_with_a_code_on_screen(xvfb: XvfbDisplay,
                                                                             client: GuestClient,
                                                                             tmp_path: Path) -> None:
    pegs = tmp_path / "pegs"
    pegs.write_text(f"#!{sys.executable}\n{STAND_IN}")
    pegs.chmod(0o755)
    saves = tmp_path / "saves"
    saves.mkdir()
    conf = {"rounds": [{"game": "Pegs", "params": "5x5random", "desc": d} for d in DESCS[:2]], "pegs": str(pegs),
            "window": "^Pegs$", "saves": str(saves), "pegs_at": list(ln.PEGS_AT), "layout": ln.layout()}

    def status() -> str:
        image = client.screenshot().image
        return pixel_font.read_text(image, at[0] + ln.STATUS_TEXT[0], at[1] + ln.STATUS_TEXT[1], ln.SCALE, 34)

    def press(box: tuple[int, int, int, int]) -> None:
        client.click(at[0] + box[0] + box[2] // 2, at[1] + box[1] + box[3] // 2)

    with pixel_app(FIXTURES / "league_scoreboard.py", conf, tmp_path, xvfb.display, TMPDIR=str(tmp_path)) as proc:
        at = list(wait_for(lambda: ln.origin(client.screenshot().image), 20, what="the scoreboard drawn"))
        press(ln.RECORD_BOX)
        wait_for(lambda: status() == "START THE NEXT ROUND FIRST", 20, what="the refusal before a round")
        press(ln.START)
        loaded = Path(str(pegs) + ".loaded")
        wait_for(lambda: loaded.exists() and not list(tmp_path.glob("league-*")), 20,
                 what="the board loaded and its start file gone")
        assert loaded.read_text() == ln_start_file(DESCS[0])
        press(ln.START)
        wait_for(lambda: status() == "RECORD ROUND 1 FIRST", 20, what="the refusal of a second start")
        press(ln.RECORD_BOX)
        wait_for(lambda: status() == "NO SAVE FILE ROUND1.SAV YET", 20, what="the refusal without a save")
        save = save_text(DESCS[0], plan_jumps(board_text(DESCS[0]))).encode()
        (saves / "round1.sav").write_bytes(save)
        press(ln.RECORD_BOX)
        line = json.loads(proc.stdout.readline())
        assert line["round"] == 1 and line["sha256"] == hashlib.sha256(save).hexdigest()
        wait_for(lambda: ln.read_result(client.screenshot().image, at, 1) == f"ROUND 1  CODE {line['code']}", 20,
                 what="the code read back off the screen")
        wait_for(lambda: not any(w.title == "Pegs" for w in client.list_windows()[0]), 20,
                 what="the round's puzzle closed")
        loaded.unlink()
        press(ln.START)
        wait_for(lambda: loaded.exists(), 20, what="round 2 loaded")
        assert loaded.read_text() == ln_start_file(DESCS[1])


def ln_start_file(desc: str) -> str:
    return save_text(desc, [])
