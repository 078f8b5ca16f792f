"""Weave-Data-1: apply a cycle count shown only in a review window to a SQLite stock database, then submit it.

The counted quantities exist only on screen, in a Tk "Stock count review" window
fed from a root-only file (no CLI can read them); the database update, the
adjustment log and the stock valuation need SQL (CLI); the review is submitted in
the window, whose answer lands in a root-only file the agent cannot write.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from weavegym.envs.setup_context import HOME, PRIVATE_DIR, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.evaluators import Clause, Probe, Verdict

DB = f"{HOME}/warehouse.db"
APP = "/usr/local/share/stockcount/stock_count_review.py"
COUNT = f"{PRIVATE_DIR}/count.json"
ANSWER = f"{PRIVATE_DIR}/review.json"
TITLE = "Stock count review"
AISLES = "ABCDE"
ITEMS = ("hex bolt M8", "wing nut M6", "hinge 80mm", "cable tie 200", "wall plug 6mm", "wood screw 4x40",
         "washer M10", "chain link 5mm", "door handle", "drawer slide", "shelf bracket", "pipe clamp 22",
         "spring hook", "eye bolt M10", "threaded rod M8", "corner brace", "cup hook", "lock nut M12")
COUNTERS = ("M. Novak", "A. Okafor", "L. Berger", "S. Iyer")


def _build_db(stock: list[tuple[str, str, str, int, float]]) -> bytes:
    return database_bytes(
        "CREATE TABLE stock (sku TEXT PRIMARY KEY, name TEXT NOT NULL, location TEXT NOT NULL, "
        "qty INTEGER NOT NULL, unit_cost REAL NOT NULL);"
        "CREATE TABLE adjustments (sku TEXT NOT NULL, old_qty INTEGER NOT NULL, new_qty INTEGER NOT NULL);",
        {"stock": stock})


def setup(ctx: SetupContext) -> Prepared:
    rng = ctx.rng
    skus = [f"WH-{n}" for n in rng.choice(range(1000, 10000), size=30, replace=False)]
    stock = []
    for i, sku in enumerate(skus):
        location = f"{AISLES[i % 5]}-{int(rng.integers(1, 10)):02d}-{int(rng.integers(1, 5))}"
        stock.append((sku, ITEMS[int(rng.integers(len(ITEMS)))], location, int(rng.integers(0, 150)),
                      int(rng.integers(20, 25000)) / 100))
    aisle = AISLES[int(rng.integers(len(AISLES)))]
    counted_rows = [row for row in stock if row[2].startswith(aisle)]
    changed = set(int(i) for i in rng.choice(len(counted_rows), size=int(rng.integers(2, 6)), replace=False))
    counted, adjustments = {}, []
    for i, (sku, _name, _loc, qty, _cost) in enumerate(counted_rows):
        new = qty
        if i in changed:
            while new == qty:
                new = max(0, qty + int(rng.integers(-6, 7)))
            adjustments.append([sku, qty, new])
        counted[sku] = new
    final_qty = {row[0]: counted.get(row[0], row[3]) for row in stock}
    cents = sum(final_qty[sku] * round(cost * 100) for sku, _n, _l, _q, cost in stock)
    # The database is the shell's to change: the workspace account's, read-only to the desktop account.
    ctx.write_file(DB, _build_db(stock), owner=WORKSPACE_USER, mode=0o644)
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/stock_count_review.py"), owner="root")
    ctx.make_private_dir()
    shown = [[sku, loc, counted[sku]] for sku, _n, loc, _q, _c in counted_rows]
    shown.sort(key=lambda r: r[1])
    counter = COUNTERS[int(rng.integers(len(COUNTERS)))]
    ctx.write_file(COUNT, json.dumps({"aisle": aisle, "counter": counter, "rows": shown}), owner="root",
                   mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {COUNT} > {ANSWER}", name="stockcount")
    window = ctx.wait_window(f"^{TITLE}$")
    ctx.run(["rm", "-f", COUNT])  # the app has read it; the counts now live only on screen
    return Prepared(params={"aisle": aisle},
                    truth={"counted": counted, "adjustments": adjustments,
                           "original": {row[0]: row[3] for row in stock},
                           "stock_value": f"{cents // 100}.{cents % 100:02d}",
                           "window": window.geometry})


def _qty(probe: Probe) -> dict[str, int] | None:
    rows = probe.sqlite(DB, "SELECT sku, qty FROM stock")
    return None if rows is None else {str(sku): qty for sku, qty in rows}


def check_counts(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    qty = _qty(probe)
    if qty is None:
        return Verdict.failed(f"{DB} is missing or not a SQLite database")
    wrong = [f"{sku}: {qty.get(sku)} (counted {n})" for sku, n in truth["counted"].items() if qty.get(sku) != n]
    return Verdict.check(not wrong, f"{len(truth['counted']) - len(wrong)}/{len(truth['counted'])} counted SKUs "
                         f"hold the counted qty; wrong: {wrong[:4]}")


def check_untouched(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    qty = _qty(probe)
    if qty is None:
        return Verdict.failed(f"{DB} is missing or not a SQLite database")
    others = {sku: n for sku, n in truth["original"].items() if sku not in truth["counted"]}
    wrong = [sku for sku, n in others.items() if qty.get(sku) != n]
    extra = sorted(set(qty) - set(truth["original"]))
    return Verdict.check(not wrong and not extra, f"{len(others) - len(wrong)}/{len(others)} uncounted SKUs "
                         f"unchanged (changed or deleted: {wrong[:4]}, added: {extra[:4]})")


def check_adjustments(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows = probe.sqlite(DB, "SELECT sku, old_qty, new_qty FROM adjustments")
    if rows is None:
        return Verdict.failed(f"{DB} is missing or not a SQLite database")
    found = sorted((str(s), o, n) for s, o, n in rows)
    expected = sorted(tuple(a) for a in truth["adjustments"])
    return Verdict.check(found == expected, f"adjustments rows {found[:6]}, expected {expected}")


def _answer(probe: Probe) -> dict[str, Any] | None:
    text = probe.read_text(ANSWER)
    try:
        answer = json.loads(text) if text else None
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def check_review_value(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    answer = _answer(probe)
    if answer is None:
        return Verdict.failed("the stock count review was not submitted")
    ok = abs(float(answer.get("stock_value", -1)) - float(truth["stock_value"])) < 0.005
    return Verdict.check(ok, f"submitted stock value {answer.get('stock_value')}, expected {truth['stock_value']}")


def check_review_adjusted(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    answer = _answer(probe)
    if answer is None:
        return Verdict.failed("the stock count review was not submitted")
    expected = len(truth["adjustments"])
    return Verdict.check(answer.get("adjusted") == expected,
                         f"submitted {answer.get('adjusted')} adjusted SKUs, expected {expected}")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    aisle = ctx.params["aisle"]
    yield {"kind": "shell", "command": f"sqlite3 -header -column ~/warehouse.db "
                                       f"\"SELECT * FROM stock WHERE location LIKE '{aisle}-%' ORDER BY location\""}
    # The counted quantities are read off the review window (the oracle knows them from the truth).
    sql = "".join(f"INSERT INTO adjustments SELECT sku, qty, {n} FROM stock WHERE sku = '{sku}' AND qty <> {n};"
                  f"UPDATE stock SET qty = {n} WHERE sku = '{sku}';" for sku, n in ctx.truth["counted"].items())
    yield {"kind": "shell", "command": f"sqlite3 ~/warehouse.db \"BEGIN;{sql}COMMIT;\" && sqlite3 ~/warehouse.db "
                                       "\"SELECT printf('%.2f', SUM(qty * unit_cost)), "
                                       "(SELECT COUNT(*) FROM adjustments) FROM stock\""}
    x, y, _w, _h = ctx.truth["window"]
    yield {"kind": "click", "x": x + 60, "y": y + 25}  # the window's heading: focuses it, the value entry has focus
    yield {"kind": "type", "text": ctx.truth["stock_value"]}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "type", "text": str(len(ctx.truth["adjustments"]))}
    yield {"kind": "key", "keys": "Return"}
    # The app writes its answer as it exits; wait for that (pgrep sees every account's processes; "[w]" keeps
    # the pattern from matching this sh's own command line, which would wait out the whole timeout).
    yield {"kind": "shell", "command": "timeout 30 sh -c 'while pgrep -f \"stock_count_revie[w]\" >/dev/null; "
                                       "do sleep 0.2; done'", "timeout": 60}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Data-1",
    title="Apply a cycle count to the stock database and submit the review",
    instruction=(
        "~/warehouse.db is the warehouse's SQLite stock database (table stock: sku, name, location, qty, "
        "unit_cost; table adjustments: sku, old_qty, new_qty). The open 'Stock count review' window shows the "
        "quantities counted today in aisle {aisle}. 1) In the database, set the qty of every counted SKU to its "
        "counted quantity, and for each SKU whose qty actually changed add one row (sku, old_qty, new_qty) to "
        "adjustments. Leave all other SKUs alone. 2) In the review window, enter the total stock value after the "
        "count (the sum of qty * unit_cost over all SKUs, with two decimals) and the number of SKUs you "
        "adjusted, then submit the review, then finish."),
    channels=Channels(
        gui="read the counted quantities off the review window and submit the review",
        cli="update the stock table, log the adjustments and compute the stock value with SQL",
        why_both="the counts exist only on screen and the review only in the window, while the database "
                 "update and the valuation need SQL"),
    setup=setup,
    clauses=(
        Clause("counts_applied", "every counted SKU holds its counted qty", check_counts, weight=2.0,
               critical=True),
        Clause("others_untouched", "the uncounted SKUs are unchanged", check_untouched),
        Clause("adjustments_logged", "adjustments lists exactly the changed SKUs with old and new qty",
               check_adjustments),
        Clause("review_value", "the review was submitted with the stock value after the count", check_review_value,
               weight=2.0, critical=True, cap=0.5),
        Clause("review_adjusted", "the review states the number of adjusted SKUs", check_review_adjusted),
    ),
    deliverables=(
        Deliverable(ANSWER, "gui", owner="root", description="the review window's submission (captured by setup)"),
        Deliverable(DB, "cli", description="~/warehouse.db"),
    ),
    oracle=oracle,
    apps=("python3-tk", "sqlite3"),
    max_steps=40,
    time_budget_s=900.0,
)
