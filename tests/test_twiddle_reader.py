"""Weave-Spatial-3's oracle reads the Twiddle board off the window, as an agent must (each tile's number against
digit masks, its arrow from where its triangle leans): on frames recorded in the VM (base image, openbox,
sgt-twiddle), with the truth's board withheld from it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from weavegym.envs.task import OracleContext
from weavegym.envs.tasks.spatial import twiddle_turns as tt

DATA = Path(__file__).parent / "data"
WINDOW = [544, 245, 192, 250]  # the window's client area in that run
START = "5u 7l 2r/8u 1d 3r/4r 6u 9u"  # seed 0's board, as its truth had it


def _screen(name: str) -> np.ndarray:
    """A screen with a recorded part, the screen's (480, 200)-(800, 520), pasted back where it was."""
    screen = np.full((720, 1280, 3), (43, 58, 74), np.uint8)
    screen[200:520, 480:800] = np.asarray(Image.open(DATA / f"{name}.png").convert("RGB"))
    return screen


@pytest.mark.parametrize(("name", "board"), [
    ("twiddle_start", START),
    ("twiddle_three_turns", "7d 1r 2r/6d 4l 3r/8r 5r 9u"),  # after a, c, c: tiles moved and arrows turned
])
def test_the_board_reads_off_the_window(name: str, board: str) -> None:
    assert tt.read_board(_screen(name), WINDOW) == board
    assert tt.parse_desc(board.replace(" ", "").replace("/", ""))  # in the solver's own notation


def test_one_hidden_number_is_the_one_not_seen_elsewhere_two_are_nothing() -> None:
    assert tt.read_board(_screen("twiddle_under_pointer"), WINDOW) == START  # the pointer on the 6
    screen = _screen("twiddle_start")
    screen[303:323, 633:647] = 0  # a black blot over the top middle tile's number
    assert tt.read_board(screen, WINDOW) == START
    screen[303:323, 681:695] = 0  # and over the top right one's
    assert tt.read_board(screen, WINDOW) is None
    assert tt.read_board(np.full((720, 1280, 3), (43, 58, 74), np.uint8), WINDOW) is None


def test_the_oracle_turns_the_board_it_reads_not_the_truths() -> None:
    truth = tt.TASK.oracle_truth({"desc": "1u2u3u4u5u6u7u8u9u", "best": "", "window": WINDOW})
    assert "desc" not in truth
    ctx = OracleContext({}, truth, (1280, 720), {"screen": _screen("twiddle_start"), "terminal": ""}, {})
    steps = tt.oracle(ctx)
    assert next(steps)["kind"] == "move"
    step = next(steps)
    while step["kind"] != "shell":
        step = next(steps)
    assert START in step["command"]


def test_the_oracle_gives_up_clearly_when_no_board_shows() -> None:
    blank = np.full((720, 1280, 3), (43, 58, 74), np.uint8)
    ctx = OracleContext({}, tt.TASK.oracle_truth({"desc": "", "best": "", "window": WINDOW}), (1280, 720),
                        {"screen": blank, "terminal": ""}, {})
    *_, last = tt.oracle(ctx)
    assert last["kind"] == "fail" and "no whole board" in last["reason"]
