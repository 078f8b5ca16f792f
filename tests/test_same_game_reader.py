"""Weave-Games-3's oracle reads the Same Game board off the window, as an agent must: on a frame recorded in the
VM (base image, openbox, sgt-samegame) with the pointer lying on the board, the truth's board withheld from it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from weavegym.envs.task import OracleContext
from weavegym.envs.tasks.games import same_game as sg

FRAME = Path(__file__).parent / "data" / "samegame_under_pointer.png"  # the screen's (400, 180)-(880, 560)
WINDOW = [465, 244, 350, 249]  # the window's geometry in that run (its client area)
BOARD = "2313133311/2313123231/1122321122/3213213231/3213213131"  # seed 0's board, as its truth had it


def _screen() -> np.ndarray:
    screen = np.full((720, 1280, 3), (43, 58, 74), np.uint8)
    screen[180:560, 400:880] = np.asarray(Image.open(FRAME).convert("RGB"))
    return screen


def test_the_board_reads_off_the_window_with_the_pointer_on_it() -> None:
    text, xs, ys = sg.read_board(_screen(), WINDOW)  # type: ignore[misc]
    assert text == BOARD and len(xs) == sg.W and len(ys) == sg.H
    assert sg.read_board(np.full((720, 1280, 3), (43, 58, 74), np.uint8), WINDOW) is None


def test_the_oracle_plans_the_board_it_reads_not_the_truths() -> None:
    truth = sg.TASK.oracle_truth({"desc": ",".join("1" * 50), "window": WINDOW})
    assert "desc" not in truth
    ctx = OracleContext({}, truth, (1280, 720), {"screen": _screen(), "terminal": ""}, {})
    steps = sg.oracle(ctx)
    assert next(steps)["kind"] == "move"
    step = next(steps)
    while step["kind"] != "shell":
        step = next(steps)
    assert BOARD in step["command"]


def test_the_oracle_gives_up_clearly_when_no_board_shows() -> None:
    blank = np.full((720, 1280, 3), (43, 58, 74), np.uint8)
    ctx = OracleContext({}, sg.TASK.oracle_truth({"desc": "", "window": WINDOW}), (1280, 720),
                        {"screen": blank, "terminal": ""}, {})
    *_, last = sg.oracle(ctx)
    assert last["kind"] == "fail" and "no whole board" in last["reason"]
