"""The Same Game reader (Weave-Games-3's) on a frame recorded in the VM (base image, openbox, sgt-samegame) with
the pointer lying on the board."""

from __future__ import annotations

from puzzle_frames import blank_screen, screen_with

from weavegym.envs.tasks.games import same_game as sg

WINDOW = [465, 244, 350, 249]  # the window's geometry in that run (its client area)
BOARD = "2313133311/2313123231/1122321122/3213213231/3213213131"  # seed 0's board, as its truth had it


def test_the_board_reads_off_the_window_with_the_pointer_on_it() -> None:
    text, xs, ys = sg.read_board(screen_with("samegame_under_pointer", (400, 180)), WINDOW)  # type: ignore[misc]
    assert text == BOARD and len(xs) == sg.W and len(ys) == sg.H
    assert sg.read_board(blank_screen(), WINDOW) is None
