"""The dot-matrix font pixel-only facts are drawn with: exact round trips, and a real Tk window read back."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.pixel_font import ADVANCE, GLYPHS, INK, UNKNOWN, layout_text, read_text, text_size
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.xvfb import XvfbDisplay

EVERY_CHAR = "".join(GLYPHS)


def _render(text: str, x: int, y: int, scale: int, shape: tuple[int, int] = (120, 2000)) -> np.ndarray:
    image = np.full((*shape, 3), 255, dtype=np.uint8)
    for x0, y0, x1, y1 in layout_text(text, x, y, scale):
        image[y0:y1, x0:x1] = INK
    return image


def test_every_glyph_is_a_distinct_5x7_pattern() -> None:
    patterns = list(GLYPHS.values())
    assert all(len(rows) == 7 and all(len(row) == 5 and set(row) <= {"#", "."} for row in rows)
               for rows in patterns)
    assert len(set(patterns)) == len(patterns)


@pytest.mark.parametrize("placed", [(300, 40), (293, 49), (270, 40), (-6, 3)])
def test_find_drawn_finds_a_window_placed_off_where_it_was_asked_by_its_heading(placed: tuple[int, int]) -> None:
    offset, near = (12, 20), (300, 40) if placed[0] > 0 else (0, 0)
    image = _render("LEAGUE NIGHT", placed[0] + offset[0], placed[1] + offset[1], 3)
    found = pixel_font.find_drawn(image, "LEAGUE NIGHT", near, offset, 3, reach=30)
    assert found is not None and max(abs(found[0] - placed[0]), abs(found[1] - placed[1])) <= 1  # cell centres
    assert pixel_font.find_drawn(image, "LEAGUE NIGHTS", near, offset, 3, reach=30) is None  # not that text
    assert pixel_font.find_drawn(image, "LEAGUE NIGHT", (near[0] + 60, near[1]), offset, 3, reach=20) is None


@pytest.mark.parametrize("scale", [1, 2, 3, 4])
def test_every_character_reads_back_at_every_scale(scale: int) -> None:
    text = EVERY_CHAR.strip()
    image = _render(text, 7, 5, scale, shape=(8 * scale + 10, len(text) * ADVANCE * scale + 20))
    assert read_text(image, 7, 5, scale, len(text)) == text


def test_figures_as_a_task_draws_them_read_back_with_their_spaces() -> None:
    text = "B7 12.5X8.0 M  -1,204.50 EUR 31/12/2026 (75%)"
    image = _render(text, 40, 30, 3)
    assert read_text(image, 40, 30, 3, len(text) + 4) == text  # the blank cells past the end are cut


def test_a_wrong_origin_reads_as_unknown_not_as_other_text() -> None:
    image = _render("4096", 40, 30, 3)
    shifted = read_text(image, 40 + 3, 30, 3, 4)
    assert shifted != "4096" and UNKNOWN in shifted


def test_off_image_cells_read_as_paper() -> None:
    assert read_text(_render("A", 0, 0, 2, shape=(14, 10)), 40, 40, 2, 3) == ""


def test_light_ink_on_dark_paper_when_told_the_colours() -> None:
    image = 255 - _render("LED 42", 10, 10, 2)
    assert read_text(image, 10, 10, 2, 6, ink=(235, 235, 235), paper=(0, 0, 0)) == "LED 42"
    assert read_text(image, 10, 10, 2, 6) != "LED 42"


def test_text_size_and_refusals() -> None:
    assert text_size("AB", 3) == ((2 * ADVANCE - 1) * 3, 21)
    with pytest.raises(ValueError, match="cannot draw 'a'"):
        layout_text("abc".replace("bc", "BC"), 0, 0, 2)
    with pytest.raises(ValueError, match="scale"):
        layout_text("A", 0, 0, 0)
    assert set(pixel_font.unsupported("Zürich 5€")) == {"ü", "r", "i", "c", "h", "€"}


# -- a real Tk canvas on a real X server, screenshotted through the real guest agent -----------------------

_TK_PROGRAM = textwrap.dedent("""
    import sys, tkinter
    sys.path.insert(0, sys.argv[1])
    import pixel_font
    root = tkinter.Tk()
    root.title("pixel font test")
    root.geometry("+0+0")
    canvas = tkinter.Canvas(root, width=900, height=120, background="white", highlightthickness=0)
    canvas.pack()
    pixel_font.draw(canvas, sys.argv[2], 30, 20, 3)
    pixel_font.draw(canvas, sys.argv[3], 30, 70, 2)
    root.mainloop()
""")


def test_a_tk_canvas_drawing_reads_back_exactly_from_a_screenshot(xvfb: XvfbDisplay, client: GuestClient,
                                                                   tmp_path: Path) -> None:
    program = tmp_path / "draw.py"
    program.write_text(_TK_PROGRAM)
    first, second = "INV-4821 QTY 137", "-1,204.50 EUR 31/12/2026"
    proc = subprocess.Popen([sys.executable, str(program), str(Path(pixel_font.__file__).parent), first, second],
                            env={**os.environ, "DISPLAY": xvfb.display})
    try:
        window = wait_for(lambda: next((w for w in client.list_windows()[0] if w.title == "pixel font test"), None),
                          20, what="the Tk test window mapped")

        def both_read() -> bool:
            image = client.screenshot().image
            x, y = window.geometry[0], window.geometry[1]
            return (read_text(image, x + 30, y + 20, 3, len(first)) == first
                    and read_text(image, x + 30, y + 70, 2, len(second)) == second)

        wait_for(both_read, 20, what="the Tk canvas's dot-matrix text read back from the screen")
    finally:
        proc.kill()
        proc.wait()
