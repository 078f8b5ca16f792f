"""Weave-Spatial-1's oracle reads the Cube board off the window, as an agent must: on frames recorded in the VM
(base image, openbox, sgt-cube), with the truth's board withheld from it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from weavegym.envs.task import OracleContext
from weavegym.envs.tasks.spatial import cube_roll as cr

DATA = Path(__file__).parent / "data"
WINDOW = [520, 217, 240, 305]  # the window's client area in that run
START = "B.../.B.B/BB../..CB"  # seed 0's board, as its truth had it


def _screen(name: str) -> np.ndarray:
    """A screen with a recorded part, the screen's (480, 180)-(800, 540), pasted back where it was."""
    screen = np.full((720, 1280, 3), (43, 58, 74), np.uint8)
    screen[180:540, 480:800] = np.asarray(Image.open(DATA / f"{name}.png").convert("RGB"))
    return screen


@pytest.mark.parametrize(("name", "board"), [
    ("cube_under_pointer", START),  # the pointer lies on the cube
    ("cube_top_row_blue_side", "B.C./.B../BB../...."),  # the cube hides the top grid line, a blue face shows
    ("cube_top_left_corner", "C.../.B../BB../...."),  # and the left one
])
def test_the_board_reads_off_the_window(name: str, board: str) -> None:
    assert cr.read_board(_screen(name), WINDOW) == board


def test_nothing_reads_where_no_board_shows() -> None:
    assert cr.read_board(np.full((720, 1280, 3), (43, 58, 74), np.uint8), WINDOW) is None
    assert cr.read_board(_screen("cube_under_pointer"), [0, 0, 400, 200]) is None


def test_the_oracle_routes_the_board_it_reads_not_the_truths() -> None:
    truth = cr.TASK.oracle_truth({"desc": "0000,0", "best": "", "window": WINDOW})
    assert "desc" not in truth
    ctx = OracleContext({}, truth, (1280, 720), {"screen": _screen("cube_under_pointer"), "terminal": ""}, {})
    steps = cr.oracle(ctx)
    assert next(steps)["kind"] == "move"
    step = next(steps)
    while step["kind"] != "shell":
        step = next(steps)
    assert START in step["command"]


def test_the_oracle_gives_up_clearly_when_no_board_shows() -> None:
    blank = np.full((720, 1280, 3), (43, 58, 74), np.uint8)
    ctx = OracleContext({}, cr.TASK.oracle_truth({"desc": "0000,0", "best": "", "window": WINDOW}), (1280, 720),
                        {"screen": blank, "terminal": ""}, {})
    *_, last = cr.oracle(ctx)
    assert last["kind"] == "fail" and "no whole board" in last["reason"]
