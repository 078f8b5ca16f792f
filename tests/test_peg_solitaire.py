"""Weave-Games-1's oracle reads the board off the Pegs window, as an agent must: on a frame recorded in the VM
(base image, openbox, sgt-pegs), with the truth's board withheld from it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from weavegym.envs.task import OracleContext
from weavegym.envs.tasks.games import peg_solitaire as ps

DATA = Path(__file__).parent / "data"
WINDOW = [41, 60, 197, 225]  # the Pegs window's client area in that frame (below the title bar)


def _screen(name: str) -> np.ndarray:
    screen = np.full((720, 1280, 3), (43, 58, 74), np.uint8)
    part = np.asarray(Image.open(DATA / f"{name}.png").convert("RGB"))
    screen[:part.shape[0], :part.shape[1]] = part
    return screen


def test_the_oracle_solves_the_board_it_reads_off_the_window() -> None:
    truth = ps.TASK.oracle_truth({"desc": "P" * 25, "pegs": 25, "window": WINDOW})
    assert "desc" not in truth
    ctx = OracleContext({}, truth, (1280, 720), {"screen": _screen("pegs_round1_start"), "terminal": ""}, {})
    steps = ps.oracle(ctx)
    step = next(steps)
    assert step["kind"] == "move" and step["x"] > WINDOW[0] + WINDOW[2]  # the pointer off the board first
    while step["kind"] != "shell":
        step = next(steps)
    assert "PPPPO/PPPPP/PHPPO/PPPPO/OOPOO" in step["command"]


def test_the_oracle_gives_up_clearly_when_no_board_shows() -> None:
    truth = ps.TASK.oracle_truth({"desc": "P" * 25, "pegs": 25, "window": [400, 300, 197, 225]})
    ctx = OracleContext({}, truth, (1280, 720), {"screen": _screen("pegs_round1_start"), "terminal": ""}, {})
    *_, last = ps.oracle(ctx)
    assert last["kind"] == "fail" and "no whole board" in last["reason"]


@pytest.mark.parametrize(("name", "region", "expected"), [
    ("pegs_round1_start", (0, 0, 800, 720), "PPPPO/PPPPP/PHPPO/PPPPO/OOPOO"),
    ("pegs_round2_one_jump", (0, 40, 300, 300), "POOOO/POHOO/PPHPP/OPPPP/OOPPO"),
    ("pegs_round2_before_move", (250, 200, 300, 300), "POOOO/POPOO/PPPPP/OPHPP/OOPPO"),  # wherever it is
    ("pegs_round2_before_move", (0, 0, 250, 200), None),  # nothing in the region
    ("pegs_under_pointer", (501, 216, 277, 302), "PPPPO/PPPPP/PHPPO/PPPPO/OOPOO"),  # the pointer on a peg
])
def test_a_board_reads_wherever_its_window_is(name: str, region: tuple[int, int, int, int],
                                              expected: str | None) -> None:
    board = ps.read_board(_screen(name), region)
    assert (ps.board_text(board[0]) if board else None) == expected
