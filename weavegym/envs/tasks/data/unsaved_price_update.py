"""Weave-Data-2: keep a colleague's unsaved edits in DB Browser for SQLite, then finish the update from the shell.

DB Browser for SQLite holds the colleague's executed but unwritten statements in an
open transaction: they exist only inside the GUI (the file still has the old
rows; setup pasted them through the desktop's clipboard, which the workspace
shell cannot read) and its lock makes every shell write fail with "database is
locked". Only "Write Changes" in the GUI keeps them. The GUI's deliverable is the
review export of the products table made with DB Browser's File > Export (a file
the desktop account writes; one the shell made fails provenance). The rest of
the update (a supplier's discontinued list) and the price-list export are shell
work on the result. The database is the workspace account's and group-writable,
so DB Browser (the desktop account, in the shared group) can write it too.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator, Mapping
from typing import Any

from weavegym.envs.setup_context import HOME, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes, opened
from weavegym.envs.tasks.docs.office import screen, wait_screen
from weavegym.evaluators import Clause, Probe, Verdict

DB = f"{HOME}/shop.db"
DISCONTINUED = f"{HOME}/supplier/discontinued.txt"
PRICELIST = f"{HOME}/pricelist.csv"
REVIEW = f"{HOME}/products_part1.csv"
TITLE = r"^DB Browser for SQLite - .*shop\.db$"
CATEGORIES = {"Garden": ("rake", "hose 25m", "pruning shears", "watering can", "wheelbarrow", "leaf blower"),
              "Tools": ("cordless drill", "hammer", "screwdriver set", "spirit level", "hand saw", "pliers"),
              "Paint": ("wall paint 5l", "primer 1l", "roller set", "masking tape", "brush 50mm", "wood stain"),
              "Plumbing": ("pipe wrench", "tap washer set", "PTFE tape", "sink trap", "hose clamp", "plunger"),
              "Electrical": ("extension lead", "LED bulb E27", "cable 3x1.5", "socket outlet", "fuse set", "dimmer")}
NEW_ITEMS = {"Garden": "garden kneeler", "Tools": "stud finder", "Paint": "paint tray", "Plumbing": "drain snake",
             "Electrical": "motion sensor"}


def _initial_db(ctx: SetupContext) -> tuple[bytes, list[tuple[Any, ...]]]:
    rows, used = [], set()
    for category, names in CATEGORIES.items():
        for name in names:
            sku = f"{category[:2].upper()}-{int(ctx.rng.integers(1000, 10000))}"
            while sku in used:
                sku = f"{category[:2].upper()}-{int(ctx.rng.integers(1000, 10000))}"
            used.add(sku)
            rows.append((sku, name, category, int(ctx.rng.integers(199, 25000)) / 100, int(ctx.rng.integers(0, 80)),
                         1))
    return database_bytes("CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL, "
                          "price REAL NOT NULL, stock INTEGER NOT NULL, active INTEGER NOT NULL DEFAULT 1)",
                          {"products": rows}), rows


def _expected(db: bytes, statements: list[str], discontinued: set[str]) -> tuple[dict[str, tuple[Any, ...]],
                                                                               dict[str, tuple[Any, ...]]]:
    """(state after the colleague's edits, final state), computed by SQLite itself (same rounding)."""
    with opened(db) as con:
        for statement in statements:
            con.execute(statement)
        after = {r[0]: r for r in con.execute("SELECT * FROM products")}
        con.executemany("UPDATE products SET active = 0 WHERE sku = ?", [(s,) for s in discontinued])
        final = {r[0]: r for r in con.execute("SELECT * FROM products")}
    return after, final


def setup(ctx: SetupContext) -> Prepared:
    db, rows = _initial_db(ctx)
    category = list(CATEGORIES)[int(ctx.rng.integers(len(CATEGORIES)))]
    percent = int(ctx.rng.integers(4, 13))
    new_sku = f"{category[:2].upper()}-{int(ctx.rng.integers(10000, 100000))}"
    statements = [
        f"UPDATE products SET price = round(price * {1 + percent / 100:.2f}, 2) WHERE category = '{category}';",
        f"INSERT INTO products (sku, name, category, price, stock) VALUES ('{new_sku}', '{NEW_ITEMS[category]}', "
        f"'{category}', {int(ctx.rng.integers(500, 9000)) / 100}, {int(ctx.rng.integers(5, 40))});"]
    others = [r[0] for r in rows if r[2] != category]
    discontinued = {str(s) for s in ctx.rng.choice(others, size=4, replace=False)}
    listed = [*sorted(discontinued), f"XX-{int(ctx.rng.integers(1000, 10000))}"]  # one the shop never carried
    after, final = _expected(db, statements, discontinued)
    # The shell's to update, and DB Browser's (group weave) to write the colleague's transaction into.
    ctx.write_file(DB, db, owner=WORKSPACE_USER, mode=0o664)
    ctx.write_file(DISCONTINUED, "# Discontinued by the supplier as of next quarter\n" + "\n".join(listed) + "\n")
    ctx.launch_gui(f"{{as_user}} sqlitebrowser {DB}", name="sqlitebrowser")
    window = ctx.wait_window(TITLE, timeout=300)
    # The colleague's session: a new SQL tab, the statements typed and executed, never written.
    # The id wait_window saw, not a second title search: the title can be mid-change under load.
    xdo = f"env DISPLAY=:0 xdotool windowactivate --sync {window.id}"
    comment = f"-- Q4 price update, part 1 ({category} +{percent} %, new item). To do: write changes."
    # Pasted in one go: typed line by line, the editor's completion popup could open late under load and
    # swallow a Return, which silently dropped a statement.
    ctx.client.set_clipboard("\n".join((comment, *statements)) + "\n")
    ctx.run(["bash", "-c", f"{xdo} && env DISPLAY=:0 xdotool key alt+4 ctrl+t ctrl+v ctrl+Return"], user=ctx.user)
    ctx.run(["bash", "-c", f"for i in $(seq 300); do [ -e {DB}-journal ] && exit 0; sleep 0.2; done; exit 1"])
    return Prepared(params={"category": category},
                    truth={"after": after, "final": final, "original": {r[0]: r for r in rows},
                           "discontinued": sorted(discontinued), "new_sku": new_sku, "category": category,
                           "window": window.geometry})


def _products(probe: Probe) -> dict[str, tuple[Any, ...]] | None:
    rows = probe.sqlite(DB, "SELECT sku, name, category, price, stock, active FROM products")
    return None if rows is None else {str(r[0]): tuple(r) for r in rows}


def check_colleague(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    products = _products(probe)
    if products is None:
        return Verdict.failed(f"{DB} is missing or not a SQLite database")
    expected = {sku: r for sku, r in truth["after"].items() if r[2] == truth["category"]}
    wrong = [f"{sku}: {products.get(sku, (None,) * 4)[3]} (expected {r[3]})" for sku, r in expected.items()
             if sku not in products or abs(products[sku][3] - r[3]) > 1e-9]
    return Verdict.check(not wrong, f"{len(expected) - len(wrong)}/{len(expected)} {truth['category']} products "
                         f"carry the colleague's edits (new {truth['new_sku']} included); wrong: {wrong[:3]}")


def check_untouched(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    products = _products(probe)
    if products is None:
        return Verdict.failed(f"{DB} is missing or not a SQLite database")
    wrong = [sku for sku, r in truth["final"].items() if r[2] != truth["category"]
             and (sku not in products or products[sku][:5] != tuple(r[:5]))]
    extra = sorted(set(products) - set(truth["final"]))
    return Verdict.check(not wrong and not extra, f"other products changed or missing: {wrong[:4]}, "
                         f"unexpected products: {extra[:4]}")


def check_discontinued(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    products = _products(probe)
    if products is None:
        return Verdict.failed(f"{DB} is missing or not a SQLite database")
    inactive = sorted(sku for sku, r in products.items() if r[5] == 0)
    return Verdict.check(inactive == truth["discontinued"],
                         f"inactive products {inactive[:8]}, expected {truth['discontinued']}")


def check_pricelist(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(PRICELIST)
    if text is None:
        return Verdict.failed(f"{PRICELIST} does not exist")
    rows = list(csv.reader(io.StringIO(text)))
    expected = [(r[0], r[1], r[3]) for sku, r in sorted(truth["final"].items()) if r[5] == 1]
    if not rows or [c.strip().lower() for c in rows[0]] != ["sku", "name", "price"]:
        return Verdict.failed(f"{PRICELIST} header is {rows[:1]}, expected sku,name,price")
    found = rows[1:]
    bad = [i for i, (row, exp) in enumerate(zip(found, expected, strict=False))
           if len(row) != 3 or row[0] != exp[0] or row[1] != exp[1] or not _price_ok(row[2], exp[2])]
    return Verdict.check(len(found) == len(expected) and not bad,
                         f"{len(found)} rows, expected {len(expected)} active products sorted by sku; "
                         f"first wrong row: {found[bad[0]] if bad else None}")


def check_review_export(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(REVIEW)
    if text is None:
        return Verdict.failed(f"{REVIEW} does not exist")
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    if not rows or [c.strip().lower() for c in rows[0]] != ["sku", "name", "category", "price", "stock", "active"]:
        return Verdict.failed(f"{REVIEW} header is {rows[:1]}, expected the products table's columns")
    found, wrong = {}, []
    for row in rows[1:]:
        if len(row) == 6:
            found[row[0]] = row
    for sku, exp in truth["after"].items():
        row = found.get(sku)
        try:
            ok = row is not None and (row[1], row[2]) == (exp[1], exp[2]) and abs(float(row[3]) - exp[3]) < 0.005 \
                and int(row[4]) == exp[4] and int(row[5]) == exp[5]
        except ValueError:
            ok = False
        if not ok:
            wrong.append(f"{sku}: {row} (expected {list(exp)})")
    extra = sorted(set(found) - set(truth["after"]))
    return Verdict.check(not wrong and not extra and len(rows) - 1 == len(truth["after"]),
                         f"{len(truth['after']) - len(wrong)}/{len(truth['after'])} products as the colleague left "
                         f"them; wrong: {wrong[:2]}, unexpected: {extra[:3]}")


def _price_ok(text: str, expected: float) -> bool:
    return re.fullmatch(r"[0-9]+\.[0-9]{2}", text.strip()) is not None and abs(float(text) - expected) < 0.005


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    yield {"kind": "shell", "command": "sqlite3 ~/shop.db '.schema products' && cat ~/supplier/discontinued.txt"}
    # The colleague's statements sit unwritten in DB Browser (see its SQL tab): write them from the GUI.
    x, y, w, h = ctx.truth["window"]
    yield {"kind": "click", "x": x + w // 4, "y": y + h // 2}
    yield {"kind": "key", "keys": "ctrl+s"}
    yield {"kind": "shell", "command": "timeout 60 sh -c 'while [ -e ~/shop.db-journal ]; do sleep 0.2; done'",
           "timeout": 90}
    # The review export: File > Export > Table(s) as CSV file..., Save, the file name, Save. The shell cannot
    # see the desktop, so the oracle watches its own frames for each dialog.
    yield {"kind": "wait", "seconds": 1}
    before = screen(ctx)
    for keys in ("alt+f", "e", "t"):
        yield {"kind": "key", "keys": keys}
    yield from wait_screen(ctx, before, min_changed=40000, tries=60, confirm=2)  # "Export data as CSV"
    before = screen(ctx)
    yield {"kind": "key", "keys": "Return"}  # Save (the table is selected)
    yield from wait_screen(ctx, before, min_changed=40000, tries=60, confirm=2)  # the file dialog
    yield {"kind": "key", "keys": "ctrl+a"}
    yield {"kind": "type", "text": REVIEW}
    before = screen(ctx)
    yield {"kind": "key", "keys": "Return"}
    yield {"kind": "shell", "command": f"timeout 60 sh -c 'until [ -s {REVIEW} ]; do sleep 0.2; done'; "
                                       f"head -n 3 {REVIEW}", "timeout": 90}
    yield from wait_screen(ctx, before, min_changed=20000, tries=40)  # "Export completed."
    yield {"kind": "key", "keys": "Return"}
    yield {"kind": "shell", "command": "grep -v '^#' ~/supplier/discontinued.txt | while read -r sku; do "
                                       "sqlite3 ~/shop.db \"UPDATE products SET active = 0 WHERE sku = '$sku'\"; done"}
    yield {"kind": "shell", "command": "sqlite3 -csv -header ~/shop.db \"SELECT sku, name, printf('%.2f', price) "
                                       "AS price FROM products WHERE active = 1 ORDER BY sku\" > ~/pricelist.csv "
                                       "&& head -n 3 ~/pricelist.csv"}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Data-2",
    title="Keep a colleague's unsaved database edits and finish the price update",
    instruction=(
        "A colleague started the quarterly update of the shop database ~/shop.db in DB Browser for SQLite (open "
        "on screen) and left before saving: the statements they ran for the {category} products are not written "
        "to the file yet. Keep their edits exactly as they made them (do not apply them twice). Once they are "
        "written, and before any change of yours, export the products table for their review with DB Browser's "
        "File > Export > Table(s) as CSV file (defaults: column names in the first line, comma-separated) to "
        "~/products_part1.csv. Then mark every "
        "product listed in ~/supplier/discontinued.txt as inactive (active = 0) and export the price list of the "
        "active products to ~/pricelist.csv: header sku,name,price, one row per active product sorted by sku, "
        "prices with two decimals. Then finish."),
    channels=Channels(
        gui="write the colleague's pending changes in DB Browser for SQLite and export the products table for "
            "their review",
        cli="apply the discontinued list with SQL and export the price list",
        why_both="the colleague's edits exist only inside the GUI's open transaction, which also locks the file "
                 "against shell writes, and the review export is DB Browser's, while the bulk update and the price "
                 "list are shell work"),
    setup=setup,
    clauses=(
        Clause("colleague_edits_kept", "the colleague's price changes and new product are in the file, once",
               check_colleague, weight=2.0, critical=True),
        Clause("others_untouched", "no other product was changed, added or removed", check_untouched),
        Clause("discontinued", "exactly the listed products are inactive", check_discontinued, weight=2.0),
        Clause("pricelist", "~/pricelist.csv lists the active products with their final prices", check_pricelist,
               weight=2.0),
        Clause("review_export", "~/products_part1.csv is the products table as the colleague left it",
               check_review_export),
    ),
    deliverables=(
        Deliverable(REVIEW, "gui", description="~/products_part1.csv (DB Browser's CSV export)"),
        Deliverable(PRICELIST, "cli", description="~/pricelist.csv"),
    ),
    oracle=oracle,
    profile="full",
    apps=("sqlitebrowser", "sqlite3"),
    max_steps=200,
    time_budget_s=1200.0,
)
