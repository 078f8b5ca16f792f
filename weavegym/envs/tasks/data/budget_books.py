"""The books of Weave-Data-6 (no TASK here): cost centres, a year's ledger, the board's budgets and their chart.

Everything a seed decides is made here, guest-free, so that setup and the tests share it: the cost centres
(codes the chart shows, non-ASCII names only the ledger holds, which one is closed), the ledger's postings
(invoices, credit notes and reversals over the whole year, so a quarter's actual needs a date filter and
signed sums), the budgets per quarter, and the Board pack window's geometry with how its dot-matrix labels
are read back from a screenshot (the oracle's eyes), so that the fixture and the oracle share one layout.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.envs.tasks.pixel_font import read_text

YEAR = 2026
QUARTERS = ("Q1", "Q2", "Q3", "Q4")
QUARTER_MONTHS = {1: ("January", "March"), 2: ("April", "June"), 3: ("July", "September"), 4: ("October", "December")}
# Names with accents (typed through keysyms), and names in a script without Latin letters (CJK or RTL): no name
# is a prefix of another, so a spreadsheet's completion of a column cannot turn one into another.
LATIN = ("Café Lumière", "Zürich Büro", "Łódź Magazyn", "São Paulo Vendas", "Malmö Lager", "Kraków Serwis",
         "Île-de-France Ventes", "Ålesund Fiskeri", "Córdoba Taller", "Brașov Atelier", "Reykjavík Þjónusta",
         "Göteborg Hamn", "Plzeň Výroba", "Düsseldorf Messe", "Señorío Bodega", "Nîmes Atelier")
CJK_RTL = ("東京支社", "大阪営業所", "서울 지점", "上海办公室", "مكتب دبي", "משרד חיפה")
KINDS = ("invoice", "credit_note", "reversal")
SCHEMA = ("CREATE TABLE cost_centres (code TEXT PRIMARY KEY, name TEXT NOT NULL, status TEXT NOT NULL, "
          "closed_on TEXT);"
          "CREATE TABLE postings (id INTEGER PRIMARY KEY, code TEXT NOT NULL, posted TEXT NOT NULL, "
          "kind TEXT NOT NULL, amount_cents INTEGER NOT NULL, reverses INTEGER, memo TEXT NOT NULL);")
MEMOS = ("SUPPLIES", "SERVICES", "TRAVEL", "RENT", "CONSULTING", "EQUIPMENT", "UTILITIES", "LICENCES")

# The Board pack's geometry (pixels inside its window): the fixture draws here, the oracle reads and clicks here.
WIDTH, HEIGHT = 700, 560
CANVAS = (10, 50, 680, 440)  # x, y, width, height in the window
TITLE_AT, TITLE_SCALE, TITLE_CHARS = (12, 10), 3, 14
LABEL_SCALE, CODE_CHARS, VALUE_CHARS = 2, 5, 5
VALUE_Y, TOP_Y, BASE_Y, CODE_Y = 56, 84, 380, 392  # the value row, the tallest bar's top, the baseline, the codes
FIRST_X, PITCH, BAR_W = 24, 74, 50
TABS = [[10 + i * 110, 10, 100, 30] for i in range(len(QUARTERS))]


def layout(bars: int) -> dict[str, Any]:
    """Where the Board pack puts everything; depends only on the bar count, which the chart shows anyway."""
    return {"width": WIDTH, "height": HEIGHT, "canvas": list(CANVAS), "title": list(TITLE_AT),
            "title_scale": TITLE_SCALE, "label_scale": LABEL_SCALE, "value_y": VALUE_Y, "top_y": TOP_Y,
            "base_y": BASE_Y, "code_y": CODE_Y, "bar_w": BAR_W, "tabs": TABS,
            "bars_x": [FIRST_X + i * PITCH for i in range(bars)]}


# -- the books -------------------------------------------------------------------------------------------------


def quarter_bounds(quarter: int) -> tuple[str, str]:
    """The first and last day of the quarter, as the ledger writes dates."""
    last = {1: "03-31", 2: "06-30", 3: "09-30", 4: "12-31"}[quarter]
    return f"{YEAR}-{(quarter - 1) * 3 + 1:02d}-01", f"{YEAR}-{last}"


def _day(rng: np.random.Generator, quarter: int) -> str:
    month = (quarter - 1) * 3 + 1 + int(rng.integers(3))
    return f"{YEAR}-{month:02d}-{int(rng.integers(1, 29)):02d}"


def _postings(rng: np.random.Generator, code: str) -> list[list[Any]]:
    """A centre's year: invoices, a few credit notes (negative), and reversals of earlier invoices (negative,
    posted up to a few weeks later, sometimes in the next quarter)."""
    rows: list[list[Any]] = []
    for quarter in range(1, 5):
        for _ in range(int(rng.integers(6, 11))):
            rows.append([code, _day(rng, quarter), "invoice", int(rng.integers(60_000, 1_100_000)), None,
                         MEMOS[int(rng.integers(len(MEMOS)))]])
        for _ in range(int(rng.integers(0, 3))):
            rows.append([code, _day(rng, quarter), "credit_note", -int(rng.integers(5_000, 200_000)), None,
                         "CREDIT NOTE"])
    return rows


def books(rng: np.random.Generator) -> dict[str, Any]:
    """The seed's cost centres, ledger rows, budgets and truth.

    Returns quarter (1-4), centres (code, name, status, closed_on, on_chart, budgets per quarter in whole euros),
    postings (the ledger's rows as setup writes them, ids from 1) and rows (the expected workbook: the open
    centres on the chart, in the chart's order, with budget, actual_cents and the variance in cents).
    """
    quarter = int(rng.integers(1, 5))
    charted = int(rng.integers(7, 10))  # 6-8 open centres and the closed one
    wide = [str(n) for n in rng.choice(CJK_RTL, size=int(rng.integers(1, 3)), replace=False)]
    latin = [str(n) for n in rng.choice(LATIN, size=charted + 2 - len(wide), replace=False)]
    # One CJK or RTL name is always an open centre's on the chart, so the agent types at least one.
    opened = [wide[0], *latin[:charted - 2]]
    opened = [opened[int(i)] for i in rng.permutation(len(opened))]
    closed = int(rng.integers(charted))
    rest = [*wide[1:], *latin[charted - 2:]]
    names = [unicodedata.normalize("NFC", n) for n in [*opened[:closed], rest[0], *opened[closed:], *rest[1:]]]
    codes = [f"CC{int(c)}" for c in rng.choice(np.arange(100, 900), size=len(names), replace=False)]
    centres = []
    for i, (code, name) in enumerate(zip(codes, names, strict=True)):
        is_closed = i == closed
        closed_on = _day(rng, quarter) if is_closed else None
        centres.append({"code": code, "name": name, "status": "closed" if is_closed else "open",
                        "closed_on": closed_on, "on_chart": i < charted})
    raw: list[list[Any]] = []
    for centre in centres:
        raw += _postings(rng, centre["code"])
    raw.sort(key=lambda row: row[1])
    rows = [[i + 1, *row] for i, row in enumerate(raw)]
    reversals = []
    invoices = [r for r in rows if r[3] == "invoice"]
    for pick in rng.choice(len(invoices), size=max(6, len(rows) // 25), replace=False):
        row = invoices[int(pick)]
        day = min(f"{YEAR}-12-31", _later(str(row[2]), int(rng.integers(3, 40))))
        reversals.append([row[1], day, "reversal", -int(row[4]), int(row[0]), f"REVERSES #{int(row[0])}"])
    postings = rows + [[len(rows) + i + 1, *r] for i, r in enumerate(sorted(reversals, key=lambda r: r[1]))]
    first, last = quarter_bounds(quarter)
    actual = {c["code"]: sum(int(p[4]) for p in postings if p[1] == c["code"] and first <= p[2] <= last)
              for c in centres}
    shown = [c for c in centres if c["on_chart"]]
    over = set(rng.choice([c["code"] for c in shown if c["status"] == "open"], size=int(rng.integers(2, 4)),
                          replace=False).tolist())
    for centre in shown:
        budgets = [int(round(float(rng.uniform(30_000, 95_000)), -2)) for _ in QUARTERS]
        euros = actual[centre["code"]] / 100
        ratio = float(rng.uniform(0.84, 0.97)) if centre["code"] in over else float(rng.uniform(1.03, 1.2))
        budgets[quarter - 1] = min(99_900, max(10_000, int(round(euros * ratio, -2))))
        centre["budgets"] = budgets
    expected = [{"code": c["code"], "name": c["name"], "budget": c["budgets"][quarter - 1],
                 "actual_cents": actual[c["code"]],
                 "variance_cents": actual[c["code"]] - c["budgets"][quarter - 1] * 100}
                for c in shown if c["status"] == "open"]
    return {"quarter": quarter, "centres": centres, "postings": postings, "rows": expected}


def _later(day: str, days: int) -> str:
    date = np.datetime64(day) + np.timedelta64(days, "D")
    return str(date)


def ledger_rows(world: Mapping[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    """The ledger's tables as setup inserts them."""
    return {"cost_centres": [(c["code"], c["name"], c["status"], c["closed_on"]) for c in world["centres"]],
            "postings": [tuple(p) for p in world["postings"]]}


def chart(world: Mapping[str, Any]) -> dict[str, Any]:
    """What the Board pack draws: the charted codes and each quarter's budgets (whole euros)."""
    shown = [c for c in world["centres"] if c["on_chart"]]
    return {"year": YEAR, "codes": [c["code"] for c in shown],
            "budgets": [[c["budgets"][q] for c in shown] for q in range(len(QUARTERS))]}


# -- read back off the screen ------------------------------------------------------------------------------------


def screen_targets(window: Sequence[int], bars: int) -> dict[str, Any]:
    """Where on the screen the oracle reads and clicks, from the Board pack's position and bar count alone."""
    x, y = window[0], window[1]
    cx, cy = x + CANVAS[0], y + CANVAS[1]
    lay = layout(bars)
    return {"tabs": [[x + bx + bw // 2, y + by + bh // 2] for bx, by, bw, bh in TABS],
            "title": [cx + TITLE_AT[0], cy + TITLE_AT[1]],
            "bars": [[cx + bx + BAR_W // 2, cy + BASE_Y - 16] for bx in lay["bars_x"]],
            "codes": [[cx + bx - 4, cy + CODE_Y] for bx in lay["bars_x"]],
            "values": [[cx + bx - 4, cy + VALUE_Y] for bx in lay["bars_x"]]}


def title_text(quarter: int) -> str:
    return f"BUDGET {QUARTERS[quarter - 1]} {YEAR}"


def shown_title(image: np.ndarray, targets: Mapping[str, Any]) -> str:
    return read_text(image, targets["title"][0], targets["title"][1], TITLE_SCALE, TITLE_CHARS)


def read_code(image: np.ndarray, targets: Mapping[str, Any], bar: int) -> str:
    x, y = targets["codes"][bar]
    return read_text(image, x, y, LABEL_SCALE, CODE_CHARS)


def read_value(image: np.ndarray, targets: Mapping[str, Any], bar: int) -> int | None:
    """The budget label above a bar (whole euros), or None while it is not shown."""
    x, y = targets["values"][bar]
    text = read_text(image, x, y, LABEL_SCALE, VALUE_CHARS)
    return int(text) if text.isdigit() and len(text) == VALUE_CHARS else None
