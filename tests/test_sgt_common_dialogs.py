"""The oracles' small-dialog test (Game > Specific... in Pattern and Tents) on drawn frames.

Typing a game id while the Game menu still shows, or while the dialog is half drawn, loses it: the test must
tell a wide settled dialog from a tall menu and from a region still changing.
"""

from __future__ import annotations

import numpy as np

from weavegym.envs.task import OracleContext
from weavegym.envs.tasks.games.sgt_common import SMALL_DIALOG, small_dialog_shown, wait_small_dialog

SCREEN = (480, 640, 3)


def _with_box(width: int, height: int, colour: int = 200) -> np.ndarray:
    frame = np.zeros(SCREEN, np.uint8)
    frame[100:100 + height, 120:120 + width] = colour
    return frame


def test_a_wide_settled_dialog_shows_and_a_tall_menu_does_not() -> None:
    before = np.zeros(SCREEN, np.uint8)
    dialog = _with_box(240, 104)
    assert small_dialog_shown(dialog, before, dialog.copy())
    menu = _with_box(120, 240)  # the open Game menu: narrow and tall
    assert not small_dialog_shown(menu, before, menu.copy())
    tiny = _with_box(SMALL_DIALOG[0] - 16, SMALL_DIALOG[1] - 16)
    assert not small_dialog_shown(tiny, before, tiny.copy())


def test_a_dialog_still_drawing_or_without_a_previous_poll_is_not_shown_yet() -> None:
    before = np.zeros(SCREEN, np.uint8)
    dialog = _with_box(240, 104)
    half_drawn = _with_box(240, 104, colour=90)
    assert not small_dialog_shown(dialog, before, half_drawn)
    assert not small_dialog_shown(dialog, before, None)
    assert not small_dialog_shown(before.copy(), before, before.copy())  # nothing changed at all


def test_waiting_yields_one_second_waits_until_the_dialog_settles() -> None:
    before = np.zeros(SCREEN, np.uint8)
    frames = [before, _with_box(240, 104, colour=90), _with_box(240, 104), _with_box(240, 104)]
    ctx = OracleContext({}, {}, (640, 480), obs={"screen": frames[0]})
    waits = wait_small_dialog(ctx, before, tries=10)
    steps = 0
    try:
        while True:
            assert next(waits) == {"kind": "wait", "seconds": 1}
            steps += 1
            ctx.obs = {"screen": frames[min(steps, len(frames) - 1)]}
    except StopIteration as done:
        assert done.value is True
    assert steps == 3  # blank, half drawn, drawn once: settled at the second drawn poll


def test_waiting_gives_up_after_its_tries() -> None:
    before = np.zeros(SCREEN, np.uint8)
    ctx = OracleContext({}, {}, (640, 480), obs={"screen": before})
    waits = wait_small_dialog(ctx, before, tries=4)
    count = 0
    try:
        while True:
            next(waits)
            count += 1
    except StopIteration as done:
        assert done.value is False
    assert count == 4
