"""Where Weave-Games-6's Proof Desk and Pattern windows are and what they draw (no TASK): shared by the task's
setup, its checker and its oracle (``_proof_oracle.py``). The layout is no secret; the clues are (``withheld``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from weavegym.envs.setup_context import HOME, PRIVATE_DIR
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.games.nonogram import SIZE

COUNT = 3
KINDS = ("sound", "ambiguous", "broken")
PATTERN = "/usr/games/sgt-pattern"
PROOFS, ISSUE = f"{HOME}/proofs", f"{HOME}/issue"
PRINT_LIST = f"{ISSUE}/print_list.txt"
APP_DIR = "/usr/local/share/proofdesk"
APP = f"{APP_DIR}/proof_desk.py"
CONF, RECORD = f"{PRIVATE_DIR}/proofdesk.json", f"{PRIVATE_DIR}/proofdesk-record.jsonl"
TITLE, HEADING = "Proof Desk", "PUZZLE PROOF DESK"
SCALE, HEADING_AT, PAD, LINE_STEP, GAP = 2, (16, 12), 8, 22, 8
DESK_AT, DESK_SIZE = (820, 0), (450, 500)
OPEN, VERDICT = (16, 44, 130, 34), (16, 310, 130, 34)
CLUES, STATUS, RESULTS = (16, 90, 418, 210), (16, 356, 418, 32), (16, 400, 418, 82)
PATTERN_AT = (300, 280)  # where setup moves the Pattern window: clear of the desk and of its dialogs
SLOT_LINE = re.compile(r"^\s*(\d+)\s*\|\s*([A-Z0-9]{6})\s*\|\s*([#./]+)\s*$", re.I)


def proof_path(number: int) -> str:
    return f"{PROOFS}/puzzle{number}.sav"


def layout() -> dict[str, Any]:
    """Where the desk draws everything; boxes are [x, y, width, height] in the window."""
    return {"title": TITLE, "heading": HEADING, "heading_at": list(HEADING_AT), "scale": SCALE, "pad": PAD,
            "line_step": LINE_STEP, "gap": GAP, "size": list(DESK_SIZE), "at": list(DESK_AT), "open": list(OPEN),
            "verdict": list(VERDICT), "verdicts": list(KINDS), "clues": list(CLUES), "status": list(STATUS),
            "results": list(RESULTS)}


def origin(image: np.ndarray, reach: int = 40) -> tuple[int, int] | None:
    """The desk's top-left, found where its heading reads back near where it was put; None until drawn."""
    return pixel_font.find_drawn(image, HEADING, DESK_AT, HEADING_AT, SCALE, reach=reach)


def find_grid(image: np.ndarray) -> tuple[float, float, float, float] | None:
    """(left, top, cell width, cell height) of Pattern's blank board right of and below PATTERN_AT: the span of
    its mid-grey unknown cells; None until a whole blank board shows there."""
    crop = image[PATTERN_AT[1]:, PATTERN_AT[0]:DESK_AT[0]].astype(int)
    grey = np.abs(crop[..., :3] - 128).max(axis=2) <= 4
    xs, ys = np.flatnonzero(grey.sum(axis=0) >= 60), np.flatnonzero(grey.sum(axis=1) >= 60)
    if len(xs) < SIZE * 10 or len(ys) < SIZE * 10:
        return None
    width, height = (xs[-1] - xs[0] + 2) / SIZE, (ys[-1] - ys[0] + 2) / SIZE
    if not (12 <= width <= 60 and abs(width - height) <= 2):
        return None
    return float(xs[0] - 1 + PATTERN_AT[0]), float(ys[0] - 1 + PATTERN_AT[1]), float(width), float(height)
