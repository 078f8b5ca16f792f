"""Frames for observations: grabbing them from the backend and waiting until the screen settles.

The libvirt backend reads QEMU's own display (HMP ``screendump``), which costs
about a tenth of an in-guest capture under TCG and is exactly what VNC shows;
other backends use the agent's screenshot. ``settle`` waits, with a deadline,
until two consecutive frames are identical, so an observation is not a frame
caught halfway through a redraw (see ``settle``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from weavegym.core.errors import BackendError


def read_ppm(data: bytes) -> np.ndarray:
    """Decode a binary (P6, maxval 255) PPM such as QEMU's screendump writes."""
    fields: list[bytes] = []
    pos = 0
    while len(fields) < 4:
        while pos < len(data) and data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":
            pos = data.index(b"\n", pos) + 1
            continue
        end = pos
        while end < len(data) and not data[end:end + 1].isspace():
            end += 1
        fields.append(data[pos:end])
        pos = end
    magic, width, height, maxval = fields[0], int(fields[1]), int(fields[2]), int(fields[3])
    if magic != b"P6" or maxval != 255:
        raise BackendError(f"unsupported screendump format {magic!r} maxval {maxval}")
    pixels = np.frombuffer(data, dtype=np.uint8, count=width * height * 3, offset=pos + 1)
    return pixels.reshape(height, width, 3)


def fit_frame(frame: np.ndarray, screen: tuple[int, int]) -> np.ndarray:
    """``frame`` at ``screen`` (width, height), scaled by nearest neighbour when the guest's mode differs.

    The last resort of an env whose guest changed its display mode and would not change it back: the
    observation's shape is part of the env's contract (vector envs stack frames), so it never changes.
    """
    width, height = screen
    if frame.shape[:2] == (height, width):
        return frame
    rows = np.arange(height) * frame.shape[0] // height
    cols = np.arange(width) * frame.shape[1] // width
    return np.ascontiguousarray(frame[rows][:, cols])


@dataclass(frozen=True)
class SettleResult:
    frame: np.ndarray
    settled: bool
    grabs: int
    seconds: float


def settle(grab: Callable[[], np.ndarray], timeout: float, stable_for: float = 0.1,
           poll: float = 0.02) -> SettleResult:
    """Grab until the frame has not changed for ``stable_for`` seconds, or ``timeout`` passes.

    "Two consecutive frames are equal" is not enough on its own: a host-side grab
    takes ~7 ms, so two grabs almost always match even while an app is still
    drawing. The screen must stay unchanged over a stretch of wall time.
    """
    start = time.monotonic()
    previous, grabs = grab(), 1
    unchanged_since = start
    while True:
        now = time.monotonic()
        if now - unchanged_since >= stable_for:
            return SettleResult(previous, True, grabs, now - start)
        if now - start >= timeout:
            return SettleResult(previous, False, grabs, now - start)
        time.sleep(poll)  # pacing the grabs, not waiting for readiness: the condition is checked each round
        current = grab()
        grabs += 1
        if not np.array_equal(current, previous):
            unchanged_since = time.monotonic()
            previous = current
