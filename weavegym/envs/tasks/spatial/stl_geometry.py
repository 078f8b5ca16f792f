"""STL helpers for the spatial tasks (no TASK here): parse ASCII or binary STL, measure it with numpy."""

from __future__ import annotations

import math
import re
import struct

import numpy as np

_FACET_VERTEX = re.compile(rb"vertex\s+(\S+)\s+(\S+)\s+(\S+)")


def triangles(data: bytes) -> np.ndarray | None:
    """The N x 3 x 3 float array of an STL's triangles, or None when ``data`` is no STL."""
    if len(data) >= 84:
        (count,) = struct.unpack_from("<I", data, 80)
        if 84 + 50 * count == len(data) and count > 0:
            records = np.frombuffer(data, dtype=np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")]),
                                    count=count, offset=84)
            return records["v"].astype(float)
    if data.lstrip()[:5].lower() == b"solid":
        try:
            points = np.array([[float(c) for c in m.groups()] for m in _FACET_VERTEX.finditer(data)])
        except ValueError:
            return None
        if len(points) >= 3 and len(points) % 3 == 0:
            return points.reshape(-1, 3, 3)
    return None


def volume(tris: np.ndarray) -> float:
    """Enclosed volume (divergence theorem); positive for outward-facing triangles."""
    return float(np.einsum("ij,ij->i", tris[:, 0], np.cross(tris[:, 1], tris[:, 2])).sum() / 6.0)


def bbox(tris: np.ndarray) -> tuple[list[float], list[float]]:
    points = tris.reshape(-1, 3)
    return points.min(axis=0).tolist(), points.max(axis=0).tolist()


def polygon_area(radius: float, fn: int) -> float:
    """Area of the regular ``fn``-gon OpenSCAD uses for a circle of ``radius`` (vertices on the circle)."""
    return fn / 2 * radius**2 * math.sin(2 * math.pi / fn)
