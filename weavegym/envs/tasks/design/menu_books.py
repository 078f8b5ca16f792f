"""The café of Weave-Design-5 (no TASK here): its dishes, pricing rules, renames, winter stand-ins, the marked-up
proof, the menu board's SVG, and how the oracle reads the proof and finds the board on the screen.

Everything a seed decides is made here, guest-free, so that setup and the tests share it. The proof's marks
(which slot, what change) exist only as pixels in the proof viewer; what each mark turns into (a price from the
section's markup and rounding, a new name, a winter stand-in or the sold-out word) is only in the database. The
board is laid out on a fixed grid, so the oracle maps an element's SVG position to the screen once it has found
the page (the board's dark background) in its screenshot.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any
from xml.sax.saxutils import escape

import numpy as np

from weavegym.envs.tasks.pixel_font import read_text

SECTIONS = ("HOT DRINKS", "BAKERY", "LUNCH")
SOLD_OUT_WORD = "ÉPUISÉ"
SEASON = "winter"
MARKS = ("PRICE", "NEW NAME", "SOLD OUT")
# Dish names in French (accents), Japanese and Greek: the board's current names, then the names only the database
# offers (renames and stand-ins). No '|' (the oracle's query separates fields with it) and at most 18 characters.
BOARD_NAMES = {
    "HOT DRINKS": ("Café crème", "Chocolat chaud", "Thé à la menthe", "抹茶ラテ", "ほうじ茶ラテ", "Ελληνικός καφές",
                   "Τσάι του βουνού", "Café au lait", "Chai épicé"),
    "BAKERY": ("Pain au chocolat", "Éclair café", "Crème brûlée", "Mille-feuille", "メロンパン", "どら焼き",
               "Μπουγάτσα", "Κουλούρι", "Tarte Tatin"),
    "LUNCH": ("Croque-monsieur", "Quiche lorraine", "Salade niçoise", "親子丼", "カレーうどん", "Σπανακόπιτα",
              "Μουσακάς", "Galette complète", "Ratatouille"),
}
NEW_NAMES = ("Latte à l'érable", "Crème de marrons", "黒ごまラテ", "柚子ティー", "Σοκολάτα ζεστή", "Brioche feuilletée",
             "Financier pistache", "抹茶マフィン", "Λουκουμάδες", "Tartine chèvre", "Œufs cocotte", "鮭おにぎり",
             "Φασολάδα", "Pâtes au pesto", "Bûche de Noël", "Vin chaud épicé", "栗ぜんざい", "Γαλακτομπούρεκο",
             "Soupe de potiron", "Pain d'épices")
COST_RANGES = {"HOT DRINKS": (55, 150), "BAKERY": (45, 190), "LUNCH": (240, 620)}
MARKUPS = {"HOT DRINKS": (180, 260), "BAKERY": (110, 200), "LUNCH": (80, 150)}
STEPS = {"HOT DRINKS": (10, 10), "BAKERY": (10, 20), "LUNCH": (50, 50)}
ROWS = 5  # dishes per section; slots are numbered 1..15 across the board

SCHEMA = ("CREATE TABLE dishes (code TEXT PRIMARY KEY, slot INTEGER, section TEXT NOT NULL, name TEXT NOT NULL, "
          "cost_cents INTEGER NOT NULL);"
          "CREATE TABLE pricing (section TEXT PRIMARY KEY, markup_pct INTEGER NOT NULL, "
          "round_up_to_cents INTEGER NOT NULL);"
          "CREATE TABLE renames (code TEXT NOT NULL, new_name TEXT NOT NULL);"
          "CREATE TABLE seasonal (slot INTEGER NOT NULL, season TEXT NOT NULL, name TEXT NOT NULL, "
          "cost_cents INTEGER NOT NULL);")

# The board (SVG user units = px at 96 dpi): three columns of five rows on a dark page.
WIDTH, HEIGHT = 1020, 640
BG, INK_RGB = (0x1F, 0x3A, 0x2E), (0xF3, 0xE9, 0xD2)
COLUMN_W, NAME_DX, PRICE_DX, NUM_DX = 340, 48, 320, 18
FIRST_ROW_Y, ROW_PITCH, FONT = 180, 80, 20
WINDOW = (886, 676, 392, 40)  # Inkscape's window beside the proof: width, height, x, y


def price_cents(cost: int, markup: int, step: int) -> int:
    """cost x (1 + markup %), rounded up to the next multiple of ``step`` cents (integers only, as the SQL)."""
    return -(-cost * (100 + markup) // (100 * step)) * step


def euros(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


def _pick(rng: np.random.Generator, pool: Sequence[str], count: int) -> list[str]:
    return [unicodedata.normalize("NFC", str(n)) for n in rng.choice(list(pool), size=count, replace=False)]


def world(rng: np.random.Generator) -> dict[str, Any]:
    """The seed's café: dishes (slot, section, name, cost, board price), pricing rules, renames, stand-ins, the
    proof's marks per section, and ``changes``: (slot, field, text) for every board text the marks change."""
    cafe = str(rng.choice(["LUMIÈRE", "SAKURA", "ORAÍA", "PERCHE", "MIMOSA"]))
    pricing = {s: (int(rng.integers(lo // 5, hi // 5 + 1)) * 5, int(rng.choice(STEPS[s])))
               for s, (lo, hi) in MARKUPS.items()}
    dishes, codes = [], [f"D{int(c)}" for c in rng.choice(np.arange(100, 1000), size=3 * ROWS + 3, replace=False)]
    for index, section in enumerate(SECTIONS):
        names = _pick(rng, BOARD_NAMES[section], ROWS + 1)
        for row, name in enumerate(names):
            lo, hi = COST_RANGES[section]
            cost = int(rng.integers(lo, hi))
            markup, step = pricing[section]
            new = price_cents(cost, markup, step)
            old = max(step, new + step * int(rng.choice([-3, -2, -1, 1, 2])))  # the board's stale price
            slot = index * ROWS + row + 1 if row < ROWS else None  # the sixth dish is retired: not on the board
            dishes.append({"code": codes[len(dishes)], "slot": slot, "section": section, "name": name,
                           "cost": cost, "board_price": euros(old), "price": euros(new)})
    on_board = [d for d in dishes if d["slot"] is not None]
    slots = [int(s) for s in rng.permutation(len(on_board))[:7] + 1]
    # Every section gets a mark: redraw until the seven slots cover the three sections.
    while {(s - 1) // ROWS for s in slots[:7]} != {0, 1, 2}:
        slots = [int(s) for s in rng.permutation(len(on_board))[:7] + 1]
    kinds = ["PRICE", "PRICE", "PRICE", "NEW NAME", "NEW NAME", "SOLD OUT", "SOLD OUT"]
    extra = _pick(rng, NEW_NAMES, 8)
    by_slot = {d["slot"]: d for d in on_board}
    renames, seasonal, changes = [], [], []
    for slot, kind in zip(slots, kinds, strict=True):
        dish = by_slot[slot]
        if kind == "PRICE":
            changes.append((slot, "price", dish["price"]))
        elif kind == "NEW NAME":
            renames.append((dish["code"], extra.pop()))
            changes.append((slot, "name", renames[-1][1]))
    sold = [s for s, k in zip(slots, kinds, strict=True) if k == "SOLD OUT"]
    stand_in = sold[int(rng.integers(2))]
    for slot in sold:
        section = SECTIONS[(slot - 1) // ROWS]
        lo, hi = COST_RANGES[section]
        summer = (slot, "summer", extra.pop(), int(rng.integers(lo, hi)))  # out of season: not this board's
        seasonal.append(summer)
        if slot == stand_in:
            winter = (slot, SEASON, extra.pop(), int(rng.integers(lo, hi)))
            seasonal.append(winter)
            changes.append((slot, "name", winter[2]))
            changes.append((slot, "price", euros(price_cents(winter[3], *pricing[section]))))
        else:
            changes.append((slot, "price", SOLD_OUT_WORD))
    unmarked = [d for d in dishes if d["slot"] not in slots]
    for pick in rng.choice(len(unmarked), size=2, replace=False):  # proposed renames the proof did not approve
        renames.append((unmarked[int(pick)]["code"], extra.pop()))
    marks = [[(s, k) for s, k in sorted(zip(slots, kinds, strict=True)) if (s - 1) // ROWS == i]
             for i in range(len(SECTIONS))]
    return {"cafe": cafe, "pricing": pricing, "dishes": dishes, "renames": renames, "seasonal": seasonal,
            "marks": marks, "changes": sorted(changes)}


def db_rows(w: Mapping[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    return {"dishes": [(d["code"], d["slot"], d["section"], d["name"], d["cost"]) for d in w["dishes"]],
            "pricing": [(s, m, st) for s, (m, st) in w["pricing"].items()],
            "renames": list(w["renames"]), "seasonal": list(w["seasonal"])}


# -- the board ------------------------------------------------------------------------------------------------


def element_at(slot: int, field: str) -> tuple[int, int, str]:
    """SVG x, baseline y and anchor of a slot's name, price or number."""
    column, row = (slot - 1) // ROWS, (slot - 1) % ROWS
    x0, y = column * COLUMN_W, FIRST_ROW_Y + row * ROW_PITCH
    if field == "price":
        return x0 + PRICE_DX, y, "end"
    return (x0 + NAME_DX, y, "start") if field == "name" else (x0 + NUM_DX, y, "start")


def board_texts(w: Mapping[str, Any]) -> dict[str, str]:
    """Every text element's id and text on the board as setup writes it."""
    texts = {"title": f"CAFÉ {w['cafe']}", "footer": "Prix TTC en euros - service compris"}
    for index, section in enumerate(SECTIONS):
        texts[f"section-{index + 1}"] = section.title()
    for dish in w["dishes"]:
        if dish["slot"] is not None:
            slot = dish["slot"]
            texts.update({f"num-{slot}": str(slot), f"name-{slot}": dish["name"], f"price-{slot}": dish["board_price"]})
    return texts


def expected_texts(w: Mapping[str, Any]) -> dict[str, str]:
    texts = board_texts(w)
    for slot, field, text in w["changes"]:
        texts[f"{field}-{slot}"] = text
    return texts


def board_svg(w: Mapping[str, Any]) -> str:
    texts = board_texts(w)
    cream, amber = "#{:02x}{:02x}{:02x}".format(*INK_RGB), "#e8b04a"
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<svg xmlns="http://www.w3.org/2000/svg" '
           f'xmlns:sodipodi="http://sodipodi.sourceforge.net/DTD/sodipodi-0.dtd" '
           f'xmlns:inkscape="http://www.inkscape.org/namespaces/inkscape" width="{WIDTH}" '
           f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}">',
           # Inkscape restores a document's window geometry: beside the proof, not maximized (where the window
           # manager would not move it).
           '  <sodipodi:namedview id="view" inkscape:window-width="{}" inkscape:window-height="{}" '
           'inkscape:window-x="{}" inkscape:window-y="{}" inkscape:window-maximized="0"/>'.format(*WINDOW),
           f'  <rect id="board" x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#%02x%02x%02x" '
           'sodipodi:insensitive="true"/>' % BG]

    def text(ident: str, x: int, y: int, size: int, fill: str, anchor: str = "start", bold: bool = False) -> None:
        weight = ' font-weight="bold"' if bold else ""
        out.append(f'  <text id="{ident}" x="{x}" y="{y}" font-family="DejaVu Sans" font-size="{size}"{weight} '
                   f'text-anchor="{anchor}" fill="{fill}">{escape(texts[ident])}</text>')

    text("title", WIDTH // 2, 64, 40, cream, "middle", True)
    for index in range(len(SECTIONS)):
        text(f"section-{index + 1}", index * COLUMN_W + NUM_DX, 120, 26, amber, bold=True)
    for slot in range(1, 3 * ROWS + 1):
        for field, size, fill in (("num", 14, amber), ("name", FONT, cream), ("price", FONT, cream)):
            x, y, anchor = element_at(slot, field)
            text(f"{field}-{slot}", x, y, size, fill, anchor)
    text("footer", WIDTH // 2, 612, 16, amber, "middle")
    out.append("</svg>")
    return "\n".join(out) + "\n"


# -- the screen ---------------------------------------------------------------------------------------------------


def find_page(image: np.ndarray) -> tuple[int, int, int, int] | None:
    """The board's page on the screen (x, y, width, height) from its dark background, or None while the page
    is not wholly shown at the board's aspect (not drawn yet, or cut off by the window)."""
    mask = np.abs(image[..., :3].astype(int) - BG).max(axis=2) < 10
    rows, cols = np.nonzero(mask.sum(axis=1) > 40)[0], np.nonzero(mask.sum(axis=0) > 40)[0]
    if rows.size == 0 or cols.size == 0:
        return None
    x, y, w, h = int(cols[0]), int(rows[0]), int(cols[-1] - cols[0] + 1), int(rows[-1] - rows[0] + 1)
    if w < 300 or abs(h / w - HEIGHT / WIDTH) > 0.02:
        return None
    return x, y, w, h


def to_screen(page: Sequence[int], x: float, y: float) -> tuple[int, int]:
    scale = page[2] / WIDTH
    return round(page[0] + x * scale), round(page[1] + y * scale)


def ink_point(image: np.ndarray, page: Sequence[int], slot: int, field: str) -> tuple[int, int] | None:
    """A pixel on a slot's name or price glyphs to click: the cream pixel nearest to the text's start (a name)
    or end (a price), searched in the row band of that text, or None when none is drawn there."""
    x, y, anchor = element_at(slot, field)
    scale = page[2] / WIDTH
    left, top = to_screen(page, x - (150 if anchor == "end" else 0), y - FONT * 0.75)
    right, bottom = to_screen(page, x + (0 if anchor == "end" else 150), y)
    target = to_screen(page, x - 12 if anchor == "end" else x + 12, y - FONT * 0.35)
    band = image[top:bottom, left:right, :3].astype(int)
    ys, xs = np.nonzero(np.abs(band - INK_RGB).max(axis=2) < 40)
    if xs.size == 0:
        return None
    nearest = int(np.argmin((xs + left - target[0]) ** 2 + (ys + top - target[1]) ** 2 * max(1.0, scale)))
    return int(xs[nearest] + left), int(ys[nearest] + top)


# -- the proof viewer's layout, shared with the fixture --------------------------------------------------------

PROOF_W, PROOF_H = 380, 640
PROOF_CANVAS = (10, 50, 360, 540)
PROOF_TITLE, PROOF_TITLE_SCALE = (12, 12), 3
LINE_X, LINE_Y0, LINE_PITCH, LINE_SCALE, LINE_CHARS = 24, 80, 56, 2, 16
TAB_W = 116


def proof_layout() -> dict[str, Any]:
    return {"width": PROOF_W, "height": PROOF_H, "canvas": list(PROOF_CANVAS), "title": list(PROOF_TITLE),
            "title_scale": PROOF_TITLE_SCALE, "line_x": LINE_X, "line_y0": LINE_Y0, "line_pitch": LINE_PITCH,
            "line_scale": LINE_SCALE, "line_chars": LINE_CHARS,
            "tabs": [[10 + i * (TAB_W + 4), 10, TAB_W, 30] for i in range(3)]}


def proof_lines(marks: Sequence[tuple[int, str]]) -> list[str]:
    return [f"SLOT {slot:02d} {kind}" for slot, kind in marks]


def proof_targets(window: Sequence[int]) -> dict[str, Any]:
    """Where on the screen the oracle clicks the section tabs and reads the title and the marked lines."""
    x, y = window[0], window[1]
    cx, cy = x + PROOF_CANVAS[0], y + PROOF_CANVAS[1]
    tabs = proof_layout()["tabs"]
    return {"tabs": [[x + tx + tw // 2, y + ty + th // 2] for tx, ty, tw, th in tabs],
            "title": [cx + PROOF_TITLE[0], cy + PROOF_TITLE[1]],
            "lines": [[cx + LINE_X, cy + LINE_Y0 + i * LINE_PITCH] for i in range(7)]}


def shown_title(image: np.ndarray, targets: Mapping[str, Any]) -> str:
    return read_text(image, targets["title"][0], targets["title"][1], PROOF_TITLE_SCALE, 12)


def read_marks(image: np.ndarray, targets: Mapping[str, Any]) -> list[tuple[int, str]]:
    """The marked lines of the section on screen, as (slot, kind); stops at the first blank line."""
    marks = []
    for x, y in targets["lines"]:
        text = read_text(image, x, y, LINE_SCALE, LINE_CHARS)
        if not text:
            break
        parts = text.split(" ", 2)
        if len(parts) == 3 and parts[0] == "SLOT" and parts[1].isdigit() and parts[2] in MARKS:
            marks.append((int(parts[1]), parts[2]))
    return marks
