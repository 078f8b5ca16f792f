"""The puzzle oracles read the board off the window, as an agent must, never the truth's copy (withheld from them):
on a frame recorded in the VM they park the pointer off the window, then hand the shell's solver the board they
read; with no board on the screen they give up with a fail that says so."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from puzzle_frames import blank_screen, screen_with

from weavegym.envs.task import OracleContext
from weavegym.envs.tasks.games import peg_solitaire, same_game
from weavegym.envs.tasks.spatial import cube_roll, twiddle_turns

# module, the truth with a wrong board (withheld, so never seen), the frame and where it goes, the board it shows
CASES = [
    (peg_solitaire, {"desc": "P" * 25, "pegs": 25, "window": [41, 60, 197, 225]}, "pegs_round1_start", (0, 0),
     "PPPPO/PPPPP/PHPPO/PPPPO/OOPOO"),
    (same_game, {"desc": ",".join("1" * 50), "window": [465, 244, 350, 249]}, "samegame_under_pointer", (400, 180),
     "2313133311/2313123231/1122321122/3213213231/3213213131"),
    (cube_roll, {"desc": "0000,0", "best": "", "window": [520, 217, 240, 305]}, "cube_under_pointer", (480, 180),
     "B.../.B.B/BB../..CB"),
    (twiddle_turns, {"desc": "1u2u3u4u5u6u7u8u9u", "best": "", "window": [544, 245, 192, 250]}, "twiddle_start",
     (480, 200), "5u 7l 2r/8u 1d 3r/4r 6u 9u"),
]
IDS = [case[0].TASK.id for case in CASES]


@pytest.mark.parametrize(("module", "truth", "frame", "at", "board"), CASES, ids=IDS)
def test_the_oracle_solves_the_board_it_reads_off_the_window(module: ModuleType, truth: dict[str, Any], frame: str,
                                                             at: tuple[int, int], board: str) -> None:
    seen = module.TASK.oracle_truth(truth)
    assert "desc" not in seen
    ctx = OracleContext({}, seen, (1280, 720), {"screen": screen_with(frame, at), "terminal": ""}, {})
    steps = module.oracle(ctx)
    step = next(steps)
    x, _y, w, _h = truth["window"]
    assert step["kind"] == "move" and step["x"] > x + w  # the pointer off the window first
    while step["kind"] != "shell":
        step = next(steps)
    assert board in step["command"]


@pytest.mark.parametrize(("module", "truth", "frame", "at", "board"), CASES, ids=IDS)
def test_the_oracle_gives_up_with_a_fail_when_no_board_shows(module: ModuleType, truth: dict[str, Any], frame: str,
                                                             at: tuple[int, int], board: str) -> None:
    ctx = OracleContext({}, module.TASK.oracle_truth(truth), (1280, 720), {"screen": blank_screen(), "terminal": ""},
                        {})
    *_, last = module.oracle(ctx)
    assert last["kind"] == "fail" and "no whole board" in last["reason"]
