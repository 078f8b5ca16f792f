"""The books of Weave-Data-4 (no TASK here): a company ledger of several bank accounts and one month's statement.

Everything a seed decides is made here, guest-free, so that setup and the tests share it: the ledger's rows
(thousands, over most of a year and five accounts), the statement of one account for one month, which of the
statement's lines the ledger lacks, and, on an infeasible variant, the whole export batch it lost. It also
holds how the statement is drawn as dot-matrix text and read back from a screenshot (the oracle's eyes), so
that the fixture's lines and the oracle's parser are one format.

Why the two kinds of missing lines: bank charges (CHG) and interest (INT) never come through the bank's daily
export, so a reconciliation posts the ones the ledger lacks by hand; an exported transaction that is missing
means the export itself lost a batch, which no posting by hand may paper over.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.envs.tasks.pixel_font import read_text

YEAR = 2026
ALPHABET = "ABCDEFGHJKLMNPQRSTUWXYZ23456789"  # batch ids: no O/0, I/1 or V/U for a reader of the dot matrix
EXPORTED = ("TRF", "CRD", "DD")  # what the daily export carries
BY_HAND = ("CHG", "INT")  # what it never carries: the ledger gets these as MANUAL postings
PREFIX = {"TRF": "T", "CRD": "K", "DD": "D", "CHG": "C", "INT": "N"}
MEMOS = {"TRF": ("SUPPLIER PAYMENT", "CUSTOMER RECEIPT", "INTERCOMPANY"), "CRD": ("CARD PURCHASE",),
         "DD": ("DIRECT DEBIT",), "CHG": ("ACCOUNT FEE", "TRANSFER CHARGE", "CARD FEE"), "INT": ("CREDIT INTEREST",)}
ACCOUNT_NAMES = ("OPERATING", "PAYROLL", "TAX RESERVE", "COLLECTIONS", "SAVINGS")
MANUAL = "MANUAL"
NO_BATCH = "------"
SCHEMA = ("CREATE TABLE accounts (account TEXT PRIMARY KEY, name TEXT NOT NULL, opened TEXT NOT NULL, "
          "opening_cents INTEGER NOT NULL);"
          "CREATE TABLE entries (id INTEGER PRIMARY KEY, account TEXT NOT NULL, posted TEXT NOT NULL, "
          "batch TEXT NOT NULL, ref TEXT NOT NULL, kind TEXT NOT NULL, amount_cents INTEGER NOT NULL, "
          "memo TEXT NOT NULL);")

# The viewer's geometry (pixels inside its window): the fixture draws here, the oracle reads and clicks here.
WIDTH, HEIGHT = 760, 590
CANVAS = (10, 50, 740, 400)  # x, y, width, height in the window
LINE_SCALE, TITLE_SCALE = 2, 3
TITLE_AT = (12, 10)
SUMMARY_Y, SUMMARY_DY = 56, 30  # the summary's first line and its spacing
HEAD_Y, FIRST_Y, LINE_DY = 48, 72, 22  # a page's column heads, first line, spacing
PER_PAGE = 14
LINE_CHARS = 37
TITLE_CHARS = 10


def layout(pages: int) -> dict[str, Any]:
    """Where the viewer puts everything; depends only on the page count, which its buttons show anyway."""
    below = CANVAS[1] + CANVAS[3]
    return {"width": WIDTH, "height": HEIGHT, "canvas": list(CANVAS), "line_scale": LINE_SCALE,
            "title_scale": TITLE_SCALE, "title": list(TITLE_AT), "summary_y": SUMMARY_Y, "summary_dy": SUMMARY_DY,
            "head_y": HEAD_Y, "first_y": FIRST_Y, "line_dy": LINE_DY, "x": 12,
            "tabs": [[10, 10, 110, 30]] + [[130 + i * 100, 10, 90, 30] for i in range(pages)],
            "entry": [250, below + 12, 300, 30], "confirm": [10, below + 58, 260, 34],
            "flag": [290, below + 58, 220, 34], "status": [10, below + 104]}


# -- the books -------------------------------------------------------------------------------------------------


def _ids(rng: np.random.Generator, count: int, make: Any) -> list[str]:
    found: list[str] = []
    seen: set[str] = set()
    while len(found) < count:
        value = make(rng)
        if value not in seen:
            seen.add(value)
            found.append(value)
    return found


def _weekdays(month: int) -> list[int]:
    return [d for d in range(1, calendar.monthrange(YEAR, month)[1] + 1) if calendar.weekday(YEAR, month, d) < 5]


def _amount(rng: np.random.Generator, kind: str) -> int:
    """Signed cents: transfers either way, card and direct debits out, charges out, interest in."""
    if kind == "TRF":
        return int(rng.integers(5_000, 2_000_000)) * (1 if rng.random() < 0.6 else -1)
    low, high, sign = {"CRD": (500, 80_000, -1), "DD": (2_000, 300_000, -1), "CHG": (150, 4_500, -1),
                       "INT": (40, 6_000, 1)}[kind]
    return sign * int(rng.integers(low, high))


def _month(rng: np.random.Generator, month: int, busy: bool) -> list[dict[str, Any]]:
    """One account's lines of one month, by date: a few export batches a week, then charges and interest."""
    days = _weekdays(month)
    size = int(rng.integers(9, 12) if busy else rng.integers(12, 20))
    batch_days = sorted(int(d) for d in rng.choice(days, size=size, replace=False))
    lines = []
    for day in batch_days:
        for _ in range(int(rng.integers(2, 4) if busy else rng.integers(1, 6))):
            kind = EXPORTED[int(rng.choice(3, p=[0.5, 0.3, 0.2]))]
            lines.append({"day": day, "kind": kind, "amount": _amount(rng, kind), "batch": ""})
    extra = int(rng.integers(3, 6) if busy else rng.integers(1, 3))
    for i in range(extra):
        kind = "INT" if i == 1 else "CHG"
        day = days[-1] if i == 0 else int(rng.choice(days))
        lines.append({"day": day, "kind": kind, "amount": _amount(rng, kind), "batch": NO_BATCH})
    lines.sort(key=lambda line: (line["day"], line["kind"] in BY_HAND))
    return lines


def books(rng: np.random.Generator, feasible: bool) -> dict[str, Any]:
    """The seed's ledger, statement and truth.

    Returns accounts, entries (the ledger's rows as setup writes them), the statement (account, period,
    opening and closing cents, lines with date, batch, ref, kind, cents), the lines the ledger lacks, and the
    batch the export lost ("" on a feasible variant).
    """
    month = int(rng.integers(5, 12))
    numbers = _ids(rng, len(ACCOUNT_NAMES), lambda r: f"{int(r.integers(1000, 10000))}-"
                                                      f"{int(r.integers(1000, 10000))}-{int(r.integers(10, 100))}")
    asked = int(rng.integers(len(numbers)))
    accounts = [(number, name, f"{YEAR}-01-02", int(rng.integers(2_000_000, 25_000_000)))
                for number, name in zip(numbers, ACCOUNT_NAMES, strict=True)]
    months = {(a, m): _month(rng, m, busy=(a == asked and m == month)) for a in range(len(numbers))
              for m in range(1, month + 2)}
    count = sum(len(v) for v in months.values())
    batches = iter(_ids(rng, count, lambda r: "".join(ALPHABET[int(i)] for i in r.integers(len(ALPHABET), size=6))))
    refs = iter(_ids(rng, count, lambda r: f"{int(r.integers(10_000_000, 100_000_000))}"))
    for lines in months.values():
        day_batch: dict[int, str] = {}
        for line in lines:
            line["ref"] = PREFIX[line["kind"]] + next(refs)
            if line["batch"] != NO_BATCH:
                line["batch"] = day_batch.setdefault(line["day"], next(batches))
    statement_lines = [dict(line, date=f"{YEAR}-{month:02d}-{line['day']:02d}") for line in months[(asked, month)]]
    lost = _lost_batch(rng, statement_lines) if not feasible else ""
    missing = _missing(rng, statement_lines, lost)
    entries = []
    for (a, m), lines in sorted(months.items()):
        for line in lines:
            if a == asked and m == month and line["ref"] in missing:
                continue
            if m == month + 1 and line["day"] > 6:  # the export of the next month has only begun
                continue
            memo = MEMOS[line["kind"]][int(rng.integers(len(MEMOS[line["kind"]])))]
            batch = MANUAL if line["kind"] in BY_HAND else line["batch"]
            entries.append((numbers[a], f"{YEAR}-{m:02d}-{line['day']:02d}", batch, line["ref"], line["kind"],
                            line["amount"], memo))
    order = rng.permutation(len(entries))  # the ledger's ids follow posting order, not the bank's
    entries = [(i + 1, *entries[int(j)]) for i, j in enumerate(order)]
    before = sum(line["amount"] for (a, m), lines in months.items() if a == asked and m < month for line in lines)
    opening = accounts[asked][3] + before
    closing = opening + sum(line["amount"] for line in statement_lines)
    return {"month": month, "account": numbers[asked], "accounts": accounts, "entries": entries,
            "statement": {"account": numbers[asked], "month": month, "opening": opening, "closing": closing,
                          "lines": [{k: line[k] for k in ("date", "batch", "ref", "kind", "amount")}
                                    for line in statement_lines]},
            "missing": [line["ref"] for line in statement_lines if line["ref"] in missing], "lost": lost}


def _lost_batch(rng: np.random.Generator, lines: Sequence[Mapping[str, Any]]) -> str:
    """A batch of two or more lines, never the statement's first (an agent reading a failed query as "nothing
    found" would name that one)."""
    order = list(dict.fromkeys(line["batch"] for line in lines if line["batch"] != NO_BATCH))
    sizes = {b: sum(1 for line in lines if line["batch"] == b) for b in order}
    choices = [b for b in order[1:] if sizes[b] >= 2]
    return str(choices[int(rng.integers(len(choices)))])


def _missing(rng: np.random.Generator, lines: Sequence[Mapping[str, Any]], lost: str) -> set[str]:
    """The statement refs the ledger lacks: two or three charges or interest (at least one of them stays
    posted, so "every CHG and INT" is not the answer), plus every line of the lost batch."""
    by_hand = [line["ref"] for line in lines if line["kind"] in BY_HAND]
    picked = rng.choice(by_hand, size=min(len(by_hand) - 1, int(rng.integers(2, 4))), replace=False)
    return {str(r) for r in picked} | {line["ref"] for line in lines if lost and line["batch"] == lost}


def month_end(month: int) -> str:
    return f"{YEAR}-{month:02d}-{calendar.monthrange(YEAR, month)[1]:02d}"


# -- the statement as text, and read back ------------------------------------------------------------------------


def money(cents: int, grouped: bool = True) -> str:
    sign = "-" if cents < 0 else ""
    whole, part = divmod(abs(cents), 100)
    return f"{sign}{whole:,}.{part:02d}" if grouped else f"{sign}{whole}.{part:02d}"


def statement_text(statement: Mapping[str, Any]) -> dict[str, Any]:
    """What the viewer draws: the summary's lines and the pages' lines (dot-matrix text, upper case)."""
    month = statement["month"]
    last = calendar.monthrange(YEAR, month)[1]
    lines = [f"{line['date'][8:10]}.{line['date'][5:7]} {line['batch']:<6} {line['ref']:<9} {line['kind']:<3} "
             f"{money(line['amount']):>10}" for line in statement["lines"]]
    pages = [lines[i:i + PER_PAGE] for i in range(0, len(lines), PER_PAGE)]
    summary = [f"ACCOUNT {statement['account']}", f"PERIOD 01.{month:02d}.{YEAR} - {last}.{month:02d}.{YEAR}",
               f"OPENING BALANCE {money(statement['opening']):>14}",
               f"CLOSING BALANCE {money(statement['closing']):>14}",
               f"LINES {len(lines)} ON {len(pages)} PAGES"]
    return {"summary": summary, "pages": pages, "heads": "DATE  BATCH  REF       TYP     AMOUNT"}


LINE = re.compile(r"^(\d{2})\.(\d{2}) ([A-Z0-9]{6}|-{6}) ([A-Z]\d{8}) +([A-Z]{2,3}) +(-?[\d,]+\.\d{2})$")


def parse_line(text: str, year: int = YEAR) -> dict[str, Any] | None:
    match = LINE.match(text.strip())
    if match is None:
        return None
    return {"date": f"{year}-{match[2]}-{match[1]}", "batch": match[3], "ref": match[4], "kind": match[5],
            "amount": cents(match[6])}


def cents(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    whole, part = text.lstrip("-").replace(",", "").split(".")
    return sign * (int(whole) * 100 + int(part))


def screen_targets(window: Sequence[int], pages: int) -> dict[str, Any]:
    """Where on the screen the oracle reads and clicks, from the viewer window's position alone."""
    x, y = window[0], window[1]
    lay = layout(pages)
    cx, cy = x + CANVAS[0], y + CANVAS[1]
    return {"tabs": [_center(x, y, box) for box in lay["tabs"]], "title": [cx + TITLE_AT[0], cy + TITLE_AT[1]],
            "summary": [[cx + lay["x"], cy + SUMMARY_Y + i * SUMMARY_DY] for i in range(5)],
            "lines": [[cx + lay["x"], cy + FIRST_Y + i * LINE_DY] for i in range(PER_PAGE)],
            "entry": _center(x, y, lay["entry"]), "confirm": _center(x, y, lay["confirm"]),
            "flag": _center(x, y, lay["flag"])}


def _center(x: int, y: int, box: Sequence[int]) -> list[int]:
    return [x + box[0] + box[2] // 2, y + box[1] + box[3] // 2]


def shown_title(image: np.ndarray, targets: Mapping[str, Any]) -> str:
    return read_text(image, targets["title"][0], targets["title"][1], TITLE_SCALE, TITLE_CHARS)


def read_summary(image: np.ndarray, targets: Mapping[str, Any]) -> dict[str, Any] | None:
    """{account, month, opening, closing} off the summary page, or None when it does not read as one."""
    rows = [read_text(image, x, y, LINE_SCALE, 32) for x, y in targets["summary"]]
    account = re.fullmatch(r"ACCOUNT (\d{4}-\d{4}-\d{2})", rows[0])
    period = re.fullmatch(r"PERIOD 01\.(\d{2})\.(\d{4}) - \d{2}\.\d{2}\.\d{4}", rows[1])
    opening = re.fullmatch(r"OPENING BALANCE +(-?[\d,]+\.\d{2})", rows[2])
    closing = re.fullmatch(r"CLOSING BALANCE +(-?[\d,]+\.\d{2})", rows[3])
    if not (account and period and opening and closing):
        return None
    return {"account": account[1], "month": int(period[1]), "year": int(period[2]), "opening": cents(opening[1]),
            "closing": cents(closing[1])}


def read_page(image: np.ndarray, targets: Mapping[str, Any], year: int = YEAR) -> list[dict[str, Any]]:
    """The statement lines the shown page holds, top to bottom (blank rows end it)."""
    found = []
    for x, y in targets["lines"]:
        parsed = parse_line(read_text(image, x, y, LINE_SCALE, LINE_CHARS), year)
        if parsed is None:
            break
        found.append(parsed)
    return found
