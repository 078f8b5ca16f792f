"""The plan, the pictures and the screen reading of Weave-Web-4 (the refund desk); no TASK here.

A seed draws a shop's day: the orders database (orders, their items with prices and final-sale flags, the
payments that paid them, earlier refunds) and four refund requests, each with a photographed receipt that
names the order, the items the customer returns and the total printed on it. Each request is decided by the
refund policy (the instruction's rules, applied in order): MISMATCH when no order has the receipt's number or
the receipt's total is not what the order's payments add up to, EXPIRED when the order is more than
RETURN_DAYS old, NOTHING when no returned item is refundable (final sale, or refunded before), else APPROVE
the refundable items' prices. Every seed has two or three approvals (one of them partial at least, so a
receipt read without the database gets the amount wrong) and two or three denials for different reasons.

The receipts are PNG pictures in the dot-matrix font (pixel_font), served by the portal only to the desktop's
browser; the oracle finds each picture, the portal's authorisation line and the card terminal's status line
on the screen by the exact colour of their frames, which nothing else on the screen has.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from typing import Any

import numpy as np
from PIL import Image

from weavegym.envs.tasks import pixel_font

RETURN_DAYS = 30
N_REQUESTS = 5
N_DECOYS = 12
SCALE = 2
LINE_H = 22
# Exact frame colours: the oracle finds each thing by them (nothing else on the screen is drawn in them).
RECEIPT_FRAME = (176, 58, 46)
AUTH_FRAME = (31, 97, 141)
TERMINAL_FRAME = (25, 111, 61)
RECEIPT_SIZE = (320, 200)
RECEIPT_TEXT = (16, 16)  # the first line's top-left inside the picture
RECEIPT_LINES, RECEIPT_CHARS = 8, 24
AUTH_SIZE = (420, 36)
AUTH_TEXT = (10, 11)
AUTH_CHARS = 32
# The page's request tabs (page pixels from the banner's top-left, which is the page's): left, top, w, h.
TAB_BOX = (24, 76, 120, 30)
TAB_STEP = 130
# The card terminal (a Tk window beside Firefox): its canvas, frame, fields and status line.
TERMINAL_AT = (880, 90)
TERMINAL_SIZE = (380, 330)
TERMINAL_TITLE = "Card Terminal"
TERMINAL_HEADING = "CARD TERMINAL - REFUNDS"
HEADING_AT = (16, 16)
TERMINAL_FIELDS = ((150, 60, 200, 28), (150, 100, 200, 28))  # auth code, amount (x, y, w, h in the window)
REFUND_BUTTON = (150, 142, 140, 32)
STATUS_BOX = (12, 200, 356, 34)
STATUS_TEXT = (20, 210)
STATUS_CHARS = 28
FIREFOX_SIZE = (860, 660)

SKU_LETTERS = "BCDFGHKLMNPRSTVWXZ"
ITEMS = ("WOOL SCARF", "RAIN JACKET", "LEATHER BELT", "CANVAS BAG", "ANKLE BOOTS", "LINEN SHIRT", "DENIM SKIRT",
         "KNIT BEANIE", "SILK TIE", "CORD TROUSERS", "GLOVES", "SUNGLASSES", "TRAIL SOCKS", "HOODIE", "POLO SHIRT",
         "CHINO SHORTS", "WALLET", "TRAVEL MUG", "UMBRELLA", "SWIM SHORTS")
CUSTOMERS = ("Ada Brennan", "Luis Ortega", "Mei Tanaka", "Omar Haddad", "Ines Weber", "Tom Quinn", "Sara Rossi",
             "Jonas Berg", "Nia Okafor", "Eva Novak", "Raj Patel", "Lena Fischer", "Yuki Sato", "Paul Dumont",
             "Zoe Evans", "Ivan Petrov", "Maria Santos", "Ken Ito")
APPROVE, DENY = "APPROVE", "DENY"
MISMATCH, EXPIRED, NOTHING = "MISMATCH", "EXPIRED", "NOTHING"
SCHEMA = ("CREATE TABLE orders (order_no INTEGER PRIMARY KEY, customer TEXT NOT NULL, purchased TEXT NOT NULL);"
          "CREATE TABLE order_items (order_no INTEGER NOT NULL REFERENCES orders(order_no), sku TEXT NOT NULL, "
          "description TEXT NOT NULL, price_cents INTEGER NOT NULL, final_sale INTEGER NOT NULL);"
          "CREATE TABLE payments (order_no INTEGER NOT NULL REFERENCES orders(order_no), method TEXT NOT NULL, "
          "amount_cents INTEGER NOT NULL);"
          "CREATE TABLE refunds (order_no INTEGER NOT NULL REFERENCES orders(order_no), sku TEXT NOT NULL, "
          "amount_cents INTEGER NOT NULL, refunded_on TEXT NOT NULL);")


def hex_colour(rgb: Sequence[int]) -> str:
    return "#" + "".join(f"{c:02x}" for c in rgb)


def money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


def cents(text: str) -> int | None:
    """Cents of an amount written like 41.25 (or 41.2, 41), None when it is not one."""
    found = re.fullmatch(r"\s*(\d{1,6})(?:\.(\d{1,2}))?\s*", text or "")
    if not found:
        return None
    return int(found.group(1)) * 100 + int((found.group(2) or "0").ljust(2, "0"))


# ---- the plan ----------------------------------------------------------------------------------------------

def _order(rng: np.random.Generator, order_no: int, today: date, age: int, skus: list[str]) -> dict[str, Any]:
    items = []
    for _ in range(int(rng.integers(3, 5))):
        items.append({"sku": skus.pop(), "description": str(rng.choice(ITEMS)),
                      "price": int(rng.integers(8, 120)) * 100 + int(rng.choice((0, 25, 50, 95, 99))),
                      "final_sale": 0})
    total = sum(i["price"] for i in items)
    split = int(rng.integers(1000, total - 500)) if rng.random() < 0.5 else 0
    payments = [("CARD", total - split)] + ([("GIFT CARD", split)] if split else [])
    return {"order_no": order_no, "customer": str(rng.choice(CUSTOMERS)),
            "purchased": (today - timedelta(days=age)).isoformat(), "items": items, "payments": payments,
            "refunds": []}


def _request(rng: np.random.Generator, kind: str, order: dict[str, Any], today: date) -> dict[str, Any]:
    """Shape ``order`` for a request of ``kind`` and return the request (what its receipt shows, its decision)."""
    items = order["items"]
    pick = [int(i) for i in rng.permutation(len(items))]
    returned = [items[i] for i in pick[:int(rng.integers(2, 4))]]
    blocked = []
    if kind in ("partial", NOTHING):
        blocked = returned[:1] if kind == "partial" else returned
        for item in blocked:
            if rng.random() < 0.5:
                item["final_sale"] = 1
            else:
                order["refunds"].append({"sku": item["sku"], "amount": item["price"],
                                         "refunded_on": (today - timedelta(days=int(rng.integers(1, 3)))).isoformat()})
    elif rng.random() < 0.5:  # a final-sale item the customer does not return
        items[pick[-1]]["final_sale"] = int(pick[-1] not in pick[:len(returned)])
    total = sum(p[1] for p in order["payments"])
    printed = total
    if kind == MISMATCH:
        printed = total + int(rng.choice((-1, 1))) * int(rng.integers(5, 40)) * 100
    amount = sum(i["price"] for i in returned if i not in blocked)
    decision = {"decision": APPROVE, "amount": money(amount)} if kind in ("full", "partial") else \
        {"decision": DENY, "reason": kind}
    return {"receipt": order["order_no"], "date": order["purchased"], "skus": [i["sku"] for i in returned],
            "total": money(printed), **decision}


def plan(rng: np.random.Generator) -> dict[str, Any]:
    """One seed's day: ``today``, the orders (the database) and the requests in the portal's order."""
    today = date(2026, 11, 2) + timedelta(days=int(rng.integers(0, 28)))
    skus = [f"{SKU_LETTERS[int(i) % len(SKU_LETTERS)]}{int(n)}"
            for i, n in zip(rng.integers(0, 100, 200), rng.choice(np.arange(1000, 9999), 200, replace=False),
                            strict=True)]
    numbers = [int(n) for n in rng.choice(np.arange(40000, 49999), N_REQUESTS + N_DECOYS, replace=False)]
    reasons = [str(r) for r in rng.permutation([MISMATCH, EXPIRED, NOTHING])]
    extra = str(rng.choice(["full", "partial", reasons[2]]))  # a third approval, or the third reason
    kinds = [str(k) for k in rng.permutation(["full", "partial", *reasons[:2], extra])]
    orders, requests = [], []
    for number, kind in zip(numbers, kinds, strict=False):
        # An expired order is at most two weeks past the window; the others are inside it, up to its last day.
        age = int(rng.integers(RETURN_DAYS + 1, RETURN_DAYS + 15)) if kind == EXPIRED else \
            int(rng.integers(RETURN_DAYS - 8, RETURN_DAYS + 1)) if rng.random() < 0.5 else int(rng.integers(2, 20))
        order = _order(rng, number, today, age, skus)
        requests.append(_request(rng, kind, order, today))
        orders.append(order)
    for number in numbers[N_REQUESTS:]:
        orders.append(_order(rng, number, today, int(rng.integers(1, 60)), skus))
    ids = sorted(int(i) for i in rng.choice(np.arange(2000, 9999), N_REQUESTS, replace=False))
    for rid, request in zip(ids, requests, strict=True):
        request["request"] = f"RF-{rid}"
    order = [int(i) for i in rng.permutation(N_REQUESTS)]
    return {"today": today.isoformat(), "orders": sorted(orders, key=lambda o: o["order_no"]),
            "requests": [requests[i] for i in order]}


def database_rows(p: Mapping[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    rows: dict[str, list[tuple[Any, ...]]] = {"orders": [], "order_items": [], "payments": [], "refunds": []}
    for o in p["orders"]:
        rows["orders"].append((o["order_no"], o["customer"], o["purchased"]))
        rows["order_items"] += [(o["order_no"], i["sku"], i["description"], i["price"], i["final_sale"])
                                for i in o["items"]]
        rows["payments"] += [(o["order_no"], method, amount) for method, amount in o["payments"]]
        rows["refunds"] += [(o["order_no"], r["sku"], r["amount"], r["refunded_on"]) for r in o["refunds"]]
    return rows


# ---- the receipts -----------------------------------------------------------------------------------------

def receipt_lines(request: Mapping[str, Any]) -> list[str]:
    return [f"REQUEST {request['request']}", f"RECEIPT NO {request['receipt']}", f"DATE {request['date']}",
            *(f"RETURN {sku}" for sku in request["skus"]), f"TOTAL PAID {request['total']}"]


def receipt_png(request: Mapping[str, Any]) -> bytes:
    """The photographed receipt: dot-matrix lines on paper inside a frame of RECEIPT_FRAME (4 px)."""
    width, height = RECEIPT_SIZE
    pixels = np.full((height, width, 3), 250, dtype=np.uint8)
    pixels[:4, :], pixels[-4:, :], pixels[:, :4], pixels[:, -4:] = (RECEIPT_FRAME,) * 4
    for row, line in enumerate(receipt_lines(request)):
        for x0, y0, x1, y1 in pixel_font.layout_text(line, RECEIPT_TEXT[0], RECEIPT_TEXT[1] + row * LINE_H, SCALE):
            pixels[y0:y1, x0:x1] = pixel_font.INK
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def glyphs_js() -> str:
    """The dot-matrix glyphs for the portal's page script (served from /static/): one table for both sides."""
    import json
    return "// The dot-matrix font of weavegym's pixel_font.py, for drawing the authorisation line.\n" \
           f"const GLYPHS = {json.dumps({c: list(rows) for c, rows in pixel_font.GLYPHS.items()})};\n"


# ---- reading the screen (the oracle's eyes) ------------------------------------------------------------------

def find_frame(image: np.ndarray, colour: Sequence[int], region: Sequence[int] | None = None,
               least: int = 200) -> tuple[int, int] | None:
    """The top-left of the pixels of exactly ``colour`` (in ``region`` x0, y0, x1, y1), None when too few show."""
    x0, y0, x1, y1 = region or (0, 0, image.shape[1], image.shape[0])
    mask = np.all(image[y0:y1, x0:x1, :3] == np.array(colour, dtype=image.dtype), axis=2)
    ys, xs = np.nonzero(mask)
    if len(xs) < least:
        return None
    return x0 + int(xs.min()), y0 + int(ys.min())


def read_receipt(image: np.ndarray) -> list[str]:
    """The receipt's lines as shown (blank ones cut), [] when no receipt is on the screen."""
    at = find_frame(image, RECEIPT_FRAME)
    if at is None:
        return []
    lines = [pixel_font.read_text(image, at[0] + RECEIPT_TEXT[0], at[1] + RECEIPT_TEXT[1] + i * LINE_H, SCALE,
                                  RECEIPT_CHARS, paper=(250, 250, 250)) for i in range(RECEIPT_LINES)]
    return [line for line in lines if line]


def parse_receipt(lines: Sequence[str]) -> dict[str, Any] | None:
    """{"request", "receipt", "skus", "total"} of a receipt read off the screen, None when it does not parse."""
    text = "\n".join(lines)
    found = {key: re.search(pattern, text, re.M) for key, pattern in
             (("request", r"^REQUEST (RF-\d+)$"), ("receipt", r"^RECEIPT NO (\d+)$"),
              ("total", r"^TOTAL PAID (\d+\.\d\d)$"))}
    skus = re.findall(r"^RETURN ([A-Z]\d{4})$", text, re.M)
    if not all(found.values()) or not skus:
        return None
    return {**{k: m.group(1) for k, m in found.items() if m}, "skus": skus}


def read_auth(image: np.ndarray) -> str:
    """The portal's authorisation line ("RF-2041 AUTH 7KQ2M9" or "RF-2041 DENIED"), '' when not shown."""
    at = find_frame(image, AUTH_FRAME, least=100)
    if at is None:
        return ""
    return pixel_font.read_text(image, at[0] + AUTH_TEXT[0], at[1] + AUTH_TEXT[1], SCALE, AUTH_CHARS)


def read_terminal(image: np.ndarray) -> str:
    """The card terminal's status line, '' when the terminal is not on the screen (its window is framed in
    TERMINAL_FRAME from its top-left corner)."""
    at = find_frame(image, TERMINAL_FRAME, region=(TERMINAL_AT[0] - 60, 0, image.shape[1], image.shape[0]))
    if at is None:
        return ""
    return pixel_font.read_text(image, at[0] + STATUS_TEXT[0], at[1] + STATUS_TEXT[1], SCALE, STATUS_CHARS)


# ---- the shell's decision (the oracle runs it; the tests run it on the real database) ----------------------

def decide_program(receipt: Mapping[str, Any], today: str) -> str:
    """Python for the shell: the policy applied to one receipt as read off the screen, printed as one line
    "DECISION <request> APPROVE <amount>" or "DECISION <request> DENY <reason>"."""
    return f"""import os, sqlite3
from datetime import date
r = {dict(receipt)!r}
db = sqlite3.connect("file:" + os.path.expanduser("~/orders.db") + "?mode=ro", uri=True)
order = db.execute("SELECT purchased FROM orders WHERE order_no = ?", (int(r["receipt"]),)).fetchone()
paid = db.execute("SELECT SUM(amount_cents) FROM payments WHERE order_no = ?", (int(r["receipt"]),)).fetchone()[0]
printed = round(float(r["total"]) * 100)
if order is None or paid != printed:
    verdict = "DENY {MISMATCH}"
elif (date.fromisoformat("{today}") - date.fromisoformat(order[0])).days > {RETURN_DAYS}:
    verdict = "DENY {EXPIRED}"
else:
    total = 0
    for sku in r["skus"]:
        item = db.execute("SELECT price_cents, final_sale FROM order_items WHERE order_no = ? AND sku = ?",
                          (int(r["receipt"]), sku)).fetchone()
        refunded = db.execute("SELECT COUNT(*) FROM refunds WHERE order_no = ? AND sku = ?",
                              (int(r["receipt"]), sku)).fetchone()[0]
        if item and not item[1] and not refunded:
            total += item[0]
    verdict = f"APPROVE {{total // 100}}.{{total % 100:02d}}" if total else "DENY {NOTHING}"
print("DECISION", r["request"], verdict)
"""


def parse_decision(terminal: str, request: str) -> tuple[str, str] | None:
    """(decision, amount or reason) the decision program printed for ``request``, None when it did not."""
    found = re.findall(rf"^DECISION {re.escape(request)} (APPROVE|DENY) (\S+)$", terminal.replace("\r", ""), re.M)
    return found[-1] if found else None


def parse_batch(data: bytes) -> tuple[dict[str, dict[str, str]], str]:
    """({request: row}, problem) of the batch CSV (header request,decision,amount,reason,settlement)."""
    try:
        rows = list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"))))
    except (UnicodeDecodeError, csv.Error) as exc:
        return {}, f"does not parse as CSV ({exc})"
    out: dict[str, dict[str, str]] = {}
    for row in rows:
        if set(row) != {"request", "decision", "amount", "reason", "settlement"}:
            return {}, f"has columns {sorted(str(k) for k in row)}, not request,decision,amount,reason,settlement"
        request = (row["request"] or "").strip().upper()
        if request in out:
            return {}, f"lists {request} twice"
        out[request] = {k: (v or "").strip().upper() for k, v in row.items()}
    return out, "" if out else "has no row"


def batch_program(rows: Sequence[Sequence[str]]) -> str:
    """Python for the shell: the day's refund batch from what the oracle gathered."""
    return f"""import csv, os
rows = {[list(r) for r in rows]!r}
with open(os.path.expanduser("~/outbox/refunds.csv"), "w", newline="") as out:
    w = csv.writer(out)
    w.writerow(["request", "decision", "amount", "reason", "settlement"])
    w.writerows(rows)
print("BATCH", len(rows), "rows")
"""


def terminal_layout() -> dict[str, Any]:
    """What the card terminal fixture draws where (its stdin, with nothing secret in it)."""
    return {"title": TERMINAL_TITLE, "heading": TERMINAL_HEADING, "heading_at": list(HEADING_AT), "scale": SCALE,
            "at": list(TERMINAL_AT), "size": list(TERMINAL_SIZE), "frame": hex_colour(TERMINAL_FRAME),
            "fields": [list(f) for f in TERMINAL_FIELDS], "refund": list(REFUND_BUTTON),
            "status": list(STATUS_BOX), "status_text": list(STATUS_TEXT)}


def terminal_target(at: Sequence[int]) -> tuple[int, int]:
    """Where to click to start typing into the terminal (its auth code field), for its canvas at ``at``."""
    x, y, w, h = TERMINAL_FIELDS[0]
    return at[0] + x + w // 2, at[1] + y + h // 2
