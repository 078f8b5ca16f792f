"""Frames recorded in the VM (base image, openbox, sgt-puzzles) for the puzzle readers' tests: a part of the screen
pasted back where it was onto the desktop's colour."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

DATA = Path(__file__).parent / "data"
DESKTOP = (43, 58, 74)


def screen_with(name: str, at: tuple[int, int] = (0, 0)) -> np.ndarray:
    """A 1280x720 screen with tests/data/<name>.png pasted with its top-left at ``at`` (x, y)."""
    screen = np.full((720, 1280, 3), DESKTOP, np.uint8)
    part = np.asarray(Image.open(DATA / f"{name}.png").convert("RGB"))
    x, y = at
    screen[y:y + part.shape[0], x:x + part.shape[1]] = part
    return screen


def blank_screen() -> np.ndarray:
    return np.full((720, 1280, 3), DESKTOP, np.uint8)
