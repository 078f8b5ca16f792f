"""A dot-matrix font: how a task draws a fact that must exist only as pixels, and how its oracle reads it back.

Why a font of our own: a fact that only the screen shows (a statement line, a room's size, a round's
results) has to be *found* by the oracle in its own observation (``obs["screen"]``), never copied from
the truth, because the one-channel adversaries replay the oracle: an oracle that read the truth would
hand them the fact. Reading anti-aliased Tk text back needs OCR, which is neither exact nor available in
the guest's fonts; reading lit cells of a known grid is both. An agent (or a person) reads the dot
matrix like any printed label, and no text of it exists anywhere for the shell to find: not in a file,
not in a widget's text, not in the accessibility tree.

The module is standalone (standard library only) on purpose: setup uploads this very file next to a Tk
fixture, which imports it and draws with ``draw`` (or with ``layout_text``'s rectangles), so the glyphs
drawn in the guest and the glyphs the oracle decodes on the host are one table::

    ctx.write_file(f"{folder}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")

Geometry: each character is ``GLYPH_W`` x ``GLYPH_H`` cells of ``scale`` pixels, and advances by
``ADVANCE`` cells (one blank column). ``read_text`` samples each cell's centre, so it needs the text's
top-left corner in screen pixels (the layout, which is not secret, gives it) and an observation at the
screen's own size (the env's default).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

GLYPH_W, GLYPH_H = 5, 7
ADVANCE = GLYPH_W + 1
INK = (20, 20, 20)  # the default colours: the fixture draws with them, the reader classifies against them
PAPER = (255, 255, 255)
UNKNOWN = "?"  # what read_text returns for a cell pattern that is no glyph (a misplaced origin, a covered label)

# Rows top to bottom, "#" lit. Upper case, digits and the punctuation labels need; lower case is not drawn
# (a 5x7 grid cannot keep it apart from upper case well enough for an exact read).
_ROWS: dict[str, str] = {
    " ": ".....|.....|.....|.....|.....|.....|.....",
    "0": ".###.|#...#|#..##|#.#.#|##..#|#...#|.###.",
    "1": "..#..|.##..|..#..|..#..|..#..|..#..|.###.",
    "2": ".###.|#...#|....#|...#.|..#..|.#...|#####",
    "3": "####.|....#|....#|.###.|....#|....#|####.",
    "4": "...#.|..##.|.#.#.|#..#.|#####|...#.|...#.",
    "5": "#####|#....|####.|....#|....#|#...#|.###.",
    "6": "..##.|.#...|#....|####.|#...#|#...#|.###.",
    "7": "#####|....#|...#.|..#..|.#...|.#...|.#...",
    "8": ".###.|#...#|#...#|.###.|#...#|#...#|.###.",
    "9": ".###.|#...#|#...#|.####|....#|...#.|.##..",
    "A": ".###.|#...#|#...#|#####|#...#|#...#|#...#",
    "B": "####.|#...#|#...#|####.|#...#|#...#|####.",
    "C": ".###.|#...#|#....|#....|#....|#...#|.###.",
    "D": "###..|#..#.|#...#|#...#|#...#|#..#.|###..",
    "E": "#####|#....|#....|####.|#....|#....|#####",
    "F": "#####|#....|#....|####.|#....|#....|#....",
    "G": ".###.|#...#|#....|#.###|#...#|#...#|.####",
    "H": "#...#|#...#|#...#|#####|#...#|#...#|#...#",
    "I": ".###.|..#..|..#..|..#..|..#..|..#..|.###.",
    "J": "..###|...#.|...#.|...#.|...#.|#..#.|.##..",
    "K": "#...#|#..#.|#.#..|##...|#.#..|#..#.|#...#",
    "L": "#....|#....|#....|#....|#....|#....|#####",
    "M": "#...#|##.##|#.#.#|#.#.#|#...#|#...#|#...#",
    "N": "#...#|#...#|##..#|#.#.#|#..##|#...#|#...#",
    "O": ".###.|#...#|#...#|#...#|#...#|#...#|.###.",
    "P": "####.|#...#|#...#|####.|#....|#....|#....",
    "Q": ".###.|#...#|#...#|#...#|#.#.#|#..#.|.##.#",
    "R": "####.|#...#|#...#|####.|#.#..|#..#.|#...#",
    "S": ".####|#....|#....|.###.|....#|....#|####.",
    "T": "#####|..#..|..#..|..#..|..#..|..#..|..#..",
    "U": "#...#|#...#|#...#|#...#|#...#|#...#|.###.",
    "V": "#...#|#...#|#...#|#...#|#...#|.#.#.|..#..",
    "W": "#...#|#...#|#...#|#.#.#|#.#.#|#.#.#|.#.#.",
    "X": "#...#|#...#|.#.#.|..#..|.#.#.|#...#|#...#",
    "Y": "#...#|#...#|.#.#.|..#..|..#..|..#..|..#..",
    "Z": "#####|....#|...#.|..#..|.#...|#....|#####",
    ".": ".....|.....|.....|.....|.....|.##..|.##..",
    ",": ".....|.....|.....|.....|.##..|..#..|.#...",
    ":": ".....|.##..|.##..|.....|.##..|.##..|.....",
    ";": ".....|.##..|.##..|.....|.##..|..#..|.#...",
    "-": ".....|.....|.....|#####|.....|.....|.....",
    "+": ".....|..#..|..#..|#####|..#..|..#..|.....",
    "=": ".....|.....|#####|.....|#####|.....|.....",
    "/": "....#|....#|...#.|..#..|.#...|#....|#....",
    "%": "##...|##..#|...#.|..#..|.#...|#..##|...##",
    "#": ".#.#.|.#.#.|#####|.#.#.|#####|.#.#.|.#.#.",
    "(": "...#.|..#..|.#...|.#...|.#...|..#..|...#.",
    ")": ".#...|..#..|...#.|...#.|...#.|..#..|.#...",
    "'": "..#..|..#..|.#...|.....|.....|.....|.....",
    "*": ".....|..#..|#.#.#|.###.|#.#.#|..#..|.....",
    "<": "...#.|..#..|.#...|#....|.#...|..#..|...#.",
    ">": ".#...|..#..|...#.|....#|...#.|..#..|.#...",
    "!": "..#..|..#..|..#..|..#..|..#..|.....|..#..",
    "?": ".###.|#...#|....#|...#.|..#..|.....|..#..",
    "_": ".....|.....|.....|.....|.....|.....|#####",
    "&": ".##..|#..#.|#.#..|.#...|#.#.#|#..#.|.##.#",
    "@": ".###.|#...#|#.###|#.#.#|#.###|#....|.####",
    "$": "..#..|.####|#.#..|.###.|..#.#|####.|..#..",
}
GLYPHS: dict[str, tuple[str, ...]] = {char: tuple(rows.split("|")) for char, rows in _ROWS.items()}
_BY_PATTERN: dict[tuple[str, ...], str] = {rows: char for char, rows in GLYPHS.items()}

Box = tuple[int, int, int, int]  # x0, y0, x1, y1: a lit cell, x1/y1 exclusive


def unsupported(text: str) -> str:
    """The characters of ``text`` the font cannot draw ("" when it can draw all of them)."""
    return "".join(sorted({char for char in text if char not in GLYPHS}))


def text_size(text: str, scale: int) -> tuple[int, int]:
    """Width and height in pixels of ``text`` at ``scale`` (the trailing blank column excluded)."""
    return max(0, len(text) * ADVANCE - 1) * scale, GLYPH_H * scale


def layout_text(text: str, x: int, y: int, scale: int) -> list[Box]:
    """The lit cells of ``text`` with its top-left corner at (x, y): the rectangles a fixture fills."""
    missing = unsupported(text)
    if missing:
        raise ValueError(f"the dot-matrix font cannot draw {missing!r} (it has upper case, digits and "
                         f"{''.join(c for c in GLYPHS if not c.isalnum())!r})")
    if scale < 1:
        raise ValueError(f"scale must be at least 1 pixel per cell, not {scale}")
    boxes = []
    for index, char in enumerate(text):
        left = x + index * ADVANCE * scale
        for row, cells in enumerate(GLYPHS[char]):
            for column, cell in enumerate(cells):
                if cell == "#":
                    x0, y0 = left + column * scale, y + row * scale
                    boxes.append((x0, y0, x0 + scale, y0 + scale))
    return boxes


def draw(canvas: Any, text: str, x: int, y: int, scale: int, fill: str = "#141414") -> None:
    """Draw ``text`` on a Tk canvas (the fixture's side). Borderless rectangles fill exactly their cells."""
    for x0, y0, x1, y1 in layout_text(text, x, y, scale):
        # Tk's rectangle covers [x0, x1) with outline width 0: the same cells read_text samples.
        canvas.create_rectangle(x0, y0, x1, y1, fill=fill, width=0)


def _is_ink(pixel: Sequence[int], ink: Sequence[int], paper: Sequence[int]) -> bool:
    to_ink = sum((int(p) - int(i)) ** 2 for p, i in zip(pixel[:3], ink, strict=True))
    to_paper = sum((int(p) - int(q)) ** 2 for p, q in zip(pixel[:3], paper, strict=True))
    return to_ink < to_paper


def read_text(image: Any, x: int, y: int, scale: int, count: int, *, ink: Sequence[int] = INK,
              paper: Sequence[int] = PAPER) -> str:
    """Decode ``count`` characters drawn at (x, y) from a screenshot (an HxWx3 array), trailing blanks cut.

    A cell pattern that is no glyph reads as ``UNKNOWN``, and cells off the image read as paper, so a wrong
    origin shows up as "?" or blanks in the oracle's answer rather than as an exception mid-episode.
    """
    height, width = len(image), len(image[0]) if len(image) else 0
    half = scale // 2
    chars = []
    for index in range(count):
        left = x + index * ADVANCE * scale
        rows = []
        for row in range(GLYPH_H):
            py = y + row * scale + half
            cells = []
            for column in range(GLYPH_W):
                px = left + column * scale + half
                lit = 0 <= py < height and 0 <= px < width and _is_ink(image[py][px], ink, paper)
                cells.append("#" if lit else ".")
            rows.append("".join(cells))
        chars.append(_BY_PATTERN.get(tuple(rows), UNKNOWN))
    return "".join(chars).rstrip(" ")


def find_drawn(image: Any, text: str, near: Sequence[int], offset: Sequence[int], scale: int, *,
               reach: int = 40) -> tuple[int, int] | None:
    """The point (a window's or canvas's top-left) within ``reach`` px of ``near`` whose ``text`` reads back at
    ``offset`` from it, the nearest first; None while it is not drawn.

    Why a search: the window manager may place a window a few pixels off where it was asked to go, and the text's
    place inside the window is what the layout knows. Each candidate reads one character first, so a miss is cheap.
    """
    offsets = sorted(((dx, dy) for dx in range(-reach, reach + 1) for dy in range(-reach, reach + 1)),
                     key=lambda d: abs(d[0]) + abs(d[1]))
    for dx, dy in offsets:
        x, y = near[0] + dx, near[1] + dy  # may be off the screen's edge: only the text must be on it
        tx, ty = x + offset[0], y + offset[1]
        if read_text(image, tx, ty, scale, 1) == text[0] and read_text(image, tx, ty, scale, len(text)) == text:
            return x, y
    return None
