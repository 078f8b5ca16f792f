"""The Cube reader (Weave-Spatial-1's) on frames recorded in the VM (base image, openbox, sgt-cube)."""

from __future__ import annotations

import pytest
from puzzle_frames import blank_screen, screen_with

from weavegym.envs.tasks.spatial import cube_roll as cr

WINDOW = [520, 217, 240, 305]  # the window's client area in that run


@pytest.mark.parametrize(("name", "board"), [
    ("cube_under_pointer", "B.../.B.B/BB../..CB"),  # seed 0's start; the pointer lies on the cube
    ("cube_top_row_blue_side", "B.C./.B../BB../...."),  # the cube hides the top grid line, a blue face shows
    ("cube_top_left_corner", "C.../.B../BB../...."),  # and the left one
])
def test_the_board_reads_off_the_window(name: str, board: str) -> None:
    assert cr.read_board(screen_with(name, (480, 180)), WINDOW) == board


def test_nothing_reads_where_no_board_shows() -> None:
    assert cr.read_board(blank_screen(), WINDOW) is None
    assert cr.read_board(screen_with("cube_under_pointer", (480, 180)), [0, 0, 400, 200]) is None
