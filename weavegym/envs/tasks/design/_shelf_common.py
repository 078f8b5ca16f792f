"""Weave-Design-7's world, geometry and window layout (no TASK): shared by its setup, checker, oracle and tests.

A shelf bracket is an L: a bottom leg (A long) and an upright (B high), both T thick and W wide, joined at the
outer corner, with one through-hole in each leg (the sketch's nominal D plus the material's clearance, $fn 24):
the bottom leg's hole P from the outer corner, the upright's Q up from it. The layout is no secret; the sizes
are (``withheld``): they exist only as the Workshop Sketch's dot-matrix labels.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.envs.setup_context import HOME, PRIVATE_DIR
from weavegym.envs.tasks import pixel_font

COUNT = 3
FN = 24
APP_DIR = "/usr/local/share/workshopsketch"
APP = f"{APP_DIR}/workshop_sketch.py"
CONF, RECORD = f"{PRIVATE_DIR}/workshop-sketch.json", f"{PRIVATE_DIR}/workshop-record.jsonl"
WORKSHOP = f"{HOME}/workshop"
TEMPLATE = f"{WORKSHOP}/bracket.scad"
DB_DIR = "/srv/shelfdb"
DB = f"{DB_DIR}/materials.db"
CUTLIST = f"{HOME}/cutlist"
BOM = f"{CUTLIST}/bom.csv"
BOM_HEADER = "part,code,volume_mm3,mass_g,quantity"
TITLE, HEADING = "Workshop Sketch", "WORKSHOP SKETCH"
SKETCH_AT, SKETCH_SIZE = (0, 40), (470, 640)
SCAD_AT, SCAD_SIZE = (480, 40), (796, 650)
SCALE, PAD, GAP = 2, 8, 8
HEADING_AT = (16, 10)
OPEN = (16, 34, 100, 30)  # the first "Part N" button; the others follow right of it
DRAWING = (16, 74, 438, 330)  # the sketch panel
ENTRY, CONFIRM = (160, 416, 150, 30), (320, 416, 110, 30)
STATUS, RESULTS = (16, 456, 438, 30), (16, 494, 438, 100)
LINE_STEP = 24
# Where each dimension's label is drawn in the sketch panel ("A 64"): the letter, then the value in mm.
LABELS: dict[str, tuple[int, int]] = {"A": (196, 298), "B": (8, 150), "T": (362, 262), "P": (150, 218),
                                      "Q": (150, 180), "D": (314, 194), "W": (296, 62)}
PART_TITLE_AT = (8, 8)
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
MASS_TOLERANCE = 0.001  # relative: a hole without its clearance is off by 0.2 % or more
VOLUME_TOLERANCE = 0.001

SCHEMA = ("CREATE TABLE materials (name TEXT PRIMARY KEY, density_g_cm3 REAL NOT NULL, clearance_mm REAL NOT NULL);"
          "CREATE TABLE parts (job TEXT NOT NULL, part INTEGER NOT NULL, material TEXT NOT NULL, "
          "quantity INTEGER NOT NULL);")
MATERIALS = (("steel S235", 7.85, 0.5), ("aluminium 6061", 2.70, 0.6), ("brass CW614N", 8.47, 0.5),
             ("stainless 304", 8.00, 0.8), ("bronze CuSn8", 8.80, 0.6), ("titanium gr2", 4.51, 1.0),
             ("copper C101", 8.94, 0.7))

TEMPLATE_SCAD = """// Shelf bracket: set the parameters from the Workshop Sketch, render (F6), export as STL (F7).
leg_a = 60;    // A: bottom leg length, outer corner to its end (mm)
leg_b = 40;    // B: upright height, outer corner to its top (mm)
width = 20;    // W: bracket width (mm)
thick = 4;     // T: plate thickness (mm)
hole_d = 5;    // hole diameter: the sketch's D plus the material's clearance (mm)
hole_a = 30;   // P: bottom leg hole centre, from the outer corner (mm)
hole_b = 25;   // Q: upright hole centre, up from the outer corner (mm)

difference() {
    union() {
        cube([leg_a, width, thick]);
        cube([thick, width, leg_b]);
    }
    translate([hole_a, width / 2, -1]) cylinder(d = hole_d, h = thick + 2, $fn = 24);
    translate([-1, width / 2, hole_b]) rotate([0, 90, 0]) cylinder(d = hole_d, h = thick + 2, $fn = 24);
}
"""


def stl_path(part: int) -> str:
    return f"{WORKSHOP}/bracket-{part}.stl"


def polygon_area(radius: float, fn: int = FN) -> float:
    """The area of OpenSCAD's ``fn``-gon for a circle of ``radius`` (its vertices on the circle)."""
    return fn / 2 * radius**2 * math.sin(2 * math.pi / fn)


def bracket_volume(dims: Mapping[str, float], hole_d: float) -> float:
    """mm^3 of the bracket as the template models it: the two legs (overlapping in the corner) less two holes."""
    a, b, w, t = dims["A"], dims["B"], dims["W"], dims["T"]
    return a * w * t + t * w * (b - t) - 2 * t * polygon_area(hole_d / 2)


def mass_g(volume_mm3: float, density: float) -> float:
    return volume_mm3 * density / 1000.0


def _draw_part(rng: np.random.Generator, clearance: float) -> dict[str, Any]:
    t = int(rng.integers(4, 7))
    d = int(rng.choice([6, 8, 10]))
    hole_d = round(d + clearance, 2)
    w = int(rng.integers(math.ceil(hole_d) + 8, 31))
    a, b = int(rng.integers(55, 96)), int(rng.integers(45, 86))
    r = hole_d / 2
    p = int(rng.integers(math.ceil(t + r + 3), math.floor(a - r - 4) + 1))
    q = int(rng.integers(math.ceil(t + r + 3), math.floor(b - r - 4) + 1))
    return {"A": a, "B": b, "W": w, "T": t, "D": d, "P": p, "Q": q}


def world(rng: np.random.Generator) -> dict[str, Any]:
    """The job, three parts (each of its own material), and decoy jobs using the same part numbers."""
    job = f"SHELF-{int(rng.integers(1000, 10000))}"
    order = [int(i) for i in rng.permutation(len(MATERIALS))]
    parts = []
    for number in range(1, COUNT + 1):
        name, density, clearance = MATERIALS[order[number - 1]]
        dims = _draw_part(rng, clearance)
        hole_d = round(dims["D"] + clearance, 2)
        volume = bracket_volume(dims, hole_d)
        parts.append({"part": number, "dims": dims, "material": name, "density": density, "clearance": clearance,
                      "hole_d": hole_d, "quantity": int(rng.integers(2, 13)), "volume": volume,
                      "mass": mass_g(volume, density)})
    decoys = []
    for index in range(2):
        other = f"SHELF-{int(rng.integers(1000, 10000))}"
        if other == job:
            other = f"SHELF-{(int(other[6:]) + 1 + index) % 9000 + 1000}"
        for number in range(1, COUNT + 1):
            decoys.append((other, number, MATERIALS[order[(COUNT + index + number) % len(MATERIALS)]][0],
                           int(rng.integers(1, 20))))
    return {"job": job, "parts": parts, "decoys": decoys}


def db_rows(w: Mapping[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    rows = [(w["job"], p["part"], p["material"], p["quantity"]) for p in w["parts"]]
    rows = rows + list(w["decoys"])
    rows.sort(key=lambda r: (r[1], r[0]))  # the job's rows among the others
    return {"materials": [tuple(m) for m in MATERIALS], "parts": rows}


def label_text(letter: str, value: int) -> str:
    return f"{letter} {value}"


def layout() -> dict[str, Any]:
    """Where the sketch draws everything; boxes are [x, y, width, height] in the window."""
    return {"title": TITLE, "heading": HEADING, "heading_at": list(HEADING_AT), "scale": SCALE, "pad": PAD,
            "gap": GAP, "size": list(SKETCH_SIZE), "at": list(SKETCH_AT), "open": list(OPEN),
            "drawing": list(DRAWING), "entry": list(ENTRY), "confirm": list(CONFIRM), "status": list(STATUS),
            "results": list(RESULTS), "line_step": LINE_STEP, "labels": {k: list(v) for k, v in LABELS.items()},
            "part_title_at": list(PART_TITLE_AT), "alphabet": ALPHABET, "tolerance": MASS_TOLERANCE,
            "count": COUNT}


def origin(image: np.ndarray, reach: int = 40) -> tuple[int, int] | None:
    """The sketch window's top-left, found where its heading reads back near where it was put."""
    return pixel_font.find_drawn(image, HEADING, SKETCH_AT, HEADING_AT, SCALE, reach=reach)


def _in_drawing(at: Sequence[int], x: int, y: int) -> tuple[int, int]:
    return at[0] + DRAWING[0] + x, at[1] + DRAWING[1] + y


def read_part(screen: np.ndarray, at: Sequence[int], part: int) -> dict[str, int] | None:
    """Part ``part``'s dimensions read off the sketch; None until its drawing shows whole."""
    if pixel_font.read_text(screen, *_in_drawing(at, *PART_TITLE_AT), SCALE, 12) != f"PART {part} OF {COUNT}":
        return None
    dims = {}
    for letter, (x, y) in LABELS.items():
        text = pixel_font.read_text(screen, *_in_drawing(at, x, y), SCALE, 5)
        match = re.fullmatch(rf"{letter} (\d+)", text)
        if match is None:
            return None
        dims[letter] = int(match.group(1))
    return dims


def read_status(screen: np.ndarray, at: Sequence[int]) -> str:
    return pixel_font.read_text(screen, at[0] + STATUS[0] + PAD, at[1] + STATUS[1] + PAD, SCALE, 34)


def read_result(screen: np.ndarray, at: Sequence[int], part: int) -> str:
    return pixel_font.read_text(screen, at[0] + RESULTS[0] + PAD,
                                at[1] + RESULTS[1] + PAD + (part - 1) * LINE_STEP, SCALE, 34)


def result_code(text: str, part: int) -> str | None:
    match = re.fullmatch(rf"PART {part} OK  CODE ([{ALPHABET}]{{6}})", text)
    return match.group(1) if match else None


def box_click(at: Sequence[int], box: Sequence[int], index: int = 0) -> dict[str, Any]:
    return {"kind": "click", "x": at[0] + box[0] + index * (box[2] + GAP) + box[2] // 2,
            "y": at[1] + box[1] + box[3] // 2}


# ---- the STL, measured on the host -------------------------------------------------------------------------

def inside(tris: np.ndarray, point: Sequence[float]) -> bool:
    """Whether ``point`` is inside the closed mesh: the parity of a ray's crossings (Möller-Trumbore), cast in a
    direction no edge of an axis-aligned model lies along."""
    direction = np.array([0.5773, 0.5774, 0.5774]) + np.array([0.0123, -0.0071, 0.0037])
    direction /= np.linalg.norm(direction)
    origin_ = np.asarray(point, dtype=float)
    v0, v1, v2 = tris[:, 0], tris[:, 1], tris[:, 2]
    e1, e2 = v1 - v0, v2 - v0
    p = np.cross(direction, e2)
    det = np.einsum("ij,ij->i", e1, p)
    ok = np.abs(det) > 1e-12
    inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
    s = origin_ - v0
    u = np.einsum("ij,ij->i", s, p) * inv
    q = np.cross(s, e1)
    v = (q @ direction) * inv
    t = np.einsum("ij,ij->i", e2, q) * inv
    hits = ok & (u >= 0) & (v >= 0) & (u + v <= 1) & (t > 1e-9)
    return bool(int(hits.sum()) % 2)


def hole_problems(tris: np.ndarray, dims: Mapping[str, float], hole_d: float) -> list[str]:
    """What is wrong with the two holes: each must be open at its centre and near its rim, and the plate solid just
    outside its rim (so the hole sits where the sketch says, at the diameter asked for)."""
    r, w, t = hole_d / 2, dims["W"], dims["T"]
    problems = []
    for name, centre, axes in (("bottom", (dims["P"], w / 2, t / 2), (0, 1)),
                               ("upright", (t / 2, w / 2, dims["Q"]), (1, 2))):
        def at(radius: float, angle: float, centre: Sequence[float] = centre, axes: tuple[int, int] = axes
               ) -> list[float]:
            point = list(centre)
            point[axes[0]] += radius * math.cos(angle)
            point[axes[1]] += radius * math.sin(angle)
            return point
        angles = [math.pi / 4 * k + math.pi / 24 for k in range(8)]
        if inside(tris, centre) or any(inside(tris, at(0.9 * r, a)) for a in angles):
            problems.append(f"the {name} hole is not open at its place and diameter")
        elif not all(inside(tris, at(r + 0.6, a)) for a in angles):
            problems.append(f"the {name} hole is larger than {hole_d} mm or off its place")
    return problems
