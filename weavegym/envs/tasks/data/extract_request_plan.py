"""What each seed of Weave-Data-5 varies, what its requester says, and where its targets board draws (no TASK).

Kept apart from the task module so that setup, the oracle and the tests share one plan of the data and one
geometry of the board: the fixture draws at these positions and the oracle reads and clicks there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from typing import Any

import numpy as np

from weavegym.envs.simulated_user import ChangeOfMind, Topic, UserScript
from weavegym.envs.tasks import pixel_font

BOARD_TITLE = "Sales Targets Board"
OPENING = "Hi! Can you pull the numbers for my review?"


REGIONS = ("NORTH", "SOUTH", "EAST", "WEST", "CENTRAL", "COAST", "METRO", "ALPINE")
LINES = ("Outdoor", "Kitchen", "Garden", "Office", "Lighting", "Bath")
REQUESTERS = ("Maya", "Tom", "Priya", "Lukas", "Sofia", "Omar")
MONTHS = {1: "January to March", 2: "April to June", 3: "July to September", 4: "October to December"}
NET, GROSS = "net", "gross"
# Per region and quarter, in cents: (net, gross) of completed orders, then (net, gross) of every order.
NET_DONE, GROSS_DONE, NET_ALL, GROSS_ALL = range(4)
FIGURES = {NET_DONE: "net revenue", GROSS_DONE: "gross revenue", NET_ALL: "net revenue with the cancelled orders",
           GROSS_ALL: "gross revenue with the cancelled orders"}

# The board's geometry (pixels inside its window): the fixture draws here, the oracle reads and clicks here.
SCALE, WIDTH, HEADING_X, HEADING_Y = 2, 480, 16, 12
COLUMNS = (16, 130, 216, 302, 388)
NAME_CHARS, NUMBER_CHARS = 9, 7  # what fits before the next column: a target has 7 digits at most
SHOW, HEAD_Y, FIRST_ROW_Y, ROW_H, BOARD_ROWS = [16, 38, 150, 32], 86, 114, 30, 5
FIELDS = (("regions", "Regions"), ("period", "Period (e.g. Q1 2024)"), ("total", "Total revenue (EUR)"),
          ("attainment", "Attainment %"))
FORM_Y = FIRST_ROW_Y + BOARD_ROWS * ROW_H + 14
FIELD_X, FIELD_W, FIELD_H, FIELD_STEP = 200, 264, 30, 38



def board_layout(x: int, y: int) -> dict[str, Any]:
    """Where the window puts everything; boxes are [x, y, width, height] in the window."""
    fields = [[FIELD_X, FORM_Y + 32 + i * FIELD_STEP, FIELD_W, FIELD_H] for i in range(len(FIELDS))]
    send = [WIDTH - 16 - 150, fields[-1][1] + FIELD_STEP + 4, 150, 34]
    return {"title": BOARD_TITLE, "width": WIDTH, "height": send[1] + send[3] + 14, "x": x, "y": y,
            "scale": SCALE, "heading_x": HEADING_X, "heading_y": HEADING_Y, "columns": list(COLUMNS),
            "show": SHOW, "head_y": HEAD_Y, "row_y": [FIRST_ROW_Y + i * ROW_H for i in range(BOARD_ROWS)],
            "form_y": FORM_Y, "labels": [list(f) for f in FIELDS], "fields": fields, "send": send,
            "status_y": send[1] + 8}


def heading(year: int) -> str:
    return f"SALES TARGETS {year} - EUR"


# ---- what each seed varies ---------------------------------------------------------------------------------

def _orders(rng: np.random.Generator, year: int, regions: Sequence[str]) -> list[tuple[Any, ...]]:
    """Two years of orders: (id, order_date, region, product_line, units, gross_cents, discount_cents, status)."""
    rows = []
    for y in (year - 1, year):
        n, days = int(rng.integers(2200, 2800)), (date(y + 1, 1, 1) - date(y, 1, 1)).days
        weights = rng.uniform(0.6, 1.6, len(regions))
        day = rng.integers(0, days, n)
        where = rng.choice(len(regions), n, p=weights / weights.sum())
        line = rng.integers(0, len(LINES), n)
        units = rng.integers(1, 25, n)
        gross = units * rng.integers(900, 12000, n)
        discount = gross * rng.choice([0, 0, 0, 5, 10, 15, 20], n) // 100
        cancelled = rng.random(n) < 0.08
        for i in np.argsort(day, kind="stable"):
            rows.append((str(date(y, 1, 1) + timedelta(days=int(day[i]))), regions[where[i]].title(),
                         LINES[line[i]], int(units[i]), int(gross[i]), int(discount[i]),
                         "cancelled" if cancelled[i] else "completed"))
    return [(i + 1, *row) for i, row in enumerate(rows)]


def quarter_sums(orders: Sequence[tuple[Any, ...]], year: int) -> dict[str, list[list[int]]]:
    """{REGION: [[net, gross, net incl. cancelled, gross incl. cancelled] per quarter]} of ``year``, in cents."""
    sums: dict[str, list[list[int]]] = {}
    for _id, day, region, _line, _units, gross, discount, status in orders:
        if not day.startswith(f"{year}-"):
            continue
        cell = sums.setdefault(region.upper(), [[0] * 4 for _ in range(4)])[(int(day[5:7]) - 1) // 3]
        done = status == "completed"
        for index, value, counts in ((NET_DONE, gross - discount, done), (GROSS_DONE, gross, done),
                                     (NET_ALL, gross - discount, True), (GROSS_ALL, gross, True)):
            cell[index] += value if counts else 0
    return sums


def plan(rng: np.random.Generator) -> dict[str, Any]:
    """One seed's request: the data, the board's targets, the hidden answers and the change of mind."""
    requester = REQUESTERS[int(rng.integers(len(REQUESTERS)))]
    year = int(rng.integers(2023, 2026))
    regions = [str(r) for r in rng.choice(REGIONS, BOARD_ROWS, replace=False)]
    orders = _orders(rng, year, regions)
    sums = quarter_sums(orders, year)
    targets = {r: [int(round(sums[r][q][NET_DONE] / 100 * rng.uniform(0.8, 1.2), -3)) for q in range(4)]
               for r in regions}
    first, second = (regions[int(i)] for i in rng.choice(BOARD_ROWS, 2, replace=False))
    quarter, other = (int(q) + 1 for q in rng.choice(4, 2, replace=False))
    change = "region" if rng.random() < 0.5 else "period"
    final_regions = sorted([first, second]) if change == "region" else [first]
    final_quarter = other if change == "period" else quarter
    return {"requester": requester, "year": year, "regions": regions, "orders": orders, "sums": sums,
            "targets": targets, "metric": NET if rng.random() < 0.5 else GROSS, "change": change,
            "first_regions": [first], "final_regions": final_regions, "first_quarter": quarter,
            "final_quarter": final_quarter, "added_region": second, "other_quarter": other}


def expected_rows(plan_: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """{REGION: (revenue in cents, target in euros)} of the extract the requester finally wants."""
    figure = NET_DONE if plan_["metric"] == NET else GROSS_DONE
    q = plan_["final_quarter"] - 1
    return {r: (plan_["sums"][r][q][figure], plan_["targets"][r][q]) for r in plan_["final_regions"]}


def user_script(p: Mapping[str, Any]) -> UserScript:
    """What the requester says. Region, quarter and metric are hidden: answered only when asked."""
    first, added, year = p["first_regions"][0].title(), p["added_region"].title(), p["year"]
    q, other = p["first_quarter"], p["other_quarter"]
    metric = ("Net revenue, please: what the customers paid after discounts (gross minus discount), completed "
              "orders only." if p["metric"] == NET else
              "Gross revenue, please: the value before any discount, completed orders only.")
    topics = (
        Topic("region", (("region", "area", "territory", "market", "branch", "location", "geography"),),
              f"Just the {first} region, please.", hidden=True),
        Topic("period", (("period", "quarter", "year", "month", "date", "time frame", "timeframe", "time range",
                          "q1", "q2", "q3", "q4", "fiscal", "how far back"),),
              f"Q{q} {year}, that is {MONTHS[q]}.", hidden=True),
        Topic("metric", (("metric", "measure", "kpi", "gross", "net", "revenue", "turnover", "units", "discount",
                          "cancelled", "canceled", "which numbers", "what numbers", "which figures",
                          "what figures"),), metric, hidden=True),
        Topic("format", (("format", "column", "csv", "file", "layout", "spreadsheet", "excel", "table"),),
              "A CSV as described in your instructions is perfect: one row per region."),
        Topic("targets", (("target", "goal", "quota", "attainment"),),
              "The targets are on the Sales Targets Board on your desktop; attainment is revenue divided by "
              "target, in percent."),
    )
    if p["change"] == "region":
        change = ChangeOfMind(
            after_topic="region", topic="region",
            message=f"Oh, one more thing: I took over {added} last month, so please add the {added} region too.",
            new_reply=f"The {first} and {added} regions, one row each.")
    else:
        change = ChangeOfMind(
            after_topic="period", topic="period",
            message=f"Sorry, I mixed that up: my review is about Q{other} {year}, not Q{q}.",
            new_reply=f"Q{other} {year}, that is {MONTHS[other]}.")
    return UserScript(opening=OPENING, topics=topics, change_of_mind=change, name=p["requester"])


# ---- reading the board off the screen (the oracle's eyes; setup's readiness check) -------------------------

def board_origin(image: np.ndarray, window: Sequence[int], year: int, reach: int = 12) -> tuple[int, int] | None:
    """The canvas's top-left on screen, found where the heading reads back near the window's geometry (the
    window manager may place a window a few pixels off), or None while it is not drawn."""
    return pixel_font.find_drawn(image, heading(year), window, (HEADING_X, HEADING_Y), SCALE, reach=reach)


def read_board(image: np.ndarray, window: Sequence[int], year: int) -> dict[str, list[int]] | None:
    """{REGION: [Q1..Q4 targets]} as the board shows them, or None when any cell does not read as a number."""
    origin = board_origin(image, window, year)
    if origin is None:
        return None
    board = {}
    for i in range(BOARD_ROWS):
        y = origin[1] + FIRST_ROW_Y + i * ROW_H
        cells = [pixel_font.read_text(image, origin[0] + x, y, SCALE, NAME_CHARS if x == COLUMNS[0] else NUMBER_CHARS)
                 for x in COLUMNS]
        if not cells[0].isalpha() or not all(c.isdigit() for c in cells[1:]):
            return None
        board[cells[0]] = [int(c) for c in cells[1:]]
    return board
