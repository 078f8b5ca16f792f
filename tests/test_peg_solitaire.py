"""The Pegs reader (peg_solitaire.read_board, Weave-Games-1's and Weave-Games-5's) on frames recorded in the VM
(base image, openbox, sgt-pegs): wherever the window is, with the pointer on a peg; nothing where no board is."""

from __future__ import annotations

import pytest
from puzzle_frames import screen_with

from weavegym.envs.tasks.games import peg_solitaire as ps


@pytest.mark.parametrize(("name", "region", "expected"), [
    ("pegs_round1_start", (0, 0, 800, 720), "PPPPO/PPPPP/PHPPO/PPPPO/OOPOO"),
    ("pegs_round2_one_jump", (0, 40, 300, 300), "POOOO/POHOO/PPHPP/OPPPP/OOPPO"),
    ("pegs_round2_before_move", (250, 200, 300, 300), "POOOO/POPOO/PPPPP/OPHPP/OOPPO"),  # wherever it is
    ("pegs_round2_before_move", (0, 0, 250, 200), None),  # nothing in the region
    ("pegs_under_pointer", (501, 216, 277, 302), "PPPPO/PPPPP/PHPPO/PPPPO/OOPOO"),  # the pointer on a peg
])
def test_a_board_reads_wherever_its_window_is(name: str, region: tuple[int, int, int, int],
                                              expected: str | None) -> None:
    board = ps.read_board(screen_with(name), region)
    assert (ps.board_text(board[0]) if board else None) == expected
