"""Where things are in a GTKWave 3.3 window, found in a screenshot (no TASK here): Weave-DevOps-6's oracle's eyes.

GTKWave's layout moves with its content (a second tab adds a tab bar, added traces widen the names pane) and with
the desktop's theme, so the oracle does not click at fixed offsets: it finds the black wave area, the scope's
icon in the SST tree (the only coloured thing in the left pane below the toolbar), the first row of the signal
list (black text under the grey header), and the clk trace's edges (vertical green strokes in the first trace
row), and maps a time to a pixel column from those edges. Each finder returns None when the screen does not (yet)
show what it looks for, so the oracle can wait for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Box = tuple[int, int, int, int]  # x0, y0, x1, y1 (exclusive)


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of True in a 1-D array."""
    padded = np.concatenate([[False], flags.astype(bool), [False]])
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def wave_area(image: np.ndarray) -> Box | None:
    """The wave area: the largest black rectangle (at least 300x120 px; its blue grid and green traces count) framed
    by light pixels left and right (the desktop around a window may be black too)."""
    height, width = image.shape[:2]
    rgb = image[..., :3].astype(int)
    light = rgb.min(axis=2)
    dark = ((rgb[..., 0] < 70) & (rgb[..., 1] < 70)) | ((rgb[..., 1] > 120) & (rgb[..., 0] < 130) & (rgb[..., 2] < 130))
    best = None
    for y0, y1 in _runs(dark.mean(axis=1) >= 300 / width):
        for x0, x1 in _runs(dark[y0:y1].mean(axis=0) > 0.7):
            for top, bottom in _runs(dark[y0:y1, x0:x1].mean(axis=1) > 0.7):
                mid = y0 + (top + bottom) // 2
                framed = (x0 >= 4 and x1 + 4 <= width and light[mid, x0 - 4:x0].max() > 120
                          and light[mid, x1:x1 + 4].max() > 120)
                if bottom - top >= 120 and x1 - x0 >= 300 and framed and y0 + bottom < height and (
                        best is None or (x1 - x0) * (bottom - top) > (best[2] - best[0]) * (best[3] - best[1])):
                    best = (x0, y0 + top, x1, y0 + bottom)
    return best


def scope_icon(image: np.ndarray, wave: Box) -> tuple[int, int] | None:
    """The centre of the SST tree's first scope icon (left of the names pane, in the wave area's first rows)."""
    x0, x1 = max(0, wave[0] - 460), max(0, wave[0] - 150)
    y0, y1 = wave[1] - 4, wave[1] + 45
    region = image[y0:y1, x0:x1, :3].astype(int)
    coloured = (region.max(axis=2) - region.min(axis=2)) > 60
    ys, xs = np.nonzero(coloured)
    if len(xs) < 12:
        return None
    left = xs.min()  # the icon, not a blue selection bar that spans the pane
    keep = xs < left + 30
    return int(x0 + xs[keep].mean()), int(y0 + ys[keep].mean())


def first_signal_row(image: np.ndarray, icon: tuple[int, int]) -> tuple[int, int] | None:
    """A point on the signal list's first row (black text below the grey "Type Signals" header)."""
    x0, x1 = max(0, icon[0] - 30), icon[0] + 160
    y0, y1 = icon[1] + 50, icon[1] + 220
    region = image[y0:y1, x0:x1, :3].max(axis=2)
    rows = (region < 70).sum(axis=1) >= 3
    runs = [r for r in _runs(rows) if r[1] - r[0] >= 5]
    if not runs:
        return None
    top, bottom = runs[0]
    return icon[0] + 40, y0 + (top + bottom) // 2


def append_button(image: np.ndarray, wave: Box, icon: tuple[int, int]) -> tuple[int, int]:
    """The Append button: the leftmost of the three under the signal list, level with the wave area's bottom."""
    return icon[0] + 12, wave[3] - 5


def clock_edges(image: np.ndarray, wave: Box) -> list[int] | None:
    """The pixel columns of clk's edges (the first trace), left to right; None before the traces are drawn."""
    x0, y0, x1, y1 = wave
    region = image[y0:y1, x0:x1, :3].astype(int)
    green = (region[..., 1] > 150) & (region[..., 0] < 120) & (region[..., 2] < 120)
    rows = np.flatnonzero(green.sum(axis=1) >= 20)
    if len(rows) == 0:
        return None
    top = int(rows[0])  # clk's high level
    band = green[top + 2: top + 12]
    if band.shape[0] < 10:
        return None
    columns = band.sum(axis=0) >= 9
    # A stroke at the area's left or right border is where the drawing starts or stops, not an edge.
    edges = [x0 + (a + b - 1) // 2 for a, b in _runs(columns) if a > 2 and b < x1 - x0 - 2]
    return edges if len(edges) >= 8 else None


def time_to_x(edges: Sequence[int], first_edge: float, half_period: float) -> tuple[float, float]:
    """(a, b) with x = a + b * t, fitted to the edges at first_edge, first_edge + half_period, ..."""
    times = first_edge + half_period * np.arange(len(edges))
    b, a = np.polyfit(times, np.asarray(edges, dtype=float), 1)
    return float(a), float(b)
