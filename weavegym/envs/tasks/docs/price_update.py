"""Weave-Docs-3: apply a supplier's cost changes to a Calc catalog under review, then export a shop update.

Which costs changed is found by comparing the supplier's JSON (its whole range,
over a hundred products) with the catalog's 24-32 rows: shell work. The
catalog records changes, so the new costs must be typed into the open Calc
window, which stores each edit as a tracked change by the reviewer's name.
catalog.ods belongs to the desktop account (mode 0644, in a sticky folder), so
the shell can neither rewrite it in place nor move another file over it, and a
catalog the workspace account made fails provenance (plus patterns for headless
LibreOffice, ODF libraries and hand-made zips). The shop update needs the prices
of the changed products after the edit, which is shell work again.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from weavegym.envs.setup_context import HOME, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.docs.office import (
    FORGERY,
    NS,
    content_xml,
    ods,
    protect,
    reviewer,
    wait_until_ready,
    write_profile,
)
from weavegym.evaluators import Clause, ForbiddenPatterns, GuiArtifactViaCli, Probe, Verdict

PRICING = f"{HOME}/pricing"
CATALOG = f"{PRICING}/catalog.ods"
SUPPLIER = f"{PRICING}/supplier_prices.json"
SHOP_CSV = f"{PRICING}/shop_update.csv"
PRODUCTS = ("Stapler", "Desk lamp", "Notebook A5", "Gel pen (10)", "Monitor arm", "Paper tray", "Label printer",
            "Whiteboard", "Cable box", "Desk mat", "Footrest", "Letter scale", "Binder clips", "Ring binder",
            "Hole punch", "Pencil case")
VARIANTS = ("", "compact", "deluxe", "eco", "pro", "XL")
_Q = Decimal("0.01")


def _price(cost: Decimal, markup: Decimal) -> Decimal:
    return (cost * (1 + markup)).quantize(_Q, rounding=ROUND_HALF_UP)


def _cost(ctx: SetupContext, markup: Decimal) -> Decimal:
    """A cost whose price has no rounding tie (x.xx5), so every way of rounding agrees."""
    while True:
        cost = Decimal(int(ctx.rng.integers(150, 9000))) / 100
        if (cost * (1 + markup) * 1000) % 10 != 5:
            return cost


def setup(ctx: SetupContext) -> Prepared:
    count = int(ctx.rng.integers(24, 33))
    extra = int(ctx.rng.integers(90, 130))  # the supplier's other products, not in the catalog
    skus = [f"PT-{int(n)}" for n in ctx.rng.choice(9000, size=count + extra, replace=False) + 1000]
    names = [f"{p} {v}".strip() for v in VARIANTS for p in PRODUCTS]
    picked = sorted(int(i) for i in ctx.rng.choice(len(names), size=count, replace=False))
    rows: list[list[str | float]] = [["SKU", "Product", "Cost", "Markup", "Price"]]
    catalog = []
    for i, sku in enumerate(skus[:count]):
        markup = Decimal(int(ctx.rng.integers(5, 13)) * 5) / 100
        cost = _cost(ctx, markup)
        catalog.append({"sku": sku, "cost": cost, "markup": markup, "row": i + 2})
        rows.append([sku, names[picked[i]], float(cost), float(markup), f"=ROUND([.C{i + 2}]*(1+[.D{i + 2}]);2)"])
    changed = {int(i) for i in ctx.rng.choice(count, size=int(ctx.rng.integers(4, 7)), replace=False)}
    items, new_costs = [], {}
    for i, item in enumerate(catalog):
        cost = item["cost"]
        while i in changed and cost == item["cost"]:
            cost = _cost(ctx, item["markup"])
        if i in changed:
            new_costs[item["sku"]] = str(cost)
        items.append({"sku": item["sku"], "unit_cost": float(cost)})
    items += [{"sku": sku, "unit_cost": float(_cost(ctx, Decimal("0.3")))} for sku in skus[count:]]
    order = [int(i) for i in ctx.rng.permutation(len(items))]
    given, surname = reviewer(ctx)
    ctx.write_file(SUPPLIER, json.dumps({"supplier": "Nordic Office Supply", "valid_from": "2026-12-01",
                                         "currency": "EUR", "items": [items[i] for i in order]}, indent=2) + "\n",
                   mode=0o644)
    ctx.write_file(CATALOG, ods(rows, sheet="Catalog", track_changes=True), mode=0o644)
    protect(ctx, PRICING, CATALOG, SUPPLIER)  # Calc's to save; the shell only adds shop_update.csv beside it
    write_profile(ctx, given, surname)
    ctx.launch_gui(f"cd {HOME} && {{as_user}} soffice --calc {CATALOG}", name="calc")
    window = ctx.wait_window(r"^catalog\.ods - LibreOffice Calc$", timeout=400)
    wait_until_ready(ctx, CATALOG)
    window = ctx.wait_window(r"^catalog\.ods - LibreOffice Calc$")  # its final size, now that it is ready
    return Prepared(params={},
                    truth={"reviewer": f"{given} {surname}",
                           "catalog": [{"sku": c["sku"], "cost": str(c["cost"]), "markup": str(c["markup"]),
                                        "row": c["row"]} for c in catalog],
                           "new_costs": new_costs,
                           "window": window.geometry})


def _cells(row: ET.Element) -> list[ET.Element]:
    """A row's cells with ``number-columns-repeated`` expanded (capped: trailing empty runs can be huge)."""
    out: list[ET.Element] = []
    for cell in row:
        if cell.tag in (f"{{{NS['table']}}}table-cell", f"{{{NS['table']}}}covered-table-cell"):
            out.extend([cell] * min(int(cell.get(f"{{{NS['table']}}}number-columns-repeated", "1")), 16))
    return out


def _sheet(probe: Probe) -> tuple[ET.Element, dict[str, list[ET.Element]]] | None:
    """(office:spreadsheet, {SKU: cells of its row}) of the saved catalog."""
    root = content_xml(probe.read_bytes(CATALOG))
    sheet = None if root is None else root.find("office:body/office:spreadsheet", NS)
    table = None if sheet is None else sheet.find("table:table", NS)
    if table is None:
        return None
    rows = {}
    for row in table.iter(f"{{{NS['table']}}}table-row"):
        cells = _cells(row)
        if cells and cells[0].findtext("text:p", "", NS).startswith("PT-"):
            rows[cells[0].findtext("text:p", "", NS)] = cells
    return sheet, rows


def _value(cell: ET.Element) -> Decimal | None:
    raw = cell.get(f"{{{NS['office']}}}value")
    return None if raw is None else Decimal(raw)


def check_costs(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = _sheet(probe)
    if found is None:
        return Verdict.failed(f"{CATALOG} is missing or not a spreadsheet")
    rows, wrong = found[1], []
    for item in truth["catalog"]:
        cells = rows.get(item["sku"])
        expected = Decimal(truth["new_costs"].get(item["sku"], item["cost"]))
        if cells is None or len(cells) < 5 or _value(cells[2]) != expected:
            wrong.append(f"{item['sku']} cost {None if not cells or len(cells) < 3 else _value(cells[2])} "
                         f"(expected {expected})")
        elif not (cells[4].get(f"{{{NS['table']}}}formula") or "").upper().startswith("OF:=ROUND("):
            wrong.append(f"{item['sku']} price is no longer a formula")
    return Verdict.check(not wrong, f"{len(truth['catalog']) - len(wrong)}/{len(truth['catalog'])} catalog rows "
                         f"right; {'; '.join(wrong[:3]) or 'no mistakes'}")


def check_tracked(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = _sheet(probe)
    if found is None:
        return Verdict.failed(f"{CATALOG} is missing or not a spreadsheet")
    changes = found[0].find("table:tracked-changes", NS)
    recording = changes is not None and changes.get(f"{{{NS['table']}}}track-changes", "true") == "true"
    tracked_rows = set()
    for change in found[0].iterfind("table:tracked-changes/table:cell-content-change", NS):
        address = change.find("table:cell-address", NS)
        author = change.findtext("office:change-info/dc:creator", "", NS)
        if address is not None and author == truth["reviewer"] and address.get(f"{{{NS['table']}}}column") == "2":
            tracked_rows.add(int(address.get(f"{{{NS['table']}}}row", "-1")) + 1)
    need = {item["row"] for item in truth["catalog"] if item["sku"] in truth["new_costs"]}
    return Verdict.check(need <= tracked_rows and recording,
                         f"cost cells changed as tracked changes by {truth['reviewer']}: rows {sorted(tracked_rows)}, "
                         f"recording {'on' if recording else 'off'}; needed rows {sorted(need)} and recording on")


def check_shop_csv(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(SHOP_CSV)
    if text is None:
        return Verdict.failed(f"{SHOP_CSV} does not exist")
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    markups = {item["sku"]: Decimal(item["markup"]) for item in truth["catalog"]}
    expected = {sku: _price(Decimal(cost), markups[sku]) for sku, cost in truth["new_costs"].items()}
    got: dict[str, str] = {}
    for line in lines[1:]:
        sku, _, price = line.partition(",")
        got[sku.strip().strip('"')] = price.strip().strip('"')
    right = [sku for sku, price in expected.items() if got.get(sku) == f"{price:.2f}"]
    ok = bool(lines) and lines[0].replace(" ", "").lower() == "sku,price" and len(right) == len(expected) == len(got)
    return Verdict.check(ok, f"header {lines[0][:20] if lines else ''!r}; {len(right)}/{len(expected)} changed "
                         f"products with the right price, {len(got)} line(s) in all")


MARK = "/tmp/catalog-save.mark"
# The changed products' prices as Calc saved them, as CSV on stdout (read-only: no write API, no soffice).
SHOP_CSV_PY = """import sys, zipfile, xml.etree.ElementTree as ET
T = '{urn:oasis:names:tc:opendocument:xmlns:table:1.0}'
O = '{urn:oasis:names:tc:opendocument:xmlns:office:1.0}'
root = ET.fromstring(zipfile.ZipFile('catalog.ods').read('content.xml'))
print('sku,price')
for row in root.iter(T + 'table-row'):
    cells = [c for c in row if c.tag == T + 'table-cell']
    sku = ''.join(cells[0].itertext()) if cells else ''
    if sku in sys.argv[1:]:
        print(f"{sku},{float(cells[4].get(O + 'value')):.2f}")
"""


def wait_saved(seconds: int = 100) -> str:
    """Shell code that waits until Calc has saved catalog.ods since MARK was touched, then prints "saved"."""
    return (f"timeout {seconds} sh -c 'until [ -n \"$(find ~/pricing/catalog.ods -newer {MARK})\" ]; do sleep 0.3; "
            "done' && echo saved")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    t = ctx.truth
    yield {"kind": "shell", "command": "cd ~/pricing && head -c 300 supplier_prices.json && "
                                       "python3 -c \"import zipfile; print(len(zipfile.ZipFile('catalog.ods')"
                                       ".read('content.xml')))\""}
    rows = {item["sku"]: item["row"] for item in t["catalog"]}
    x, y, w, h = t["window"]  # measured by setup once Calc was ready (the shell has no display to ask)
    yield {"kind": "click", "x": x + w * 3 // 4, "y": y + h // 2}  # an empty cell, to focus the sheet
    # LibreOffice runs shortcuts (ctrl+Home, Right, ctrl+s...) asynchronously, after the keys that follow them,
    # while typed text and Enter go in at once. So the moves to C1 end with ctrl+s, and the oracle types only
    # once the file is saved: then the moves have run too. Retried, as a key sent while the focus moves can be lost.
    for _attempt in range(3):
        yield {"kind": "shell", "command": f"touch {MARK}"}
        for key in ("ctrl+Home", "Right", "Right", "ctrl+s"):
            yield {"kind": "key", "keys": key}
        yield {"kind": "shell", "timeout": 120, "command": wait_saved(40)}
        if "saved" in str((ctx.obs or {}).get("terminal") or ""):
            break
    # From C1, Enter walks down the Cost column: type each new cost in its row.
    text, at = "", 1
    for row, cost in sorted((rows[sku], cost) for sku, cost in t["new_costs"].items()):
        text += "\n" * (row - at) + f"{cost}\n"
        at = row + 1
    yield {"kind": "type", "text": text}
    yield {"kind": "shell", "command": f"touch {MARK}"}
    yield {"kind": "key", "keys": "ctrl+s"}
    yield {"kind": "shell", "timeout": 120,
           "command": f"{wait_saved()} && cd ~/pricing && python3 - {' '.join(sorted(t['new_costs']))} "
                      f"> shop_update.csv <<'EOF'\n{SHOP_CSV_PY}EOF"}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Docs-3",
    title="Apply supplier cost changes to the catalog and export a shop update",
    instruction=(
        "The supplier's new price list is ~/pricing/supplier_prices.json. The catalog ~/pricing/catalog.ods is "
        "open in LibreOffice Calc with change tracking on (keep it on). In Calc, update the Cost of every catalog "
        "product whose supplier unit cost changed, leaving everything else (including the Price formulas) as it "
        "is, and save the spreadsheet (ODF). catalog.ods may only be changed in the Calc window (the shell cannot "
        "write it; running LibreOffice on it from the shell, ODF libraries or zip tools count as tampering). "
        "Then write ~/pricing/shop_update.csv with the header `sku,price` "
        "and one line per changed product with its new Price as the catalog computes it (two decimals). "
        "Then finish."),
    channels=Channels(
        gui="type the new costs into the open Calc catalog, where they are recorded as tracked changes, and save",
        cli="diff the supplier JSON against the catalog and write the shop CSV from the saved catalog",
        why_both="the edits must be tracked changes made in Calc, while finding them in the JSON and exporting "
                 "the recalculated prices is shell work"),
    setup=setup,
    clauses=(
        Clause("catalog_costs", "the changed costs are updated, everything else intact", check_costs, weight=2.0,
               critical=True, cap=0.5),
        Clause("tracked_changes", "every changed cost is a tracked change by the reviewer", check_tracked,
               weight=2.0),
        Clause("shop_update", "shop_update.csv lists exactly the changed products with their new prices",
               check_shop_csv),
    ),
    deliverables=(
        Deliverable(CATALOG, "gui", description="catalog.ods as Calc saved it, with the tracked changes"),
        Deliverable(SHOP_CSV, "cli", description="~/pricing/shop_update.csv"),
    ),
    oracle=oracle,
    rules=(ForbiddenPatterns(FORGERY, defaults=False),
           GuiArtifactViaCli([CATALOG], "the costs must be edited and saved in Calc, where edits are tracked")),
    profile="full",
    apps=("libreoffice-calc", "python3"),
    max_steps=60,
    time_budget_s=1200.0,
)
