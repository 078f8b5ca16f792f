"""The Twiddle reader (Weave-Spatial-3's: each number against digit masks, each arrow from where its triangle
leans) on frames recorded in the VM (base image, openbox, sgt-twiddle)."""

from __future__ import annotations

import pytest
from puzzle_frames import blank_screen, screen_with

from weavegym.envs.tasks.spatial import twiddle_turns as tt

WINDOW = [544, 245, 192, 250]  # the window's client area in that run
START = "5u 7l 2r/8u 1d 3r/4r 6u 9u"  # seed 0's board, as its truth had it
AT = (480, 200)  # where the recorded part of the screen goes


@pytest.mark.parametrize(("name", "board"), [
    ("twiddle_start", START),
    ("twiddle_three_turns", "7d 1r 2r/6d 4l 3r/8r 5r 9u"),  # after a, c, c: tiles moved and arrows turned
])
def test_the_board_reads_off_the_window(name: str, board: str) -> None:
    assert tt.read_board(screen_with(name, AT), WINDOW) == board
    assert tt.parse_desc(board.replace(" ", "").replace("/", ""))  # in the solver's own notation


def test_one_hidden_number_is_the_one_not_seen_elsewhere_two_are_nothing() -> None:
    assert tt.read_board(screen_with("twiddle_under_pointer", AT), WINDOW) == START  # the pointer on the 6
    screen = screen_with("twiddle_start", AT)
    screen[303:323, 633:647] = 0  # a black blot over the top middle tile's number
    assert tt.read_board(screen, WINDOW) == START
    screen[303:323, 681:695] = 0  # and over the top right one's
    assert tt.read_board(screen, WINDOW) is None
    assert tt.read_board(blank_screen(), WINDOW) is None
