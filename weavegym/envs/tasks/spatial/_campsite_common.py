"""Where Weave-Spatial-7's Campsite Office and Tents windows are and what they draw (no TASK): shared by the task's
setup, its checker and its oracle (``_campsite_oracle.py``). The layout is no secret; the fields are (``withheld``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from weavegym.envs.setup_context import HOME, PRIVATE_DIR
from weavegym.envs.tasks import pixel_font

COUNT = 3
SIZES = (6, 7, 8)  # one field of each size, in a seeded order
TENTS = "/usr/games/sgt-tents"
CAMPSITE, OFFICE = f"{HOME}/campsite", f"{HOME}/office"
SHEET = f"{OFFICE}/allocations.txt"
APP_DIR = "/usr/local/share/campsite"
APP = f"{APP_DIR}/campsite_office.py"
CONF, RECORD = f"{PRIVATE_DIR}/campsite.json", f"{PRIVATE_DIR}/campsite-record.jsonl"
TITLE, HEADING = "Campsite Office", "CAMPSITE OFFICE"
SCALE, HEADING_AT, PAD, LINE_STEP = 2, (16, 12), 8, 22
OFFICE_AT, OFFICE_SIZE = (700, 0), (560, 590)
SHOW = (16, 44, 170, 34)  # the 'Show field' button
PLAN, STATUS = (16, 90, 528, 262), (16, 364, 528, 32)
ENTRY, ALLOCATE = (16, 408, 392, 34), (416, 408, 128, 34)
RESULTS = (16, 456, 528, 82)
TENTS_AT = (30, 150)  # where setup moves the Tents window: clear of the office
PERMIT_LINE = re.compile(r"^\s*(\d+)\s*\|\s*([A-Z0-9]{6})\s*\|\s*([A-Za-z0-9 ,]*?)\s*$", re.I)
TREE, OPEN = "T", "."


def save_path(number: int) -> str:
    return f"{CAMPSITE}/field-{number}.sav"


def layout() -> dict[str, Any]:
    """Where the office draws everything; boxes are [x, y, width, height] in the window."""
    return {"title": TITLE, "heading": HEADING, "heading_at": list(HEADING_AT), "scale": SCALE, "pad": PAD,
            "line_step": LINE_STEP, "size": list(OFFICE_SIZE), "at": list(OFFICE_AT), "show": list(SHOW),
            "plan": list(PLAN), "status": list(STATUS), "entry": list(ENTRY), "allocate": list(ALLOCATE),
            "results": list(RESULTS)}


def plan_lines(number: int, field: dict[str, Any]) -> list[str]:
    """The plan as the office draws it: a title, the column letters, one line per row (its squares, 'T' a tree,
    '.' open ground, then the row's tent count) and the columns' tent counts."""
    from weavegym.envs.tasks.spatial.tents import LETTERS, decode

    w, h, trees, cols, rows = decode(field["id"])
    lines = [f"FIELD {number}  {w} BY {h}", "  " + " ".join(LETTERS[:w])]
    for y in range(h):
        squares = " ".join(TREE if (x, y) in trees else OPEN for x in range(w))
        lines.append(f"{y + 1} {squares}  {rows[y]}")
    lines.append("  " + " ".join(str(n) for n in cols))
    return lines


def origin(image: np.ndarray, reach: int = 40) -> tuple[int, int] | None:
    """The office's top-left, found where its heading reads back near where it was put; None until drawn."""
    return pixel_font.find_drawn(image, HEADING, OFFICE_AT, HEADING_AT, SCALE, reach=reach)


def find_board(image: np.ndarray, size: int | None = None) -> tuple[int, int, int] | None:
    """(left, top, cell) of the Tents board right of and below TENTS_AT: its top grid line is the highest row with
    a long run of black pixels that starts right of window grey; the cell is the step between its first vertical
    lines. With ``size``, None unless the board is ``size`` cells wide. None while no board shows there."""
    crop = image[TENTS_AT[1]:, TENTS_AT[0]:OFFICE_AT[0], :3].astype(int)
    black = crop.max(axis=2) < 60
    grey = crop.min(axis=2) > 180
    for y in range(1, crop.shape[0] - 8):
        xs = np.flatnonzero(black[y])
        if len(xs) < 150:
            continue
        # runs of black in this row
        breaks = np.flatnonzero(np.diff(xs) > 1)
        starts = np.concatenate(([xs[0]], xs[breaks + 1]))
        ends = np.concatenate((xs[breaks], [xs[-1]]))
        for start, end in zip(starts, ends, strict=True):
            if end - start < 150 or start < 1 or not grey[y, start - 1] or not grey[y - 1, start + 4]:
                continue
            verticals = np.flatnonzero(black[y + 4, start:end + 1])
            steps = np.diff(verticals)
            steps = steps[steps > 1]
            if not len(steps):
                continue
            cell = int(steps[0])
            if not 16 <= cell <= 64:
                continue
            width = round((end - start) / cell)
            if size is not None and width != size:
                return None
            return int(start) + TENTS_AT[0], int(y) + TENTS_AT[1], cell
    return None
