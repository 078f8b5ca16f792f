"""The office network of Weave-Design-6 (no TASK here): the seed's devices, the site survey's stops, the inventory
database, the outdated Dia diagram, how a saved diagram is read back, and where things sit on the screen.

Everything a seed decides is made here, guest-free, so that setup, the checker and the tests share it. The
diagram's boxes are Dia "Flowchart - Box" objects on a fixed grid (centimetres, Dia's unit); the lines are
"Standard - Line" objects whose two ends are connected to the boxes' main points. Dia renumbers object ids when it
saves, so a saved diagram is compared as labels and the pairs of labels its lines connect.
"""

from __future__ import annotations

import gzip
import io
import xml.etree.ElementTree as ET
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any
from xml.sax.saxutils import escape

import numpy as np

from weavegym.envs.tasks.pixel_font import read_text

DIA_NS = "http://www.lysator.liu.se/~alla/dia/"
D = "{" + DIA_NS + "}"
KINDS = ("AP", "PRN", "CAM", "PC", "NAS", "TEL", "KIOSK", "SCAN")
FLOORS = ("1F", "2F", "3F", "4F")
CODE_CHARS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
STOP_KINDS = ("RELABEL", "REMOVED", "INSTALLED")
MAX_DIA_BYTES = 4 << 20

# The diagram's grid (cm): the core switch, two floor switches, three devices under each, and free room below.
BOX_W, BOX_H, FONT_H = 4.0, 1.4, 0.7
CORE_AT = (12.6, 1.0)
SWITCH_AT = ((5.0, 5.0), (20.2, 5.0))
DEVICE_X = ((0.4, 5.0, 9.6), (15.6, 20.2, 24.8))
DEVICE_Y = 9.5
NEW_AT = ((2.7, 14.5), (22.5, 14.5))  # where the oracle puts a new device under switch 0 or 1 (the box's centre)
BLANK_AT = (14.5, 19.5)  # nothing is ever drawn here: a click there focuses Dia and selects nothing

# The Site Survey window (Tk): its canvas, the dot-matrix lines, the buttons and the code entry, from its top-left.
SURVEY_W, SURVEY_H = 440, 600
TITLE_AT, TITLE_SCALE = (16, 16), 3
LINE_X, LINE_Y0, LINE_PITCH, LINE_SCALE, LINE_CHARS = 16, 84, 40, 2, 34
STATUS_Y = 250
CANVAS_H = 300
BEGIN = (16, 316, 140, 34)
ENTRY = (16, 372, 250, 34)
CONFIRM = (280, 372, 140, 34)


def world(rng: np.random.Generator) -> dict[str, Any]:
    """The seed's network: the core and floor switches, six devices, the three survey stops (a relabel, a removal
    and a new device, in a seed's order), the inventory's assets with decoys, and the change number."""
    floors = [str(f) for f in rng.choice(FLOORS, size=2, replace=False)]
    core = str(rng.choice(["SW-CORE", "CORE-01", "SW-MAIN"]))
    switches = [f"SW-{f}" for f in floors]
    used: set[str] = set()

    def hostname(floor: str) -> str:
        while True:
            name = f"{rng.choice(KINDS)}-{floor}-{int(rng.integers(1, 40)):02d}"
            if name not in used:
                used.add(name)
                return name

    devices = [[hostname(f) for _ in range(3)] for f in floors]
    tags = [int(t) for t in rng.choice(np.arange(1000, 10000), size=20, replace=False)]
    codes = ["".join(rng.choice(list(CODE_CHARS), size=4)) for _ in range(20)]
    assets: list[dict[str, Any]] = []

    def asset(name: str, status: str, kind: str) -> dict[str, Any]:
        row = {"tag": tags[len(assets)], "hostname": name, "kind": kind, "status": status,
               "audit_code": codes[len(assets)]}
        assets.append(row)
        return row

    asset(core, "active", "switch")
    for s in switches:
        asset(s, "active", "switch")
    for floor_devices in devices:
        for d in floor_devices:
            asset(d, "active", d.split("-")[0].lower())
    relabel_sw, remove_sw, new_sw = (int(i) for i in rng.integers(0, 2, size=3))
    relabel_col, remove_col = (int(c) for c in rng.choice(3, size=2, replace=False))
    if relabel_sw != remove_sw:
        remove_col = int(rng.integers(0, 3))
    relabeled = devices[relabel_sw][relabel_col]
    removed = devices[remove_sw][remove_col]
    new_label = hostname(floors[relabel_sw])
    installed = hostname(floors[new_sw])
    new_row = asset(installed, "staged", installed.split("-")[0].lower())
    for _ in range(3):  # decoys: retired gear that is no longer on the diagram
        asset(hostname(str(rng.choice(floors))), "retired", "ap")
    by_name = {a["hostname"]: a for a in assets}
    stops = [
        {"kind": "RELABEL", "tag": by_name[relabeled]["tag"], "code": by_name[relabeled]["audit_code"],
         "lines": [f"TAG {by_name[relabeled]['tag']}", f"RELABELED AS {new_label}"]},
        {"kind": "REMOVED", "tag": by_name[removed]["tag"], "code": by_name[removed]["audit_code"],
         "lines": [f"TAG {by_name[removed]['tag']}", "REMOVED FROM THE RACK"]},
        {"kind": "INSTALLED", "tag": new_row["tag"], "code": new_row["audit_code"],
         "lines": [f"TAG {new_row['tag']} INSTALLED", f"CABLED TO TAG {by_name[switches[new_sw]]['tag']}"]},
    ]
    order = [int(i) for i in rng.permutation(3)]
    return {"core": core, "switches": switches, "devices": devices, "assets": assets,
            "stops": [stops[i] for i in order],
            "relabel": {"old": relabeled, "new": new_label, "switch": switches[relabel_sw]},
            "remove": {"name": removed, "switch": switches[remove_sw]},
            "install": {"name": installed, "switch": switches[new_sw], "at": list(NEW_AT[new_sw])},
            "change": f"CHG-{int(rng.integers(10000, 100000))}"}


SCHEMA = ("CREATE TABLE assets (tag INTEGER PRIMARY KEY, hostname TEXT NOT NULL, kind TEXT NOT NULL, "
          "status TEXT NOT NULL, audit_code TEXT NOT NULL);")


def db_rows(w: Mapping[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    rows = [(a["tag"], a["hostname"], a["kind"], a["status"], a["audit_code"]) for a in w["assets"]]
    return {"assets": sorted(rows)}


# -- the diagram ----------------------------------------------------------------------------------------------


def boxes(w: Mapping[str, Any]) -> list[tuple[str, float, float]]:
    """Every box of the outdated diagram: (label, x, y) of its top-left corner, core first."""
    out = [(w["core"], *CORE_AT)]
    out += [(s, *SWITCH_AT[i]) for i, s in enumerate(w["switches"])]
    out += [(d, DEVICE_X[i][j], DEVICE_Y) for i, row in enumerate(w["devices"]) for j, d in enumerate(row)]
    return out


def edges(w: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = [(w["core"], s) for s in w["switches"]]
    return out + [(w["switches"][i], d) for i, row in enumerate(w["devices"]) for d in row]


def centre(x: float, y: float) -> tuple[float, float]:
    return x + BOX_W / 2, y + BOX_H / 2


def _num(value: float) -> str:
    return f"{value:.4g}"


def dia_xml(w: Mapping[str, Any]) -> str:
    """The outdated diagram as Dia's (uncompressed) XML."""
    objects, ids = [], {}
    for label, x, y in boxes(w):
        ids[label] = f"O{len(objects)}"
        cx, cy = centre(x, y)
        objects.append(
            f'<dia:object type="Flowchart - Box" version="0" id="{ids[label]}">'
            f'<dia:attribute name="obj_pos"><dia:point val="{_num(x)},{_num(y)}"/></dia:attribute>'
            f'<dia:attribute name="elem_corner"><dia:point val="{_num(x)},{_num(y)}"/></dia:attribute>'
            f'<dia:attribute name="elem_width"><dia:real val="{BOX_W}"/></dia:attribute>'
            f'<dia:attribute name="elem_height"><dia:real val="{BOX_H}"/></dia:attribute>'
            '<dia:attribute name="show_background"><dia:boolean val="true"/></dia:attribute>'
            '<dia:attribute name="padding"><dia:real val="0.3"/></dia:attribute>'
            '<dia:attribute name="text"><dia:composite type="text">'
            f'<dia:attribute name="string"><dia:string>#{escape(label)}#</dia:string></dia:attribute>'
            '<dia:attribute name="font"><dia:font family="sans" style="0" name="Helvetica"/></dia:attribute>'
            f'<dia:attribute name="height"><dia:real val="{FONT_H}"/></dia:attribute>'
            f'<dia:attribute name="pos"><dia:point val="{_num(cx)},{_num(cy + 0.22)}"/></dia:attribute>'
            '<dia:attribute name="color"><dia:color val="#000000"/></dia:attribute>'
            '<dia:attribute name="alignment"><dia:enum val="1"/></dia:attribute>'
            '</dia:composite></dia:attribute></dia:object>')
    where = {label: centre(x, y) for label, x, y in boxes(w)}
    for a, b in edges(w):
        (ax, ay), (bx, by) = where[a], where[b]
        objects.append(
            f'<dia:object type="Standard - Line" version="0" id="O{len(objects)}">'
            f'<dia:attribute name="conn_endpoints"><dia:point val="{_num(ax)},{_num(ay + BOX_H / 2)}"/>'
            f'<dia:point val="{_num(bx)},{_num(by - BOX_H / 2)}"/></dia:attribute>'
            f'<dia:connections><dia:connection handle="0" to="{ids[a]}" connection="16"/>'
            f'<dia:connection handle="1" to="{ids[b]}" connection="16"/></dia:connections></dia:object>')
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<dia:diagram xmlns:dia="{DIA_NS}"><dia:layer name="Background" visible="true" active="true">'
            + "".join(objects) + "</dia:layer></dia:diagram>\n")


def _inflate(data: bytes) -> bytes:
    """A .dia file's XML: Dia saves it gzip-compressed or plain; a compressed one is inflated with a bound."""
    if data[:2] != b"\x1f\x8b":
        return data
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
        out = stream.read(MAX_DIA_BYTES + 1)
    if len(out) > MAX_DIA_BYTES:
        raise ValueError("the diagram inflates beyond 4 MiB")
    return out


def _dia_string(element: ET.Element) -> str:
    """The text of a dia:string, without Dia's enclosing '#'s."""
    raw = element.text or ""
    return raw[1:-1] if len(raw) >= 2 and raw.startswith("#") and raw.endswith("#") else raw


def parse_dia(data: bytes) -> dict[str, Any]:
    """What a diagram holds: ``labels`` (each text-bearing object's text, by object id), ``edges`` (the label pairs
    a line's two connected ends join), ``loose`` (lines with an end not connected to an object), ``others`` (object
    types that are neither), ``saved`` (Dia's own save: it writes dia:diagramdata)."""
    try:
        root = ET.fromstring(_inflate(data))
    except (ET.ParseError, OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"not a Dia diagram: {exc}") from None
    if root.tag != f"{D}diagram":
        raise ValueError("not a Dia diagram (no dia:diagram root)")
    labels: dict[str, str] = {}
    lines: list[dict[str, str]] = []
    others: list[str] = []
    for obj in root.iter(f"{D}object"):
        ident, kind = obj.get("id", ""), obj.get("type", "")
        connections = obj.find(f"{D}connections")
        text = obj.find(f"{D}attribute[@name='text']")
        if connections is not None or kind in ("Standard - Line", "Standard - PolyLine", "Standard - ZigZagLine"):
            ends = {c.get("handle", ""): c.get("to", "") for c in (connections if connections is not None else [])}
            lines.append(ends)
        elif text is not None:
            string = text.find(f".//{D}attribute[@name='string']/{D}string")
            labels[ident] = " ".join(_dia_string(string).split()) if string is not None else ""
        else:
            others.append(kind)
    found_edges, loose = [], 0
    for ends in lines:
        targets = [ends.get("0"), ends.get("1")]
        if all(t in labels for t in targets):
            found_edges.append(tuple(sorted((labels[targets[0]], labels[targets[1]]))))  # type: ignore[index]
        else:
            loose += 1
    return {"labels": labels, "edges": found_edges, "loose": loose, "others": others,
            "saved": root.find(f"{D}diagramdata") is not None}


def expected(w: Mapping[str, Any]) -> dict[str, Any]:
    """The updated diagram: its labels (a multiset as a sorted list) and its edges (sorted label pairs)."""
    relabel, remove, install = w["relabel"], w["remove"], w["install"]
    rename = {relabel["old"]: relabel["new"]}
    labels = [rename.get(label, label) for label, _, _ in boxes(w) if label != remove["name"]]
    labels.append(install["name"])
    pairs = [(rename.get(a, a), rename.get(b, b)) for a, b in edges(w) if remove["name"] not in (a, b)]
    pairs.append((install["switch"], install["name"]))
    return {"labels": sorted(labels), "edges": sorted(tuple(sorted(p)) for p in pairs)}


def svg_labels(data: bytes) -> list[str]:
    """The texts of an SVG export (Dia writes each box's label as a text with one tspan per line)."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise ValueError(f"not an SVG: {exc}") from None
    if not root.tag.endswith("}svg") and root.tag != "svg":
        raise ValueError("not an SVG (no svg root)")
    return sorted(" ".join("".join(t.itertext()).split()) for t in root.iter() if isinstance(t.tag, str)
                  and t.tag.rsplit("}", 1)[-1] == "text")


def counter_diff(found: Sequence[str], want: Sequence[str]) -> tuple[list[str], list[str]]:
    """What ``found`` lacks of ``want`` and what it has beyond it (multisets)."""
    f, w = Counter(found), Counter(want)
    return sorted((w - f).elements()), sorted((f - w).elements())


# -- the survey ----------------------------------------------------------------------------------------------


def survey_input(w: Mapping[str, Any]) -> dict[str, Any]:
    """What the Site Survey reads on stdin: each stop's lines and the audit code that confirms it, the change."""
    n = len(w["stops"])
    return {"stops": [{"lines": [f"STOP {i + 1} OF {n}", *s["lines"]], "code": s["code"]}
                      for i, s in enumerate(w["stops"])],
            "done": ["SURVEY COMPLETE", f"CHANGE {w['change']}"], "layout": survey_layout()}


def survey_layout() -> dict[str, Any]:
    return {"size": [SURVEY_W, SURVEY_H], "title": list(TITLE_AT), "title_scale": TITLE_SCALE,
            "line": [LINE_X, LINE_Y0, LINE_PITCH, LINE_SCALE], "status_y": STATUS_Y, "canvas_h": CANVAS_H,
            "begin": list(BEGIN), "entry": list(ENTRY), "confirm": list(CONFIRM)}


def survey_lines(image: np.ndarray, origin: Sequence[int]) -> list[str]:
    """The survey's three dot-matrix lines as the screen shows them."""
    return [read_text(image, origin[0] + LINE_X, origin[1] + LINE_Y0 + i * LINE_PITCH, LINE_SCALE, LINE_CHARS)
            for i in range(3)]


def survey_status(image: np.ndarray, origin: Sequence[int]) -> str:
    return read_text(image, origin[0] + LINE_X, origin[1] + STATUS_Y, LINE_SCALE, LINE_CHARS)


def survey_point(origin: Sequence[int], box: Sequence[int]) -> tuple[int, int]:
    return origin[0] + box[0] + box[2] // 2, origin[1] + box[1] + box[3] // 2


# -- Dia on the screen ----------------------------------------------------------------------------------------


def _edge_rows(image: np.ndarray, area: Sequence[int]) -> list[tuple[int, int, int]]:
    """Horizontal runs of black pixels at least 50 px long in ``area``: (y, x_start, length), first row of each.

    A run may have gaps of up to 8 px: Dia draws its blue connection-point marks over a box's edges."""
    x, y, width, height = area
    crop = image[y:y + height, x:x + width, :3].astype(int)
    dark = crop.max(axis=2) < 70
    runs = []
    for row in range(dark.shape[0]):
        cols = np.flatnonzero(dark[row])
        if cols.size < 50:
            continue
        breaks = np.flatnonzero(np.diff(cols) > 8)
        for start, stop in zip(np.concatenate(([0], breaks + 1)), np.concatenate((breaks, [cols.size - 1])),
                               strict=True):
            if cols[stop] - cols[start] >= 50 and (stop - start + 1) >= 0.6 * (cols[stop] - cols[start]):
                runs.append((y + row, x + int(cols[start]), int(cols[stop] - cols[start] + 1)))
    first = []
    for run in runs:  # a 2 px border gives two rows: keep the upper one
        if not any(r[0] == run[0] - 1 and abs(r[1] - run[1]) <= 2 for r in runs):
            first.append(run)
    return first


def find_view(image: np.ndarray, area: Sequence[int]) -> list[float] | None:
    """Dia's mapping from diagram cm to screen px, [ox, oy, scale], from the core box's top and bottom edges and the
    first floor switch's top edge (the three highest rows of box edges); None until they are drawn."""
    runs = _edge_rows(image, area)
    rows: list[int] = []
    for y in sorted({r[0] for r in runs}):
        if not rows or y - rows[-1] > 3:
            rows.append(y)
    if len(rows) < 3:
        return None
    scale = (rows[1] - rows[0]) / BOX_H
    core = min((r for r in runs if abs(r[0] - rows[0]) <= 3), key=lambda r: r[1])
    switch = min((r for r in runs if abs(r[0] - rows[2]) <= 3), key=lambda r: r[1])
    checks = ((rows[2] - rows[0]) / (SWITCH_AT[0][1] - CORE_AT[1]),
              (core[1] - switch[1]) / (CORE_AT[0] - SWITCH_AT[0][0]))
    if not 10 <= scale <= 40 or any(abs(c - scale) > 1.5 for c in checks):
        return None
    width = max(r[2] for r in runs if abs(r[0] - rows[0]) <= 3)
    left = core[1] - (BOX_W * scale - width) / 2  # the run starts past the corner's connection mark
    return [round(left - scale * CORE_AT[0], 1), round(rows[0] - scale * CORE_AT[1], 1), round(scale, 2)]


def to_screen(view: Sequence[float], x: float, y: float) -> tuple[int, int]:
    return round(view[0] + view[2] * x), round(view[1] + view[2] * y)


def box_of(w: Mapping[str, Any], label: str) -> tuple[float, float]:
    return next((x, y) for name, x, y in boxes(w) if name == label)


def text_point(view: Sequence[float], corner: tuple[float, float]) -> tuple[int, int]:
    """A point on a box's label (its centre line, a little left of the middle): where a text click lands."""
    return to_screen(view, corner[0] + BOX_W / 2, corner[1] + BOX_H / 2)


def body_point(view: Sequence[float], corner: tuple[float, float]) -> tuple[int, int]:
    """A point inside a box away from its label: a click there selects the box without editing its text."""
    return to_screen(view, corner[0] + 0.35, corner[1] + 0.3)


def line_point(view: Sequence[float], a: tuple[float, float], b: tuple[float, float]) -> tuple[int, int]:
    """The middle of the line between two boxes' centres (it runs between their main points)."""
    (ax, ay), (bx, by) = centre(*a), centre(*b)
    return to_screen(view, (ax + bx) / 2, (ay + by) / 2)


def find_box_tool(image: np.ndarray, area: Sequence[int]) -> tuple[int, int] | None:
    """The centre of the Flowchart sheet's first shape (a plain square outline, black on light) in Dia's toolbox:
    the topmost, then leftmost, square outline of 14-30 px in ``area``; None until it is drawn."""
    x, y, width, height = area
    crop = image[y:y + height, x:x + width, :3].astype(int)
    dark = crop.max(axis=2) < 70
    light = crop.min(axis=2) > 180
    for row in range(dark.shape[0]):
        line = np.concatenate(([0], dark[row].astype(np.int8), [0]))
        change = np.flatnonzero(np.diff(line))
        for start, stop in zip(change[::2], change[1::2], strict=True):
            size = int(stop - start)
            if not 14 <= size <= 30 or row + size > dark.shape[0]:
                continue
            left, right = dark[row:row + size, start], dark[row:row + size, stop - 1]
            bottom = dark[row + size - 1, start:stop]
            inside = light[row + 3:row + size - 3, start + 3:stop - 3]
            if left.mean() > 0.85 and right.mean() > 0.85 and bottom.mean() > 0.85 and inside.size and \
                    inside.mean() > 0.9:
                return x + int(start) + size // 2, y + row + size // 2
    return None


# Dia's toolbox buttons, as offsets from the Flowchart sheet's box icon (find_box_tool): the Modify tool (arrow),
# the Edit Text tool (I-beam) and the Line tool. A click on a button picks a tool whatever has the keyboard focus.
MODIFY_TOOL, TEXT_TOOL, LINE_TOOL = (2, -181), (39, -181), (39, -109)
HIGHLIGHT = (255, 255, 179)  # Dia 0.97 draws the text being edited on this light yellow


def tool_point(box_tool: Sequence[int], offset: tuple[int, int]) -> tuple[int, int]:
    return int(box_tool[0]) + offset[0], int(box_tool[1]) + offset[1]


def screen_area(view: Sequence[float], x0: float, y0: float, x1: float, y1: float) -> list[int]:
    """The screen rectangle [x, y, width, height] of the diagram's rectangle (cm) from (x0, y0) to (x1, y1)."""
    (a, b), (c, d) = to_screen(view, x0, y0), to_screen(view, x1, y1)
    return [a, b, max(c - a, 1), max(d - b, 1)]


def box_area(view: Sequence[float], corner: tuple[float, float]) -> list[int]:
    """A box of the diagram and a margin around it on the screen."""
    return screen_area(view, corner[0] - 0.4, corner[1] - 0.4, corner[0] + BOX_W + 0.4, corner[1] + BOX_H + 0.4)


def new_box_area(view: Sequence[float], at: tuple[float, float]) -> list[int]:
    """Where a box Dia creates with a click at ``at`` (its top-left corner) sits, with a margin (its text included)."""
    return screen_area(view, at[0] - 0.4, at[1] - 0.4, at[0] + BOX_W + 1.5, at[1] + 2.6)


def new_box_point(view: Sequence[float], at: tuple[float, float]) -> tuple[int, int]:
    """The centre of a box Dia created with a click at ``at``: where its (empty or short) text sits."""
    return to_screen(view, at[0] + 1.1, at[1] + 1.0)


def _crop(image: np.ndarray, area: Sequence[int]) -> np.ndarray:
    x, y, width, height = (int(v) for v in area)
    return image[max(y, 0):max(y + height, 0), max(x, 0):max(x + width, 0), :3].astype(int)


def highlighted(image: np.ndarray, area: Sequence[int]) -> int:
    """How many pixels in ``area`` show Dia's text-edit highlight."""
    crop = _crop(image, area)
    return int((np.abs(crop - np.array(HIGHLIGHT)).max(axis=2) <= 12).sum())


def text_cursor(image: np.ndarray, area: Sequence[int], scale: float) -> bool:
    """Whether ``area`` shows Dia's text cursor: a thin grey vertical bar as tall as a text line (taller than a
    capital letter's stroke), with light pixels either side of it."""
    crop = _crop(image, area)
    if crop.shape[0] < 3 or crop.shape[1] < 5:
        return False
    grey = (crop.max(axis=2) - crop.min(axis=2) <= 12) & (crop.max(axis=2) >= 80) & (crop.max(axis=2) <= 175)
    light = crop.min(axis=2) >= 170
    bar = np.zeros(grey.shape, bool)
    bar[:, 1:-2] = (grey[:, 1:-2] | grey[:, 2:-1]) & light[:, :-3] & light[:, 3:]
    need = max(int(0.85 * FONT_H * scale), 6)
    for col in range(bar.shape[1]):
        run = 0
        for value in bar[:, col]:
            run = run + 1 if value else 0
            if run >= need:
                return True
    return False


def editing(image: np.ndarray, area: Sequence[int], scale: float) -> bool:
    """Whether Dia is editing a text in ``area``: its highlight behind the text, or the cursor of an empty one."""
    return highlighted(image, area) >= 20 or text_cursor(image, area, scale)


def selected(image: np.ndarray, area: Sequence[int]) -> int:
    """How many pixels in ``area`` show Dia's selection handles: pure green squares, or red ones where a line's end
    is connected to an object."""
    crop = _crop(image, area)
    green = (crop[..., 1] >= 230) & (crop[..., 0] <= 30) & (crop[..., 2] <= 30)
    red = (crop[..., 0] >= 180) & (crop[..., 1] <= 30) & (crop[..., 2] <= 30)
    return int((green | red).sum())
