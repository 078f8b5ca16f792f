"""What each seed of Weave-Docs-5 varies, the rent maths, what its requester says, and where its Rent Board
draws (no TASK).

Kept apart from the task module so that setup, the oracle and the tests share one plan of the rent roll, one
rule for the new rents and one geometry of the board: the fixture draws at these positions and the oracle
reads and clicks there.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from weavegym.core.errors import TaskError
from weavegym.envs.simulated_user import ChangeOfMind, Topic, UserScript
from weavegym.envs.tasks import pixel_font

BOARD_TITLE = "Rent Board"
HEADING = "RENT BOARD - SIGNED DECISIONS"
OPENING = "Hi! Could you get the rent notices out for me?"
NOTICES = 6  # notices the final request asks for (each one a declared deliverable)
SIGN, CODE = "sign", "code"
CURRENCIES = (("€", "EUR"), ("£", "GBP"))
CHANGES = ("date", "building")

BUILDINGS = ("Linden Court", "Harbour View", "Maple House", "Riverside Lofts", "Oakwood Terrace", "Kingsway Court",
             "Birchfield House", "Canal Wharf", "Station Yard", "Orchard Rise")
REQUESTERS = ("Agnès", "Mateo", "Ingrid", "Tomasz", "Leila", "Hamish")
SIGNATORIES = ("H. VOSS", "M. OKAFOR", "E. LINDQVIST", "R. DUARTE", "S. NAKAMURA")
FIRST = ("Zoë", "Renée", "Jürgen", "Søren", "Inés", "Łukasz", "François", "Chloé", "José", "Björn", "Małgorzata",
         "Ömer", "Zoltán", "Anaïs", "Siobhán", "Ewa", "Noémie", "Dagný", "Kübra", "Thérèse", "Mikaël", "Åsa",
         "Grzegorz", "Ana", "Paul", "Maria", "David", "Lena", "Omar", "Priya")
LAST = ("Ångström", "Dubois", "Weiß", "Kjær", "Muñoz", "Wójcik", "Lefèvre", "Martín", "Núñez", "Olafsson", "Nowak",
        "Çelik", "Kovács", "Pérès", "Ó Briain", "Żak", "Brontë", "Høeg", "Dvořák", "Šimić", "Ferreira", "Schmidt",
        "Kaya", "Costa", "Moreau", "Novák")

# The board's geometry (pixels inside its window): the fixture draws here, the oracle reads and clicks here.
SCALE, WIDTH, HEADING_X, HEADING_Y = 2, 520, 16, 12
NAME_X, PCT_X, CAP_X, NAME_CHARS, PCT_CHARS, CAP_CHARS = 28, 236, 330, 16, 5, 10
OPEN, PAGE, TITLE_Y, HEAD_Y, FIRST_ROW_Y, ROW_H = [16, 36, 220, 30], [12, 76, 496, 206], 88, 116, 142, 26
FIELDS = (("building", "Building"), ("effective", "Effective (YYYY-MM-DD)"), ("count", "Number of notices"),
          ("total", "Total of new rents"))
FORM_Y, FIELD_X, FIELD_W, FIELD_H, FIELD_STEP = 292, 214, 290, 30, 38

Tenant = tuple[str, str, str, int, str]  # (unit, building, tenant, rent in cents, lease end YYYY-MM-DD)


def board_layout(x: int, y: int, rows: int) -> dict[str, Any]:
    """Where the window puts everything for ``rows`` buildings; boxes are [x, y, width, height] in the window."""
    fields = [[FIELD_X, FORM_Y + 30 + i * FIELD_STEP, FIELD_W, FIELD_H] for i in range(len(FIELDS))]
    approve = [WIDTH - 16 - 170, fields[-1][1] + FIELD_STEP + 4, 170, 34]
    row_y = [FIRST_ROW_Y + i * ROW_H for i in range(rows)]
    return {"title": BOARD_TITLE, "width": WIDTH, "height": approve[1] + approve[3] + 14, "x": x, "y": y,
            "scale": SCALE, "heading": HEADING, "heading_x": HEADING_X, "heading_y": HEADING_Y, "open": OPEN,
            "page": PAGE, "title_y": TITLE_Y, "head_y": HEAD_Y, "row_y": row_y, "columns": [NAME_X, PCT_X, CAP_X],
            "sign_y": row_y[-1] + ROW_H + 8, "form_y": FORM_Y, "labels": [list(f) for f in FIELDS],
            "fields": fields, "approve": approve}


# ---- the rent maths ----------------------------------------------------------------------------------------

def new_rent(rent_cents: int, pct_tenths: int, cap: int) -> int:
    """The new rent in cents: the rise is rent x percent, at most ``cap`` whole units, and the sum is rounded
    down to a whole unit. Exact (integers), as the oracle's SQL computes it."""
    rise = min(Fraction(rent_cents * pct_tenths, 1000), Fraction(cap * 100))
    return int((rent_cents + rise) // 100) * 100


def eligible(tenants: Sequence[Tenant], building: str, effective: str) -> list[Tenant]:
    """The building's tenants whose lease ends on or after the effective date, by unit."""
    return sorted((t for t in tenants if t[1] == building and t[4] >= effective), key=lambda t: t[0])


def expected_notices(p: Mapping[str, Any], building: str, effective: str) -> dict[str, dict[str, Any]]:
    """{unit: {"tenant", "rent", "new"}} (cents) of the notices for ``building`` from ``effective``."""
    pct, cap = p["decisions"][building]
    return {t[0]: {"tenant": t[2], "rent": t[3], "new": new_rent(t[3], pct, cap)}
            for t in eligible(p["tenants"], building, effective)}


def _rounding_matters(rows: Sequence[Tenant], pct: int, cap: int) -> bool:
    """Every uncapped sum has cents (floats cannot tip the floor), and rounding down differs from rounding to
    the nearest unit for some tenant; the cap binds for two tenants and not for two others."""
    rises = [Fraction(t[3] * pct, 1000) for t in rows]
    capped = sum(r > cap * 100 for r in rises)
    exact = [t[3] + min(r, Fraction(cap * 100)) for t, r in zip(rows, rises, strict=True)]
    if any(r == cap * 100 for r in rises) or any(e % 100 == 0 for e, r in zip(exact, rises, strict=True)
                                                    if r < cap * 100):
        return False
    return 2 <= capped <= len(rows) - 2 and any(e % 100 >= 50 for e in exact)


# ---- what each seed varies ---------------------------------------------------------------------------------

def _month_end(day: dt.date, months: int) -> str:
    """The last day of the month ``months`` after ``day``'s month, ISO."""
    year, month = divmod(day.month - 1 + months, 12)
    year += day.year
    return dt.date(year, month + 1, calendar.monthrange(year, month + 1)[1]).isoformat()


def _names(rng: np.random.Generator, count: int) -> list[str]:
    names: list[str] = []
    while len(names) < count:
        name = f"{FIRST[int(rng.integers(len(FIRST)))]} {LAST[int(rng.integers(len(LAST)))]}"
        if name not in names:
            names.append(name)
    return names


def _units(rng: np.random.Generator, count: int) -> list[str]:
    every = [f"{floor}{door}" for floor in range(1, 6) for door in "ABCD"]
    return sorted(str(u) for u in rng.choice(every, count, replace=False))


def _rent(rng: np.random.Generator) -> int:
    return 100 * int(rng.integers(650, 2400)) + int(rng.choice([0, 0, 0, 50]))


def _building(rng: np.random.Generator, name: str, names: list[str], first: dt.date, final: dt.date,
              keep: int, stale: int) -> list[Tenant]:
    """A building's tenants: ``keep`` whose lease runs past ``final``, ``stale`` whose lease ends between
    ``first`` and ``final`` (they drop out with a later date), and one or two that ended before ``first``."""
    gone = int(rng.integers(1, 3))
    units = _units(rng, keep + stale + gone)
    order = rng.permutation(len(units))
    ends = [_month_end(final, int(rng.integers(1, 30))) for _ in range(keep)]
    ends += [_month_end(first, int(rng.integers(0, max(1, (final.month - first.month) % 12)))) for _ in range(stale)]
    ends += [_month_end(first, -int(rng.integers(1, 9))) for _ in range(gone)]
    return [(units[int(i)], name, names.pop(), _rent(rng), end) for i, end in zip(order, ends, strict=True)]


def plan(rng: np.random.Generator, seed: int) -> dict[str, Any]:
    """One seed's request: the rent roll, the board's decisions, the hidden answers and the change of mind.

    What the requester changes their mind about goes round by the seed (seeds 0, 3 and 6, the ones validated,
    show both kinds), the rest comes from ``rng``.
    """
    change = CHANGES[(seed // 3) % len(CHANGES)]
    sign, code = CURRENCIES[int(rng.integers(len(CURRENCIES)))]
    count = int(rng.integers(3, 5))
    buildings = [str(b) for b in rng.choice(BUILDINGS, count, replace=False)]
    first_b, other_b = buildings[0], buildings[1]
    start = dt.date(2026, int(rng.integers(2, 11)), 1)  # February..October
    later = dt.date(start.year, start.month + (2 if rng.random() < 0.5 else 1), 1)  # no year to carry
    dates = [start, later] if change == "date" else [start, start]
    final_b = other_b if change == "building" else first_b
    pcts = [int(p) for p in rng.choice(np.arange(20, 66), count, replace=False)]
    for _attempt in range(500):
        names = _names(rng, 60)
        tenants: list[Tenant] = []
        for b in buildings:
            final = b == final_b
            keep = NOTICES if final else int(rng.integers(4, 9))
            stale = int(rng.integers(1, 3)) if change == "date" else 0  # with one date, none drops out
            tenants += _building(rng, b, names, dates[0], dates[1], keep, stale)
        rows = eligible(tenants, final_b, dates[1].isoformat())
        rises = sorted(r[3] * pcts[buildings.index(final_b)] / 1000 for r in rows)
        low, high = int(rises[1] / 100) + 1, int(rises[-2] / 100) + 1
        cap = int(rng.integers(low, high)) if low < high else low
        caps = [cap if b == final_b else int(rng.integers(30, 121)) for b in buildings]
        accented = sum(any(ord(c) > 127 for c in r[2]) for r in rows)
        if len(rows) == NOTICES and accented >= 3 and _rounding_matters(rows, pcts[buildings.index(final_b)], cap):
            break
    else:
        raise TaskError("Weave-Docs-5: no rent roll whose maths tells the rules apart")
    order = rng.permutation(len(tenants))
    return {"requester": REQUESTERS[int(rng.integers(len(REQUESTERS)))], "sign": sign, "code": code,
            "style": SIGN if rng.random() < 0.5 else CODE, "change": change, "buildings": buildings,
            "decisions": {b: (p, c) for b, p, c in zip(buildings, pcts, caps, strict=True)},
            "tenants": [tenants[int(i)] for i in order], "first_building": first_b, "final_building": final_b,
            "first_date": dates[0].isoformat(), "final_date": dates[1].isoformat(),
            "resolution": f"{start.year}/{int(rng.integers(2, 40)):02d}",
            "signatory": SIGNATORIES[int(rng.integers(len(SIGNATORIES)))]}


def spoken_date(iso: str) -> str:
    day = dt.date.fromisoformat(iso)
    return f"{day.day} {calendar.month_name[day.month]} {day.year}"


def amount(cents: int, style: str, sign: str, code: str) -> str:
    """An amount as the requester wants it written: "€1283.00" or "EUR 1283.00"."""
    return f"{sign}{cents / 100:.2f}" if style == SIGN else f"{code} {cents / 100:.2f}"


def user_script(p: Mapping[str, Any]) -> UserScript:
    """What the requester says. Building, effective date and the amounts' style are hidden: answered only when
    asked; the change of mind moves the date or swaps the building."""
    example = amount(128300, p["style"], p["sign"], p["code"])
    style = ("With the currency sign, please" if p["style"] == SIGN else "With the currency code, please")
    topics = (
        Topic("building", (("building", "property", "block", "address", "which house", "complex", "estate",
                            "site"),),
              f"The notices are for {p['first_building']}.", hidden=True),
        Topic("date", (("date", "when", "effective", "take effect", "start", "starting", "from which", "month",
                        "day"),),
              f"The new rents take effect on {spoken_date(p['first_date'])}.", hidden=True),
        Topic("format", (("currency", "sign", "symbol", "code", "amount", "format", "how should", "written",
                          "euro", "pound"),),
              f"{style}: like {example}.", hidden=True),
        Topic("decision", (("percent", "percentage", "increase", "raise", "rise", "cap", "limit", "board",
                            "decision", "allowed"),),
              "The board's signed decision is in the Rent Board window on your desktop; use its increase and "
              "cap for the building."),
        Topic("tenants", (("tenant", "roster", "roll", "lease", "who", "exclude", "everyone"),),
              "Everyone in the rent roll whose lease runs until the effective date or later; a lease that ends "
              "before it gets no notice."),
    )
    if p["change"] == "date":
        change = ChangeOfMind(
            after_topic="date", topic="date",
            message=f"Sorry, I just heard from legal: we must give more notice, so make it effective "
                    f"{spoken_date(p['final_date'])}, not {spoken_date(p['first_date'])}.",
            new_reply=f"The new rents take effect on {spoken_date(p['final_date'])}.")
    else:
        change = ChangeOfMind(
            after_topic="building", topic="building",
            message=f"Oh wait, I mixed up my buildings: the notices are for {p['final_building']}, not "
                    f"{p['first_building']}.",
            new_reply=f"The notices are for {p['final_building']}.")
    return UserScript(opening=OPENING, topics=topics, change_of_mind=change, name=p["requester"])


# ---- reading the board off the screen (the oracle's eyes; setup's readiness check) -------------------------

def board_origin(image: np.ndarray, window: Sequence[int], reach: int = 12) -> tuple[int, int] | None:
    """The canvas's top-left on screen, found where the heading reads back near the window's geometry (the
    window manager may place a window a few pixels off), or None while it is not drawn."""
    return pixel_font.find_drawn(image, HEADING, window, (HEADING_X, HEADING_Y), SCALE, reach=reach)


def parse_cell(pct: str, cap: str) -> tuple[int, int] | None:
    """(percent in tenths, cap in whole units) from a row's cells ("3.5%", "EUR 60.00"), or None."""
    found_pct = re.fullmatch(r"(\d{1,2})\.(\d)%", pct)
    found_cap = re.fullmatch(r"[A-Z]{3} (\d{1,4})\.00", cap)
    if found_pct is None or found_cap is None:
        return None
    return int(found_pct.group(1)) * 10 + int(found_pct.group(2)), int(found_cap.group(1))


def read_decision(image: np.ndarray, window: Sequence[int], rows: int) -> dict[str, tuple[int, int]] | None:
    """{BUILDING (upper case): (percent in tenths, cap)} as the signed decision shows it, or None until every
    row reads back."""
    origin = board_origin(image, window)
    if origin is None:
        return None
    found = {}
    for i in range(rows):
        y = origin[1] + FIRST_ROW_Y + i * ROW_H
        name, pct, cap = (pixel_font.read_text(image, origin[0] + x, y, SCALE, n)
                          for x, n in ((NAME_X, NAME_CHARS), (PCT_X, PCT_CHARS), (CAP_X, CAP_CHARS)))
        cell = parse_cell(pct, cap)
        if not name.replace(" ", "").isalpha() or cell is None:
            return None
        found[name] = cell
    return found
