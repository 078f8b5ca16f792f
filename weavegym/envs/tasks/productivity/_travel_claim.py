"""What each seed of Weave-Productivity-7 varies, and where its Travel Desk window draws (no TASK).

Kept apart from the task module so that setup, the oracle and the tests share one plan of the trip (cities,
receipts, exchange rates with gaps, the travel policy), one money rule (amount x the last rate on or before the
receipt's date, rounded half up to the cent; a non-reimbursable category pays nothing; a city's per-receipt cap
limits meals and hotels) and one geometry of the window: the fixture draws at these positions, the oracle reads
and clicks there.

Receipts print their merchants and cities with their accents (CAFÉ MÜLLER, ŁÓDŹ GŁÓWNA): the dot-matrix font of
pixel_font.py has capitals only, so the receipts use a taller cell, two rows of diacritic marks above the
seven rows of pixel_font's glyph (plus a few letters with a stroke, Ł and Ø). The glyph table goes to the
fixture on stdin; the oracle reads it back with ``read_line``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import numpy as np

from weavegym.core.errors import TaskError
from weavegym.envs.tasks import pixel_font

# ---- the receipts' font: pixel_font's capitals with two rows of marks above -------------------------------------

BLANK = (".....", ".....")
MARKS = {"acute": ("...#.", "..#.."), "grave": (".#...", "..#.."), "circumflex": ("..#..", ".#.#."),
         "diaeresis": (".#.#.", "....."), "caron": (".#.#.", "..#.."), "ring": (".###.", ".#.#."),
         "dot": ("..#..", ".....")}
ACCENTED = {"Á": ("A", "acute"), "À": ("A", "grave"), "Â": ("A", "circumflex"), "Ä": ("A", "diaeresis"),
            "Å": ("A", "ring"), "É": ("E", "acute"), "È": ("E", "grave"), "Ê": ("E", "circumflex"),
            "Ë": ("E", "diaeresis"), "Ě": ("E", "caron"), "Í": ("I", "acute"), "Î": ("I", "circumflex"),
            "Ó": ("O", "acute"), "Ô": ("O", "circumflex"), "Ö": ("O", "diaeresis"), "Ú": ("U", "acute"),
            "Ü": ("U", "diaeresis"), "Û": ("U", "circumflex"), "Č": ("C", "caron"), "Ř": ("R", "caron"),
            "Š": ("S", "caron"), "Ž": ("Z", "caron"), "Ý": ("Y", "acute"), "Ć": ("C", "acute"),
            "Ń": ("N", "acute"), "Ś": ("S", "acute"), "Ź": ("Z", "acute"), "Ż": ("Z", "dot")}
STROKED = {"Ł": (".#...", ".#...", ".#.#.", ".##..", "##...", ".#...", ".####"),
           "Ø": (".####", "#..##", "#.#.#", "#.#.#", "#.#.#", "##..#", "####.")}
CELL_H = 9


def glyphs() -> dict[str, list[str]]:
    """{character: its nine rows of five cells}: the table the fixture draws with and ``read_line`` decodes."""
    table = {ch: [*BLANK, *rows] for ch, rows in pixel_font.GLYPHS.items()}
    for ch, (base, mark) in ACCENTED.items():
        table[ch] = [*MARKS[mark], *pixel_font.GLYPHS[base]]
    for ch, rows in STROKED.items():
        table[ch] = [*BLANK, *rows]
    return table


GLYPHS = glyphs()
_BY_ROWS = {tuple(rows): ch for ch, rows in GLYPHS.items()}


def cells(text: str, x: int, y: int, scale: int) -> list[tuple[int, int, int, int]]:
    """The lit cells of ``text`` at (x, y) (what the fixture fills), for tests and the host's own drawing."""
    out = []
    for index, ch in enumerate(text):
        left = x + index * pixel_font.ADVANCE * scale
        for row, line in enumerate(GLYPHS[ch]):
            for column, cell in enumerate(line):
                if cell == "#":
                    out.append((left + column * scale, y + row * scale, left + (column + 1) * scale,
                                y + (row + 1) * scale))
    return out


def read_line(image: Any, x: int, y: int, scale: int, count: int) -> str:
    """Decode ``count`` receipt characters drawn at (x, y) from a screenshot, trailing blanks cut ('?' = no glyph)."""
    height, width = len(image), len(image[0]) if len(image) else 0
    half, chars = scale // 2, []
    for index in range(count):
        left = x + index * pixel_font.ADVANCE * scale
        rows = []
        for row in range(CELL_H):
            py = y + row * scale + half
            line = ""
            for column in range(pixel_font.GLYPH_W):
                px = left + column * scale + half
                lit = 0 <= py < height and 0 <= px < width and int(sum(int(v) for v in image[py][px][:3])) < 384
                line += "#" if lit else "."
            rows.append(line)
        chars.append(_BY_ROWS.get(tuple(rows), pixel_font.UNKNOWN))
    return "".join(chars).rstrip(" ")


# ---- the Travel Desk window's geometry (pixels inside the window) -------------------------------------------------

TITLE, HEADING, PORTAL_HEADING = "Travel Desk", "RECEIPT VIEWER", "CLAIMS PORTAL"
SCALE, HEADING_AT, PORTAL_HEADING_AT = 2, (16, 10), (16, 392)
DESK_AT, DESK_SIZE = (716, 40), (556, 640)
CALC_AT, CALC_SIZE = (0, 40), (700, 640)
PAPER = (16, 34, 524, 192)  # the receipt: [x, y, width, height]
RECEIPT_TEXT, RECEIPT_LINE_H, RECEIPT_LINES, RECEIPT_CHARS = (30, 44), 29, 6, 41
SHOW_BUTTON, LOG_ENTRY, LOG_BUTTON = (16, 252, 150, 32), (180, 252, 180, 32), (372, 252, 168, 32)
LOG_LABEL = (180, 230)
LOG_STATUS, STATUS_CHARS = (24, 300), 42
TOTAL_LABEL, TOTAL_ENTRY, SUBMIT_BUTTON = (180, 416), (180, 438, 180, 32), (372, 438, 168, 32)
PORTAL_STATUS, PORTAL_LINE_H, PORTAL_LINES = (24, 490), 28, 3


def layout() -> dict[str, Any]:
    """Where the Travel Desk puts everything; boxes are [x, y, width, height] in the window."""
    return {"title": TITLE, "heading": HEADING, "heading_at": list(HEADING_AT), "portal_heading": PORTAL_HEADING,
            "portal_heading_at": list(PORTAL_HEADING_AT), "scale": SCALE, "size": list(DESK_SIZE),
            "paper": list(PAPER), "receipt_text": list(RECEIPT_TEXT), "receipt_line_h": RECEIPT_LINE_H,
            "show_button": list(SHOW_BUTTON), "log_label": list(LOG_LABEL), "log_entry": list(LOG_ENTRY),
            "log_button": list(LOG_BUTTON), "log_status": list(LOG_STATUS), "total_label": list(TOTAL_LABEL),
            "total_entry": list(TOTAL_ENTRY), "submit_button": list(SUBMIT_BUTTON),
            "portal_status": list(PORTAL_STATUS), "portal_line_h": PORTAL_LINE_H}


def centre(origin: Sequence[int], box: Sequence[int]) -> list[int]:
    return [origin[0] + box[0] + box[2] // 2, origin[1] + box[1] + box[3] // 2]


def origin(image: Any, near: Sequence[int], reach: int = 40) -> tuple[int, int] | None:
    """The desk's top-left on screen, where its heading reads back near ``near``; None while not drawn."""
    return pixel_font.find_drawn(image, HEADING, near, HEADING_AT, SCALE, reach=reach)


def read_receipt(image: Any, at: Sequence[int]) -> list[str]:
    return [read_line(image, at[0] + RECEIPT_TEXT[0], at[1] + RECEIPT_TEXT[1] + i * RECEIPT_LINE_H, SCALE,
                      RECEIPT_CHARS) for i in range(RECEIPT_LINES)]


def read_log_status(image: Any, at: Sequence[int]) -> str:
    return pixel_font.read_text(image, at[0] + LOG_STATUS[0], at[1] + LOG_STATUS[1], SCALE, STATUS_CHARS)


def read_portal(image: Any, at: Sequence[int]) -> list[str]:
    return [pixel_font.read_text(image, at[0] + PORTAL_STATUS[0], at[1] + PORTAL_STATUS[1] + i * PORTAL_LINE_H,
                                 SCALE, STATUS_CHARS) for i in range(PORTAL_LINES)]


# ---- the trip ------------------------------------------------------------------------------------------------------

MEALS, HOTEL, TRAIN, TAXI, BAR = "MEALS", "HOTEL", "TRAIN", "TAXI", "BAR"
CATEGORY_RULES = ((MEALS, 1), (HOTEL, 1), (TRAIN, 1), (TAXI, 1), (BAR, 0), ("MINIBAR", 0), ("LAUNDRY", 0),
                  ("PARKING", 1))
EUR_RANGE = {MEALS: (14, 78), HOTEL: (85, 230), TRAIN: (18, 95), TAXI: (9, 48), BAR: (8, 42)}
# city: (currency, {category: merchant}). No merchant is a prefix of another (Calc's AutoInput would complete it).
CITIES: dict[str, tuple[str, dict[str, str]]] = {
    "WIEN": ("EUR", {MEALS: "CAFÉ MÜLLER", HOTEL: "HOTEL KÄRNTNERHOF", TRAIN: "ÖBB WIEN HBF",
                     BAR: "HEURIGER ZUM GRÜNEN BAUM", TAXI: "TAXI FUNK DÖBLING"}),
    "PARIS": ("EUR", {MEALS: "CRÊPERIE SAINT-MALO", HOTEL: "HÔTEL DES ÉCOLES", TAXI: "TAXI G7 ÉTOILE",
                      BAR: "BAR À VINS LE ZINC", TRAIN: "SNCF GARE DU NORD"}),
    "KRAKÓW": ("PLN", {MEALS: "PIEROGARNIA ŻAK", HOTEL: "HOTEL WAWEL ŚRÓDMIEŚCIE", TAXI: "TAXI ŁOBZÓW",
                       BAR: "PUB POD BARANAMI", TRAIN: "PKP KRAKÓW GŁÓWNY"}),
    "ŁÓDŹ": ("PLN", {TRAIN: "ŁÓDŹ GŁÓWNA", MEALS: "RESTAURACJA ŻUREK", HOTEL: "HOTEL PIOTRKOWSKA",
                     BAR: "KLUB ŚWIATŁO", TAXI: "TAXI BAŁUTY"}),
    "ZÜRICH": ("CHF", {MEALS: "BÄCKEREI STÄHELI", HOTEL: "HOTEL ZÜRICHBERG", TRAIN: "SBB ZÜRICH HB",
                       BAR: "KRONENHALLE BAR", TAXI: "TAXI 444 ZÜRI"}),
    "PRAHA": ("CZK", {MEALS: "KAVÁRNA SLAVIA", HOTEL: "HOTEL ČERNÝ SLON", TAXI: "TAXI PRAŽSKÁ",
                      BAR: "PIVNICE U ČERNÉHO VOLA", TRAIN: "ČD PRAHA HLAVNÍ"}),
    "KØBENHAVN": ("DKK", {MEALS: "SMØRREBRØD HUSET", HOTEL: "HOTEL NYHAVN GÅRD", TRAIN: "DSB KØBENHAVN H",
                          BAR: "VINBAR SØNDERBRO", TAXI: "DANTAXI NØRREBRO"}),
    "MALMÖ": ("SEK", {MEALS: "KAFÉ STRÖMMEN", HOTEL: "HOTELL SÖDERGÅRD", TRAIN: "SKÅNETRAFIKEN",
                      BAR: "BAR MÄSTERLOTSEN", TAXI: "TAXI SKÅNE"}),
}
BASE_RATE = {"PLN": 0.2312, "CHF": 1.0623, "CZK": 0.03981, "DKK": 0.13405, "SEK": 0.08712}
CENT = Decimal("0.01")
N_RECEIPTS = (6, 9)  # at least, below
N_FLAGGED = 2


def money(value: Decimal | str | float) -> str:
    return str(Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_UP))


def converted(amount: str, rate: str) -> str:
    """amount x rate, rounded half up to the cent."""
    return money(Decimal(amount) * Decimal(rate))


def rate_on(rates: Mapping[str, Sequence[tuple[str, str]]], currency: str, day: str) -> str | None:
    """The last rate of ``currency`` on or before ``day`` ("1" for EUR); None when the table has none."""
    if currency == "EUR":
        return "1"
    before = [r for d, r in rates.get(currency, ()) if d <= day]
    return before[-1] if before else None


def reimbursed(eur: str, category: str, city: str, rules: Mapping[str, int],
               caps: Mapping[tuple[str, str], str]) -> str:
    if not rules.get(category, 0):
        return "0.00"
    cap = caps.get((city, category))
    return money(min(Decimal(eur), Decimal(cap))) if cap is not None else money(eur)


def _tie(amount: str, rate: str) -> bool:
    """True when amount x rate sits exactly on a half cent (every rounding rule must agree)."""
    return (Decimal(amount) * Decimal(rate) * 100) % 1 == Decimal("0.5")


def _try_plan(rng: np.random.Generator) -> dict[str, Any] | None:
    by_currency: dict[str, list[str]] = {}
    for city, (currency, _m) in CITIES.items():
        by_currency.setdefault(currency, []).append(city)
    currencies = [str(c) for c in rng.choice(sorted(by_currency), 3, replace=False)]
    if sum(c != "EUR" for c in currencies) < 2:
        return None
    cities = [str(rng.choice(by_currency[c])) for c in currencies]
    start = dt.date(2026, int(rng.integers(2, 11)), int(rng.integers(1, 20)))
    n = int(rng.integers(N_RECEIPTS[0], N_RECEIPTS[1]))
    # each city a stay of 2-4 days, one after the other
    stays, day = [], start
    for city in cities:
        length = int(rng.integers(2, 5))
        stays.append((city, [day + dt.timedelta(days=i) for i in range(length)]))
        day += dt.timedelta(days=length)
    counts = [2, 2, 2]
    for _ in range(n - 6):
        counts[int(rng.integers(3))] += 1
    receipts = []
    for (city, days), count in zip(stays, counts, strict=True):
        currency, merchants = CITIES[city]
        kinds = [str(k) for k in rng.choice(sorted(merchants), count, replace=False)] if count <= len(merchants) \
            else None
        if kinds is None:
            return None
        for kind in kinds:
            receipts.append({"city": city, "currency": currency, "category": kind, "merchant": merchants[kind],
                             "date": str(days[int(rng.integers(len(days)))])})
    receipts.sort(key=lambda r: (r["date"], r["merchant"]))
    if not any(r["category"] == BAR for r in receipts):
        return None
    # exchange rates: business days around the trip, some missing
    first, last = start - dt.timedelta(days=7), day + dt.timedelta(days=7)
    rates: dict[str, list[tuple[str, str]]] = {}
    receipt_days = {r["date"] for r in receipts}
    for currency in currencies:
        if currency == "EUR":
            continue
        value, rows = BASE_RATE[currency] * float(rng.uniform(0.95, 1.05)), []
        d = first
        while d <= last:
            value *= float(rng.uniform(0.985, 1.015))
            skip = d.weekday() >= 5 or rng.random() < 0.2 or (str(d) in receipt_days and rng.random() < 0.45)
            if not skip:
                rows.append((str(d), f"{value:.5f}"))
            d += dt.timedelta(days=1)
        rates[currency] = rows
    gaps = [r for r in receipts if r["currency"] != "EUR" and r["date"] not in {d for d, _ in rates[r["currency"]]}]
    if not gaps:
        return None
    caps: dict[tuple[str, str], str] = {}
    for city in cities:
        caps[(city, MEALS)] = str(int(rng.integers(7, 11)) * 5)
        caps[(city, HOTEL)] = str(int(rng.integers(22, 33)) * 5)
    rules = dict(CATEGORY_RULES)
    capped_at = int(rng.choice([i for i, r in enumerate(receipts) if r["category"] in (MEALS, HOTEL)] or [-1]))
    if capped_at < 0:
        return None
    for i, r in enumerate(receipts):
        rate = rate_on(rates, r["currency"], r["date"])
        if rate is None:
            return None
        cap = caps.get((r["city"], r["category"]))
        low, high = EUR_RANGE[r["category"]]
        if cap is not None:  # below the cap, or above it for the one that is capped
            low, high = (int(cap) + 6, int(cap) + 60) if i == capped_at else (low, min(high, int(cap) - 3))
        for _attempt in range(50):
            eur = float(rng.uniform(low, high))
            amount = money(eur / float(rate))
            if not _tie(amount, rate) and Decimal(amount) > 0:
                break
        else:
            return None
        r["amount"], r["rate"] = amount, rate
        r["eur"] = converted(amount, rate)
        r["reimbursed"] = reimbursed(r["eur"], r["category"], r["city"], rules, caps)
    paying = [i for i, r in enumerate(receipts) if Decimal(r["reimbursed"]) > 0]
    flagged = sorted(int(i) + 1 for i in rng.choice(paying, N_FLAGGED, replace=False))
    for number, r in enumerate(receipts, 1):
        r["number"] = number
        r["lines"] = [f"RECEIPT {number} OF {len(receipts)}", r["merchant"], r["city"], f"DATE {r['date']}",
                      f"CATEGORY {r['category']}", f"TOTAL {r['amount']} {r['currency']}"]
    total = money(sum(Decimal(r["reimbursed"]) for r in receipts))
    return {"cities": cities, "receipts": receipts, "rates": rates, "caps": caps, "rules": rules,
            "flagged": flagged, "total": total}


def plan(rng: np.random.Generator) -> dict[str, Any]:
    """One seed's trip: the receipts with their money, the rates table, the policy, the total and the receipts
    the auditor will ask to justify."""
    for _attempt in range(500):
        drawn = _try_plan(rng)
        if drawn is not None:
            for r in drawn["receipts"]:
                missing = "".join(ch for line in r["lines"] for ch in line if ch not in GLYPHS)
                if missing:
                    raise TaskError(f"Weave-Productivity-7: no glyph for {missing!r}")
            return drawn
    raise TaskError("Weave-Productivity-7: no trip drawn")


# ---- the oracle's reading of a receipt ------------------------------------------------------------------------------

def parse_receipt(lines: Sequence[str]) -> dict[str, str] | None:
    """{"number", "merchant", "city", "date", "category", "amount", "currency"} of a receipt's drawn lines."""
    if len(lines) < 6 or not lines[0].startswith("RECEIPT "):
        return None
    try:
        number = lines[0].split()[1]
        date = lines[3].removeprefix("DATE ")
        category = lines[4].removeprefix("CATEGORY ")
        amount, currency = lines[5].removeprefix("TOTAL ").split()
    except (IndexError, ValueError):
        return None
    if "?" in "".join(lines):
        return None
    return {"number": number, "merchant": lines[1], "city": lines[2], "date": date, "category": category,
            "amount": amount, "currency": currency}
