"""Weave-Productivity-7: file a travel expense claim from scanned receipts, dated exchange rates and the travel
policy, through a receipt viewer, a Calc claim form and a claims portal.

Four apps, data flowing both ways between the channels. The Travel Desk (a Tk app, the desktop account's) shows
six to eight receipts one at a time, only as dot-matrix pixels (merchants and cities with their accents, drawn
with pixel_font's capitals under two rows of marks; fed from a root-only file setup deletes once drawn): merchant,
city, date, category, amount and currency. ~/travel.db (SQLite, readable by the workspace account alone) has the
exchange rates (EUR per unit, business days with gaps: the rule is the last rate on or before the receipt's
date), the categories the policy reimburses and each city's per-receipt caps for meals and hotels. Each receipt
must be logged in the viewer with its reimbursable amount in EUR before the next one shows, so the flow is read
(GUI) -> convert and apply the policy (CLI) -> log (GUI), receipt by receipt. The claim form ~/claims/claim.ods
(the desktop account's, 0644 in a sticky folder) gets one typed line per receipt in LibreOffice Calc: merchant
exactly as printed, date, amount, currency, rate, EUR and reimbursed EUR. The Claims Portal (the same window's
lower half) takes the claim's total, refuses a wrong one and answers a right one with a claim reference and the
receipts the auditor wants justified, again only as pixels; the shell then writes ~/outbox/justification.txt
(a folder only the workspace account may write) with that reference.

Scoring: every receipt logged in the viewer; the claim form's lines; the claim accepted by the portal; the
justification file naming the portal's reference and exactly the flagged receipts with their reimbursed amounts.
"""

from __future__ import annotations

import json
import re
import unicodedata
import xml.etree.ElementTree as ET
from collections.abc import Generator, Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.docs.office import FORGERY, NS, content_xml, ods, protect, wait_until_ready, write_profile
from weavegym.envs.tasks.productivity import _travel_claim as tc
from weavegym.evaluators import Clause, ForbiddenPatterns, GuiArtifactViaCli, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

DB = f"{HOME}/travel.db"
CLAIMS = f"{HOME}/claims"
CLAIM = f"{CLAIMS}/claim.ods"
OUTBOX = f"{HOME}/outbox"
JUSTIFY = f"{OUTBOX}/justification.txt"
APP_DIR = "/usr/local/share/traveldesk"
APP = f"{APP_DIR}/travel_desk.py"
DESK_IN = f"{PRIVATE_DIR}/travel-desk.json"
RECORD = f"{PRIVATE_DIR}/travel-desk-records.jsonl"
CALC_TITLE = r"^claim\.ods - LibreOffice Calc$"
HEADER = ["Merchant", "Date", "Amount", "Currency", "Rate", "EUR", "Reimbursed EUR"]
SCHEMA = ("CREATE TABLE rates (currency TEXT NOT NULL, day TEXT NOT NULL, eur_per_unit REAL NOT NULL, "
          "PRIMARY KEY (currency, day));"
          "CREATE TABLE categories (category TEXT PRIMARY KEY, reimbursable INTEGER NOT NULL);"
          "CREATE TABLE per_diem (city TEXT NOT NULL, category TEXT NOT NULL, cap_eur REAL NOT NULL, "
          "PRIMARY KEY (city, category));")
OTHER_CITIES_CAPS = 3  # caps of cities the trip did not visit, so the table is not just the trip's
MAX_JUSTIFY = 64 << 10

# ---- setup -------------------------------------------------------------------------------------------------


def database(p: Mapping[str, Any]) -> bytes:
    """The travel database of plan ``p``: rates with their gaps, the categories' rule, the cities' caps."""
    rates = [(cur, day, float(rate)) for cur, rows in sorted(p["rates"].items()) for day, rate in rows]
    categories = sorted(p["rules"].items())
    caps = [(city, cat, float(cap)) for (city, cat), cap in sorted(p["caps"].items())]
    caps += [(city, cat, float(cap)) for city, cat, cap in p["other_caps"]]
    return database_bytes(SCHEMA, {"rates": rates, "categories": categories, "per_diem": caps})


def _other_caps(rng: Any, p: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    others = [c for c in sorted(tc.CITIES) if c not in p["cities"]]
    out = []
    for city in rng.choice(others, OTHER_CITIES_CAPS, replace=False):
        out += [(str(city), tc.MEALS, str(int(rng.integers(7, 11)) * 5)),
                (str(city), tc.HOTEL, str(int(rng.integers(22, 33)) * 5))]
    return out


def setup(ctx: SetupContext) -> Prepared:
    p = tc.plan(ctx.rng)
    p["other_caps"] = _other_caps(ctx.rng, p)
    # The workspace account's alone (0600): a terminal on the desktop runs as the desktop account and cannot read it.
    ctx.write_file(DB, database(p), owner=WORKSPACE_USER, mode=0o600)
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, OUTBOX])
    ctx.write_file(CLAIM, ods([HEADER], sheet="Claim"), mode=0o644)
    protect(ctx, CLAIMS, CLAIM)  # Calc's to save; the shell can read it but neither rewrite nor replace it
    # Typed merchants are long strings with accents: a stalled guest must not repeat a key.
    ctx.run(["env", "DISPLAY=:0", "xset", "r", "off"], user=ctx.user)
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/travel_desk.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    conf = {"receipts": [{"lines": r["lines"], "reimbursed": r["reimbursed"]} for r in p["receipts"]],
            "total": p["total"], "flagged": p["flagged"], "glyphs": tc.GLYPHS, "layout": tc.layout()}
    ctx.write_file(DESK_IN, json.dumps(conf, ensure_ascii=False), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {DESK_IN} > {RECORD}", name="traveldesk")
    desk = ctx.wait_window(f"^{tc.TITLE}$")
    near = ctx.place_window(desk.id, tc.DESK_AT)[:2]
    _wait_drawn(ctx, near)
    ctx.run(["rm", "-f", DESK_IN])  # the window has read it: the receipts now live only on screen
    write_profile(ctx, "Alex", "Traveller")
    ctx.launch_gui(f"cd {CLAIMS} && {{as_user}} soffice --calc {CLAIM}", name="calc")
    calc = ctx.wait_window(CALC_TITLE, timeout=400)
    wait_until_ready(ctx, CLAIM)
    calc_geometry = _place_calc(ctx, calc.id)
    at = _wait_drawn(ctx, near)  # still where it was, above Calc
    if calc_geometry[0] + CALC_CLICK[0] >= at[0]:
        raise TaskError(f"{ctx.task_id} setup: Calc {calc_geometry} has no free cell left of the Travel Desk at {at}")
    receipts = [{k: r[k] for k in ("number", "merchant", "city", "date", "category", "amount", "currency", "rate",
                                   "eur", "reimbursed")} for r in p["receipts"]]
    return Prepared(params={}, truth={"receipts": receipts, "total": p["total"], "flagged": p["flagged"],
                                      "count": len(receipts), "desk_at": list(at), "calc": list(calc_geometry)})


def _place_calc(ctx: SetupContext, window_id: int) -> list[int]:
    """Calc left of the desk where the window manager lets it be resized; a maximized Calc stays as it is, under
    the desk (which keeps itself on top). Its geometry once it no longer changes."""
    ctx.run(["env", "DISPLAY=:0", "xdotool", "windowsize", str(window_id), *map(str, tc.CALC_SIZE), "windowmove",
             str(window_id), *map(str, tc.CALC_AT)], user=ctx.user)
    seen: list[list[int]] = []

    def settled() -> list[int] | None:
        found = next((w for w in ctx.client.list_windows(timeout=10)[0] if w.id == window_id), None)
        if found is None:
            return None
        seen.append(list(found.geometry))
        return seen[-1] if len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3] else None

    try:
        return wait_for(settled, 60, what="Calc's window settled", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None


def _wait_drawn(ctx: SetupContext, near: Sequence[int]) -> tuple[int, int]:
    """Mapped is not drawn (TCG): wait until the desk's dot-matrix heading reads back near where it was put."""
    try:
        return wait_for(lambda: tc.origin(ctx.client.screenshot(hide_cursor=True).image, near), 120,
                        what="the Travel Desk drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None


# ---- the checker -------------------------------------------------------------------------------------------

def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", " ".join(str(text).split()))


def records(probe: Probe, event: str) -> list[dict[str, Any]]:
    """The desk's JSON lines of one kind ("log" or "claim"), in order."""
    data = probe.read_bytes(RECORD) or b""
    found = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("event") == event:
            found.append(record)
    return found


def check_logged(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    logged = sorted({int(r["receipt"]) for r in records(probe, "log") if isinstance(r.get("receipt"), int)})
    want = truth["count"]
    evidence = f"{len(logged)}/{want} receipts logged in the viewer with their reimbursable amount"
    if len(logged) == want:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if logged else Verdict.failed(evidence)


def _cells(row: ET.Element) -> list[ET.Element]:
    out: list[ET.Element] = []
    for cell in row:
        if cell.tag in (f"{{{NS['table']}}}table-cell", f"{{{NS['table']}}}covered-table-cell"):
            out.extend([cell] * min(int(cell.get(f"{{{NS['table']}}}number-columns-repeated", "1")), 16))
    return out


def cell_value(cell: ET.Element) -> str:
    """What a cell holds: a number's value, a date's ISO day, else its text."""
    kind = cell.get(f"{{{NS['office']}}}value-type")
    if kind in ("float", "currency", "percentage"):
        return cell.get(f"{{{NS['office']}}}value", "")
    if kind == "date":
        return cell.get(f"{{{NS['office']}}}date-value", "")[:10]
    return "".join(cell.itertext())


def claim_rows(data: bytes | None) -> tuple[list[list[str]], str]:
    """(the claim's lines below the header, 7 values each; problem) of claim.ods's first sheet."""
    root = content_xml(data)
    if root is None:
        return [], f"{CLAIM} is missing or not an ODF spreadsheet"
    table = root.find("office:body/office:spreadsheet/table:table", NS)
    if table is None:
        return [], f"{CLAIM} has no sheet"
    rows = []
    for row in table.iter(f"{{{NS['table']}}}table-row"):
        values = [cell_value(c) for c in _cells(row)][:7]
        values += [""] * (7 - len(values))
        if not any(v.strip() for v in values) or values[0].strip() == HEADER[0]:
            continue
        rows.append(values)
        if len(rows) > 200:
            break
    return rows, ""


def _number(text: str) -> Decimal | None:
    try:
        value = Decimal(str(text).strip())
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def judge_line(values: Sequence[str], want: Mapping[str, Any]) -> str:
    """'' when a claim line carries receipt ``want`` right, else what is wrong."""
    wrong = []
    if values[1].strip() != want["date"]:
        wrong.append(f"date {values[1]!r}, expected {want['date']}")
    if values[3].strip().upper() != want["currency"]:
        wrong.append(f"currency {values[3]!r}, expected {want['currency']}")
    for index, key, tolerance in ((2, "amount", "0.005"), (4, "rate", "0.0000001"), (5, "eur", "0.005"),
                                  (6, "reimbursed", "0.005")):
        got = _number(values[index])
        if got is None or abs(got - Decimal(want[key])) >= Decimal(tolerance):
            wrong.append(f"{HEADER[index].lower()} {values[index]!r}, expected {want[key]}")
    return "; ".join(wrong)


def judge_claim(rows: Sequence[Sequence[str]], receipts: Sequence[Mapping[str, Any]]) -> tuple[int, list[str],
                                                                                            list[str]]:
    """(receipts with one right line, what is wrong with the others, merchants of lines for no receipt)."""
    by_merchant: dict[str, list[Sequence[str]]] = {}
    for values in rows:
        by_merchant.setdefault(nfc(values[0]), []).append(values)
    wanted = {nfc(r["merchant"]): r for r in receipts}
    wrong, right = [], 0
    for name, want in wanted.items():
        lines = by_merchant.get(name, [])
        why = "no line" if not lines else "listed twice" if len(lines) > 1 else judge_line(lines[0], want)
        if why:
            wrong.append(f"{name}: {why}")
        else:
            right += 1
    return right, wrong, [name for name in by_merchant if name not in wanted]


def check_claim(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, problem = claim_rows(probe.read_bytes(CLAIM))
    if problem:
        return Verdict.failed(problem)
    right, wrong, extra = judge_claim(rows, truth["receipts"])
    wanted = truth["receipts"]
    evidence = (f"{right}/{len(wanted)} receipts on the claim form right" +
                (f"; {'; '.join(wrong[:3])}" if wrong else "") + (f"; lines for no receipt: {extra[:3]}" if extra
                                                                   else ""))
    if right == len(wanted) and not extra:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if right else Verdict.failed(evidence)


def check_submitted(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    claims = records(probe, "claim")
    if not claims:
        return Verdict.failed("the Claims Portal accepted no claim")
    return Verdict.satisfied(f"the portal accepted the claim total {claims[0].get('total')} (expected "
                             f"{truth['total']}) as {claims[0].get('reference')}")


def parse_justification(data: bytes) -> tuple[list[list[str]], str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [], f"is not UTF-8 ({exc.reason} at byte {exc.start})"
    lines = []
    for number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(" | ")]
        if len(fields) != 4:
            return [], f"line {number} has {len(fields)} fields, not 4: {line[:60]!r}"
        lines.append(fields)
    return lines, "" if lines else "has no line"


def check_justification(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    data = probe.read_bytes(JUSTIFY, max_bytes=MAX_JUSTIFY)
    if data is None:
        return Verdict.failed(f"{JUSTIFY} does not exist")
    lines, problem = parse_justification(data)
    if problem:
        return Verdict.failed(f"{JUSTIFY} {problem}")
    claims = records(probe, "claim")
    reference = str(claims[0].get("reference")) if claims else None
    receipts = {r["number"]: r for r in truth["receipts"]}
    wrong, seen = [], []
    for ref, number, merchant, eur in lines:
        if reference is None or ref.upper() != reference:
            wrong.append(f"reference {ref!r}, the portal gave {reference!r}")
            continue
        n = int(number) if number.isdigit() else -1
        seen.append(n)
        want = receipts.get(n)
        if n not in truth["flagged"] or want is None:
            wrong.append(f"receipt {number!r} was not flagged")
        elif nfc(merchant) != nfc(want["merchant"]):
            wrong.append(f"receipt {n}: merchant {merchant!r}, expected {want['merchant']!r}")
        elif (_number(eur) is None or abs(_number(eur) - Decimal(want["reimbursed"])) >= Decimal("0.005")):
            wrong.append(f"receipt {n}: {eur!r} EUR, expected {want['reimbursed']}")
    missing = sorted(set(truth["flagged"]) - set(seen))
    if missing:
        wrong.append(f"flagged receipts missing: {missing}")
    if len(seen) != len(set(seen)):
        wrong.append("a receipt listed twice")
    return Verdict.check(not wrong, "; ".join(wrong[:4]) if wrong else
                         f"the portal's reference {reference} with the {len(truth['flagged'])} flagged receipts, their "
                         "merchants and reimbursed amounts")


# ---- the oracle --------------------------------------------------------------------------------------------

MARK = "/tmp/claim-save.mark"
CALC_CLICK = (240, 420)  # an empty cell of Calc's, left of the desk (from Calc's top-left)
SHOW_TRIES, LOG_TRIES, WAITS, SAVE_TRIES, FILL_TRIES = 4, 3, 8, 3, 3


def convert_program(receipt: Mapping[str, str]) -> str:
    """Python for the shell: the receipt's rate (last on or before its date), EUR, and what the policy pays."""
    return f"""import os, sqlite3
from decimal import Decimal, ROUND_HALF_UP
r = {dict(receipt)!r}
db = sqlite3.connect(os.path.expanduser("~/travel.db"))
if r["currency"] == "EUR":
    rate = "1"
else:
    row = db.execute("SELECT eur_per_unit FROM rates WHERE currency = ? AND day <= ? ORDER BY day DESC LIMIT 1",
                     (r["currency"], r["date"])).fetchone()
    rate = repr(row[0])
eur = (Decimal(r["amount"]) * Decimal(rate)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
ok = db.execute("SELECT reimbursable FROM categories WHERE category = ?", (r["category"],)).fetchone()
cap = db.execute("SELECT cap_eur FROM per_diem WHERE city = ? AND category = ?", (r["city"], r["category"])).fetchone()
paid = Decimal("0.00") if not (ok and ok[0]) else min(eur, Decimal(repr(cap[0]))) if cap else eur
print("CONVERT", r["number"], rate, eur, paid.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP), sep="|")
"""


CLAIM_ROWS_PY = """import json, zipfile, xml.etree.ElementTree as ET
T = '{urn:oasis:names:tc:opendocument:xmlns:table:1.0}'
O = '{urn:oasis:names:tc:opendocument:xmlns:office:1.0}'
root = ET.fromstring(zipfile.ZipFile('claim.ods').read('content.xml'))
rows = []
for row in root.iter(T + 'table-row'):
    cells = []
    for c in row:
        if c.tag in (T + 'table-cell', T + 'covered-table-cell'):
            cells += [c] * min(int(c.get(T + 'number-columns-repeated', '1')), 16)
    values = []
    for c in cells[:7]:
        kind = c.get(O + 'value-type')
        if kind in ('float', 'currency', 'percentage'):
            values.append(c.get(O + 'value', ''))
        elif kind == 'date':
            values.append(c.get(O + 'date-value', '')[:10])
        else:
            values.append(''.join(c.itertext()))
    values += [''] * (7 - len(values))
    if any(v.strip() for v in values) and values[0].strip() != 'Merchant':
        rows.append(values)
print('CLAIMROWS', json.dumps(rows[:100]))
"""


def wait_saved(seconds: int = 100) -> str:
    """Shell code that waits until Calc has saved claim.ods since MARK was touched, then prints "saved"."""
    return (f"timeout {seconds} sh -c 'until [ -n \"$(find ~/claims/claim.ods -newer {MARK})\" ]; do sleep 0.3; "
            "done' && echo saved")


def saved_rows(terminal: str) -> list[list[str]] | None:
    """The claim's lines as CLAIM_ROWS_PY printed them from the saved form, or None when it printed none."""
    found = re.search(r"^CLAIMROWS (\[.*\])$", terminal, re.M)
    if found is None:
        return None
    try:
        rows = json.loads(found.group(1))
    except ValueError:
        return None
    return [[str(v) for v in row] for row in rows if isinstance(row, list)]


def _screen(ctx: OracleContext) -> Any:
    return (ctx.obs or {})["screen"]


def _terminal(ctx: OracleContext) -> str:
    return str((ctx.obs or {}).get("terminal") or "")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Per receipt: show it and read it (GUI), convert it and apply the policy (CLI), log it (GUI); then type the
    claim form in Calc and save it, total the saved form (CLI), submit the total and read the reference and the
    flagged receipts (GUI), and write the justification (CLI)."""
    count = ctx.truth["count"]
    noted: list[dict[str, str]] = []
    for number in range(1, count + 1):
        receipt = yield from _show(ctx, number)
        if receipt is None:
            break
        yield {"kind": "python", "code": convert_program(receipt), "timeout": 60}
        found = re.search(rf"CONVERT\|{number}\|([0-9.e-]+)\|([0-9.]+)\|([0-9.]+)", _terminal(ctx))
        if found is None:
            break
        receipt = {**receipt, "rate": found.group(1), "eur": found.group(2), "reimbursed": found.group(3)}
        if not (yield from _log(ctx, receipt, count)):
            break
        noted.append(receipt)
    total = yield from _fill_claim(ctx, noted)
    if not total:
        total = tc.money(sum(Decimal(r["reimbursed"]) for r in noted) if noted else 0)
    reference, flagged = yield from _submit(ctx, total)
    chosen = [r for r in noted if int(r["number"]) in flagged]
    lines = "".join(f"{reference} | {r['number']} | {r['merchant']} | {r['reimbursed']}\n" for r in chosen)
    yield {"kind": "python", "timeout": 60,
           "code": f"import os\nwith open(os.path.expanduser('~/outbox/justification.txt'), 'w', encoding='utf-8') "
                   f"as out:\n    out.write({lines!r})\nprint('JUSTIFIED', {len(chosen)})\n"}
    yield {"kind": "done"}


def _show(ctx: OracleContext, number: int) -> Generator[ActionLike, Any, dict[str, str] | None]:
    """Press "Show receipt" until receipt ``number`` reads back; its fields, or None when it never did."""
    at, count = ctx.truth["desk_at"], ctx.truth["count"]
    x, y = tc.centre(at, tc.SHOW_BUTTON)
    want = f"RECEIPT {number} OF {count}"
    for attempt in range(SHOW_TRIES):
        if attempt or number == 1:
            yield {"kind": "click", "x": x, "y": y}
        for _ in range(WAITS):
            lines = tc.read_receipt(_screen(ctx), at)
            if lines[0] == want:
                parsed = tc.parse_receipt(lines)
                if parsed is not None:
                    return parsed
            yield {"kind": "wait", "seconds": 1}
    return None


def _log(ctx: OracleContext, receipt: Mapping[str, str], count: int) -> Generator[ActionLike, Any, bool]:
    at = ctx.truth["desk_at"]
    x, y = tc.centre(at, tc.LOG_ENTRY)
    want = f"LOGGED {receipt['number']} OF {count}"
    for _attempt in range(LOG_TRIES):
        yield {"kind": "click", "x": x, "y": y}
        yield {"kind": "key", "keys": "ctrl+slash"}  # what a lost attempt left there is replaced
        yield {"kind": "type", "text": f"{receipt['reimbursed']}\n"}
        for _ in range(WAITS):
            if tc.read_log_status(_screen(ctx), at) == want:
                return True
            yield {"kind": "wait", "seconds": 1}
    return False


def _saved(ctx: OracleContext, cell: Mapping[str, Any], keys: Sequence[str]) -> Generator[ActionLike, Any, bool]:
    """Press ``keys`` in Calc, then ctrl+s, and wait until the form is saved: LibreOffice runs its shortcuts after
    the typed text that follows them, so typing waits for a save the keys end with. A lost save (the focus gone
    under load) is tried again after a click on an empty cell."""
    for attempt in range(SAVE_TRIES):
        if attempt:
            yield cell
        yield {"kind": "shell", "command": f"touch {MARK}"}
        for key in (*keys, "ctrl+s"):
            yield {"kind": "key", "keys": key}
        yield {"kind": "shell", "timeout": 150, "command": wait_saved(120)}
        if "saved" in _terminal(ctx):
            return True
    return False


def _fill_claim(ctx: OracleContext, receipts: Sequence[Mapping[str, str]]) -> Generator[ActionLike, Any, str]:
    """Type the claim form in Calc and save it, then read the saved form back from the shell and check every line
    against what was typed: its total when it is right, else the sheet is cleared and typed again from A1 (the
    header too); "" when it never came out right. Under load a typed line can be lost or land where a late
    cursor key put it; clearing and retyping makes every attempt start from the same empty sheet."""
    x, y, _w, h = ctx.truth["calc"]
    cell = {"kind": "click", "x": x + CALC_CLICK[0], "y": y + min(CALC_CLICK[1], h - 80)}  # an empty cell: focus
    lines = [[r["merchant"], r["date"], r["amount"], r["currency"], r["rate"], r["eur"], r["reimbursed"]]
             for r in receipts]
    for attempt in range(FILL_TRIES):
        yield cell
        keys = ("ctrl+Home", "Down") if not attempt else ("ctrl+Home", "ctrl+a", "Delete", "ctrl+Home")
        if not (yield from _saved(ctx, cell, keys)):
            continue
        for values in (lines if not attempt else [HEADER, *lines]):  # Tab along; Enter goes back to column A
            yield {"kind": "type", "text": "\t".join(values) + "\n"}
        for save in range(SAVE_TRIES):
            if save:  # the focus may have gone: a click on an empty cell is harmless now the lines are typed
                yield cell
            yield {"kind": "shell", "command": f"touch {MARK}"}
            yield {"kind": "key", "keys": "ctrl+s"}
            yield {"kind": "shell", "timeout": 210,
                   "command": f"{wait_saved(180)} && cd ~/claims && python3 - <<'EOF'\n{CLAIM_ROWS_PY}EOF"}
            rows = saved_rows(_terminal(ctx))
            if rows is None:
                continue  # not saved yet
            right, _wrong, extra = judge_claim(rows, receipts)
            if right == len(receipts) and not extra:
                return tc.money(sum(Decimal(r["reimbursed"]) for r in receipts))
            break  # saved, but not what was typed: clear the sheet and type it again
    return ""


def _submit(ctx: OracleContext, total: str) -> Generator[ActionLike, Any, tuple[str, list[int]]]:
    """Submit the total until the portal shows its reference: (reference, flagged receipts), or ("", [])."""
    at = ctx.truth["desk_at"]
    x, y = tc.centre(at, tc.TOTAL_ENTRY)
    for _attempt in range(LOG_TRIES):
        yield {"kind": "click", "x": x, "y": y}
        yield {"kind": "key", "keys": "ctrl+slash"}
        yield {"kind": "type", "text": f"{total}\n"}
        for _ in range(WAITS):
            lines = tc.read_portal(_screen(ctx), at)
            ref = re.fullmatch(r"ACCEPTED: REFERENCE (CLM-[A-Z0-9]{6})", lines[0])
            flagged = re.fullmatch(r"AUDIT: JUSTIFY RECEIPTS ([0-9 AND]+)", lines[1])
            if ref and flagged:
                return ref.group(1), [int(n) for n in flagged.group(1).split(" AND ")]
            yield {"kind": "wait", "seconds": 1}
    return "", []


TASK = Task(
    id="Weave-Productivity-7",
    title="File a travel expense claim from scanned receipts, dated exchange rates and the travel policy",
    instruction=(
        "File the expense claim of your last business trip. The 'Travel Desk' window shows your receipts one at a "
        "time in its Receipt Viewer ('Show receipt'): merchant, city, date, category and the amount in its "
        "currency. ~/travel.db (SQLite) has the exchange rates (table rates: currency, day, eur_per_unit; not "
        "every day has one: use the last rate on or before the receipt's date; EUR has rate 1) and the travel "
        "policy (categories: category, reimbursable 1 or 0; per_diem: city, category, cap_eur, the most paid "
        "for one receipt of that category in that city). A receipt's EUR is its amount times the rate, rounded "
        "half up to the cent; its reimbursable EUR is 0.00 for a category that is not reimbursable, else its EUR, "
        "limited to the city's cap where there is one. 1) Log every receipt in the viewer: type its reimbursable "
        "EUR and press 'Log receipt'; the next receipt shows once the current one is logged (a wrong amount is "
        "refused). 2) In the claim form ~/claims/claim.ods, open in LibreOffice Calc, enter one line per receipt "
        "below the header: Merchant exactly as printed (with its accents), Date (YYYY-MM-DD), Amount, Currency, "
        "Rate (EUR per unit, as the rates table has it), EUR and Reimbursed EUR; no other lines. Save it in Calc "
        "(the shell cannot write it). 3) Submit the "
        "claim's total reimbursed EUR in the Travel Desk's Claims Portal ('Submit claim'). It answers with a claim "
        "reference and the receipts the auditor wants justified. 4) From your shell, write "
        "~/outbox/justification.txt in UTF-8: one line per receipt the auditor named, four fields separated by "
        "' | ': the claim reference, the receipt's number, its merchant as printed and its reimbursed EUR (two "
        "decimals). Then finish."),
    channels=Channels(
        gui="read the receipts off the viewer and log them, type and save the claim form in Calc, submit the claim "
            "in the portal and read its reference and the flagged receipts",
        cli="look up the dated rates and the policy in ~/travel.db, convert and cap every receipt, total the saved "
            "claim and write ~/outbox/justification.txt",
        why_both="the receipts, the claim reference and the auditor's flags exist only as pixels in the Travel Desk "
                 "and the claim form can only be saved by Calc, while the rates and the policy are readable only "
                 "by the shell's account and the justification must be written by it into a folder only it can "
                 "write"),
    setup=setup,
    clauses=(
        Clause("receipts_logged", "every receipt was logged in the viewer with its reimbursable EUR", check_logged,
               weight=2.0, critical=True, cap=0.5),
        Clause("claim_form", "claim.ods has one right line per receipt (merchant, date, amount, currency, rate, EUR, "
                             "reimbursed) and no other", check_claim, weight=3.0, critical=True, cap=0.5),
        Clause("claim_submitted", "the Claims Portal accepted the claim's total", check_submitted, weight=2.0,
               critical=True, cap=0.5),
        Clause("justification", "~/outbox/justification.txt names the portal's reference and exactly the flagged "
                                "receipts with their merchants and reimbursed EUR", check_justification,
               weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the Travel Desk's records (captured by setup)"),
        Deliverable(CLAIM, "gui", description="claim.ods as Calc saved it"),
        Deliverable(JUSTIFY, "cli", description="~/outbox/justification.txt"),
    ),
    withheld=("receipts", "total", "flagged"),
    oracle=oracle,
    rules=(ForbiddenPatterns(FORGERY, defaults=False),
           GuiArtifactViaCli([CLAIM], "the claim form must be typed and saved in Calc")),
    profile="full",
    apps=("Travel Desk: Receipt Viewer and Claims Portal (python3-tk)", "libreoffice-calc", "sqlite3", "python3"),
    max_steps=260,
    time_budget_s=2700.0,
)
