"""Where Weave-Spatial-8's Harbour Office and Bridges windows are and what they draw (no TASK): shared by the task's
setup, its checker and its oracle (``_harbour_oracle.py``). The layout is no secret; the charts are (``withheld``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from weavegym.envs.setup_context import HOME, PRIVATE_DIR
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.spatial.bridges import LETTERS, Square, decode

COUNT = 3
SIZES = ((7, 10), (8, 13), (9, 16))  # (side, islands): one chart of each, in a seeded order
BRIDGES = "/usr/games/sgt-bridges"
TILE = 40  # BRIDGES_TILESIZE: a square of the board is 40 px, an island's ring 48 px across
FERRIES, HARBOUR, REGISTER_DIR = f"{HOME}/ferries", f"{HOME}/harbour", f"{HOME}/register"
REGISTER = f"{REGISTER_DIR}/ferries.db"
NETWORK = f"{HARBOUR}/network.txt"
APP_DIR = "/usr/local/share/harbour"
APP = f"{APP_DIR}/harbour_office.py"
CONF, RECORD = f"{PRIVATE_DIR}/harbour.json", f"{PRIVATE_DIR}/harbour-record.jsonl"
TITLE, HEADING = "Harbour Office", "HARBOUR OFFICE"
SCALE, HEADING_AT, PAD, LINE_STEP = 2, (16, 12), 8, 22
OFFICE_AT, OFFICE_SIZE = (700, 0), (560, 600)
SHOW = (16, 44, 170, 34)  # the 'Show chart' button
CHART, STATUS = (16, 90, 528, 262), (16, 364, 528, 32)
ENTRY, CONFIRM = (16, 408, 392, 34), (416, 408, 128, 34)
RESULTS = (16, 456, 528, 82)
BRIDGES_AT = (20, 100)  # where setup moves the Bridges window: clear of the office
WATER = "."
# One line of the network plan: 'N | LICENCE | COST | Name-Name 2, Name-Name 1'.
PLAN_LINE = re.compile(r"^\s*(\d+)\s*\|\s*([A-Z0-9]{6})\s*\|\s*(\d+)\s*\|\s*(.*?)\s*$", re.I)
LINK_ITEM = re.compile(r"^\s*([A-Za-z]+)\s*-\s*([A-Za-z]+)\s+x?([12])\s*$", re.I)
NAMES = ("Arran", "Barra", "Bute", "Canna", "Coll", "Colonsay", "Eigg", "Eriskay", "Fetlar", "Foula", "Gigha",
         "Harris", "Hoy", "Iona", "Islay", "Jura", "Kerrera", "Lewis", "Lismore", "Luing", "Lunga", "Muck", "Mull",
         "Raasay", "Rousay", "Rum", "Sanda", "Sanday", "Scalpay", "Shapinsay", "Skye", "Soay", "Staffa", "Stroma",
         "Taransay", "Tiree", "Ulva", "Unst", "Vatersay", "Westray", "Whalsay", "Yell")


def save_path(number: int) -> str:
    return f"{FERRIES}/chart-{number}.sav"


def layout() -> dict[str, Any]:
    """Where the office draws everything; boxes are [x, y, width, height] in the window."""
    return {"title": TITLE, "heading": HEADING, "heading_at": list(HEADING_AT), "scale": SCALE, "pad": PAD,
            "line_step": LINE_STEP, "size": list(OFFICE_SIZE), "at": list(OFFICE_AT), "show": list(SHOW),
            "chart": list(CHART), "status": list(STATUS), "entry": list(ENTRY), "confirm": list(CONFIRM),
            "results": list(RESULTS)}


def chart_lines(number: int, chart: Mapping[str, Any]) -> list[str]:
    """The chart as the office draws it: a title, the column letters, then one line per row: its number and its
    squares ('.' open water, a digit an island and how many bridges it takes)."""
    w, h, islands = decode(chart["id"])
    lines = [f"CHART {number}  {w} BY {h}", "  " + " ".join(LETTERS[:w])]
    for y in range(h):
        lines.append(f"{y + 1} " + " ".join(str(islands.get((x, y), WATER)) for x in range(w)))
    return lines


def origin(image: np.ndarray, reach: int = 40) -> tuple[int, int] | None:
    """The office's top-left, found where its heading reads back near where it was put; None until drawn."""
    return pixel_font.find_drawn(image, HEADING, OFFICE_AT, HEADING_AT, SCALE, reach=reach)


RING, INSIDE = 22, 15  # px from an island's centre: its black ring; the grey between ring and number


def ring_centres(image: np.ndarray) -> list[tuple[int, int]]:
    """Screen points of Bridges' island rings left of the office and below BRIDGES_AT: black 22 px left, right,
    above and below, grey 15 px left and right (between the ring and the number). One point per ring."""
    crop = image[BRIDGES_AT[1]:, BRIDGES_AT[0]:OFFICE_AT[0], :3].astype(int)
    black, grey = crop.max(axis=2) < 60, crop.min(axis=2) > 150
    hgt, wid = black.shape
    if hgt <= 2 * RING or wid <= 2 * RING:
        return []

    def at(mask: np.ndarray, dx: int, dy: int) -> np.ndarray:
        return mask[RING + dy:hgt - RING + dy, RING + dx:wid - RING + dx]

    hit = (at(black, -RING, 0) & at(black, RING, 0) & at(black, 0, -RING) & at(black, 0, RING)
           & at(grey, -INSIDE, 0) & at(grey, INSIDE, 0))
    ys, xs = np.nonzero(hit)
    points: list[list[int]] = []  # [sum x, sum y, n]
    for x, y in zip(xs.tolist(), ys.tolist(), strict=True):
        for p in points:
            if abs(p[0] / p[2] - x) <= 6 and abs(p[1] / p[2] - y) <= 6:
                p[0], p[1], p[2] = p[0] + x, p[1] + y, p[2] + 1
                break
        else:
            points.append([x, y, 1])
    return [(round(sx / n) + RING + BRIDGES_AT[0], round(sy / n) + RING + BRIDGES_AT[1]) for sx, sy, n in points]


def find_board(image: np.ndarray, islands: Mapping[Square, int] | list[Square]) -> tuple[int, int] | None:
    """The screen centre of square (0, 0) of the Bridges board showing exactly these islands (each square TILE px),
    or None while the board shows other islands or none. Ring-like points off the board's squares (the window's
    corners on a dark desktop) do not count; every ring on a square must be one of the islands."""
    rings = ring_centres(image)
    isles = sorted(islands, key=lambda c: (c[1], c[0]))
    if not isles:
        return None
    wide, high = max(x for x, _ in isles), max(y for _, y in isles)
    for first in rings:
        ox, oy = first[0] - isles[0][0] * TILE, first[1] - isles[0][1] * TILE
        on_squares = set()
        for px, py in rings:
            x, y = round((px - ox) / TILE), round((py - oy) / TILE)
            if 0 <= x <= wide and 0 <= y <= high and abs(px - ox - x * TILE) <= 4 and abs(py - oy - y * TILE) <= 4:
                on_squares.add((x, y))
        if on_squares == set(isles):
            return ox, oy
    return None
