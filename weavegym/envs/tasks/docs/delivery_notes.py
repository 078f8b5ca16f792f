"""Weave-Docs-6: check a supplier batch of scanned delivery notes against the purchase orders, annotate in Evince.

The scans are a PDF of pictures (page 1 the scanner's cover sheet, then one delivery note a page, drawn in the
dot-matrix font): the delivered items and quantities exist only as pixels, in Evince on the desktop (the PDF is
in a folder only the desktop account can read). The purchase orders, with the suppliers' (non-ASCII) names, are
in a SQLite database only the workspace account can read. Per note the agent reads the scan, queries the order
in the shell, and on a discrepant page adds an Evince note typed with the PO line, the ordered quantity and the
supplier's name; Evince's "Save a Copy" writes the annotated PDF into a folder only the desktop account can
write. The shell then writes the claims file (a row per discrepancy, with the saved copy's SHA-256 and page
numbers), and a zenity register on the desktop records which notes were accepted and which disputed.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.dialogs import await_dialog_exit, form_fields
from weavegym.envs.tasks.docs import _delivery_scan as scan
from weavegym.envs.tasks.games.sgt_common import wait_box
from weavegym.evaluators import Clause, Probe, Verdict

RECEIVING = f"{HOME}/receiving"
INBOX, CHECKED, CLAIMS_DIR = f"{RECEIVING}/inbox", f"{RECEIVING}/checked", f"{RECEIVING}/claims"
CLAIMS = f"{CLAIMS_DIR}/claims.csv"
DATABASE = f"{HOME}/purchasing/orders.db"
ANSWER = f"{PRIVATE_DIR}/register.out"
REGISTER_TITLE = "Goods receipt register"
VIEWER_BOX = (0, 0, 900, 690)  # where setup puts Evince; the register goes to its right
REGISTER_X = 905
HEADER = ("page", "po_line", "ordered_item", "ordered_qty", "delivered_item", "delivered_qty", "issue", "pdf_sha256")
SUPPLIERS = ("Müller & Söhne GmbH", "Łukasz Żak Sp. z o.o.", "Ñandú Textil S.A.", "山田商事株式会社",
             "Ørsted Værktøj ApS", "Čapek a syn s.r.o.", "Þórsson ehf.", "Göktaş Ambalaj A.Ş.",
             "Åkerlund & Öberg AB", "Ionescu Șerban SRL")
PREFIXES = ("BX", "CR", "PL", "TB", "WR", "GK", "SN", "FL", "HD", "MT")
SCHEMA = """
CREATE TABLE suppliers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE purchase_orders (po TEXT PRIMARY KEY, supplier_id INTEGER NOT NULL REFERENCES suppliers(id),
                              ordered_on TEXT NOT NULL);
CREATE TABLE po_lines (po TEXT NOT NULL REFERENCES purchase_orders(po), line INTEGER NOT NULL, item TEXT NOT NULL,
                       qty INTEGER NOT NULL, PRIMARY KEY (po, line));
"""


def norm(text: str) -> str:
    """How note texts and names compare: NFC with whitespace collapsed, case kept (the instruction asks for the
    supplier's name exactly as the database spells it; how the text was composed and spaced is free)."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def plan(rng: np.random.Generator) -> dict[str, Any]:
    """The batch: suppliers, purchase orders (with decoys) and the notes, a few with one discrepant line."""
    count = int(rng.integers(6, 8))
    names = [SUPPLIERS[int(i)] for i in rng.choice(len(SUPPLIERS), size=5, replace=False)]
    po_numbers = [f"PO-{int(n)}" for n in rng.choice(np.arange(30000, 69999), size=count + 6, replace=False)]
    items = [f"{PREFIXES[int(rng.integers(len(PREFIXES)))]}-{int(n)}"
             for n in rng.choice(np.arange(1000, 9999), size=6 * (count + 6) + 20, replace=False)]
    orders, spare = [], iter(items)
    for po in po_numbers:
        lines = [(line, next(spare), int(rng.integers(2, 41)) * 5 if rng.random() < 0.5 else int(rng.integers(3, 150)))
                 for line in range(1, int(rng.integers(3, 6)) + 1)]
        orders.append({"po": po, "supplier": int(rng.integers(len(names))),
                       "ordered_on": f"2026-{int(rng.integers(8, 11)):02d}-{int(rng.integers(1, 29)):02d}",
                       "lines": lines})
    disputed = {int(i) for i in rng.choice(count, size=int(rng.integers(3, 5)), replace=False)}
    dns = [f"DN-{int(n)}" for n in rng.choice(np.arange(10000, 99999), size=count, replace=False)]
    notes = []
    for index, order in enumerate(orders[:count]):
        rows = [list(line) for line in order["lines"]]
        issue = None
        if index in disputed:
            row = rows[int(rng.integers(len(rows)))]
            issue = ("short", "over", "wrong_item")[int(rng.integers(3))]
            if issue == "short":
                row[2] = max(1, row[2] - int(rng.integers(1, max(2, row[2] // 2))))
            elif issue == "over":
                row[2] += int(rng.integers(1, 25))
            else:
                row[1] = next(spare)
            issue = {"line": row[0], "kind": issue}
        notes.append({"page": index + 2, "dn": dns[index], "po": order["po"],
                      "shipped": f"2026-11-{int(rng.integers(1, 29)):02d}",
                      "rows": [tuple(r) for r in rows], "issue": issue})
    order_of = {o["po"]: o for o in orders}
    rng.shuffle(orders)  # the database's row order says nothing about the batch
    return {"batch": f"SB-{int(rng.integers(2600, 2699))}-{int(rng.integers(10, 99))}", "suppliers": names,
            "orders": orders, "notes": notes, "order_of": order_of}


def expected(world: Mapping[str, Any]) -> dict[str, Any]:
    """What a right answer holds: the note texts per page, the claim rows, the accepted and disputed notes."""
    texts, claims = {}, []
    for note in world["notes"]:
        if note["issue"] is None:
            continue
        order = world["order_of"][note["po"]]
        line = note["issue"]["line"]
        _n, item, qty = next(r for r in order["lines"] if r[0] == line)
        _n, got_item, got_qty = next(r for r in note["rows"] if r[0] == line)
        texts[note["page"]] = f"{note['po']}/{line} {qty} {world['suppliers'][order['supplier']]}"
        claims.append([str(note["page"]), f"{note['po']}/{line}", item, str(qty), got_item, str(got_qty),
                       note["issue"]["kind"]])
    return {"texts": texts, "claims": claims,
            "accepted": sorted(n["dn"] for n in world["notes"] if n["issue"] is None),
            "disputed": sorted(n["dn"] for n in world["notes"] if n["issue"] is not None)}


def setup(ctx: SetupContext) -> Prepared:
    world = plan(ctx.rng)
    batch = world["batch"]
    pages = [scan.render_sheet(scan.cover_lines(batch, len(world["notes"])), ctx.rng)]
    pages += [scan.render_sheet(scan.note_lines(n["dn"], n["po"], n["shipped"], n["rows"]), ctx.rng)
              for n in world["notes"]]
    rows = {"suppliers": [(i + 1, name) for i, name in enumerate(world["suppliers"])],
            "purchase_orders": [(o["po"], o["supplier"] + 1, o["ordered_on"]) for o in world["orders"]],
            "po_lines": [(o["po"], *line) for o in world["orders"] for line in o["lines"]]}
    ctx.make_private_dir()
    # receiving/ is root's: neither account can add, remove or swap its folders. The scan is the desktop's
    # alone (the shell cannot read its pixels), checked/ only the desktop can write, claims/ only the shell.
    ctx.run(f"install -d -m 0755 {RECEIVING} && install -d -m 0700 -o {ctx.user} -g {SHARED_GROUP} {INBOX} && "
            f"install -d -m 0755 -o {ctx.user} -g {SHARED_GROUP} {CHECKED} && "
            f"install -d -m 2755 -o {WORKSPACE_USER} -g {SHARED_GROUP} {CLAIMS_DIR}")
    ctx.write_file(f"{INBOX}/{batch}.pdf", scan.pdf_bytes(pages), mode=0o600)
    ctx.write_file(DATABASE, database_bytes(SCHEMA, rows), owner=WORKSPACE_USER, mode=0o600)
    ctx.run(["chmod", "0700", f"{HOME}/purchasing"])
    ctx.launch_gui(f"{{as_user}} evince {INBOX}/{batch}.pdf", name="evince")
    ctx.wait_window(rf"^{batch}\.pdf", timeout=240)
    x, y, w, h = VIEWER_BOX
    as_user = ["runuser", "-u", ctx.user, "--", "env", "DISPLAY=:0", "xdotool", "search", "--name"]
    # No --sync: a window manager that keeps windows off its panel would leave xdotool waiting for good.
    ctx.run([*as_user, rf"^{batch}\.pdf", "windowmove", str(x), str(y), "windowsize", str(w), str(h)], timeout=60)
    viewer = wait_for(lambda: _placed(ctx, rf"^{batch}\.pdf", lambda g: abs(g[2] - w) < 60 and g[3] > h - 80), 60,
                      what="Evince at its place on the left")
    ctx.launch_gui(
        f"{{as_user}} zenity --forms --title='{REGISTER_TITLE}' --text='Delivery notes of batch {batch}' "
        "--add-entry='Accepted (DN numbers)' --add-entry='Disputed (DN numbers)' " f"> {ANSWER}", name="register")
    ctx.wait_window(f"^{REGISTER_TITLE}$")
    ctx.run([*as_user, f"^{REGISTER_TITLE}$", "windowmove", str(REGISTER_X), "120"], timeout=60)
    register = wait_for(lambda: _placed(ctx, f"^{REGISTER_TITLE}$", lambda g: g[0] >= REGISTER_X - 20), 60,
                        what="the register beside the viewer")
    # The snapshot must hold a drawn cover sheet, not a blank window (TCG draws late).
    wait_for(lambda: scan.find_page(ctx.client.screenshot(hide_cursor=True).image, tuple(viewer)),
             180, what="the scan's cover sheet drawn in Evince")
    now = float(ctx.run(["date", "+%s"]).stdout.strip())
    texts = expected(world)
    return Prepared(
        params={"batch": batch, "notes": len(world["notes"]), "last": len(pages)},
        truth={"batch": batch, "pages": len(pages), "digests": [scan.page_digest(p) for p in pages],
               "texts": {str(k): v for k, v in texts["texts"].items()}, "claims": texts["claims"],
               "accepted": texts["accepted"], "disputed": texts["disputed"], "prepared_at": now,
               "viewer": viewer, "register": register})


def _placed(ctx: SetupContext, title: str, where: Callable[[list[int]], bool]) -> list[int] | None:
    """The geometry of the mapped window titled /title/ once ``where`` holds for it (setup moved it)."""
    windows, _wm = ctx.client.list_windows(timeout=10)
    found = next((w for w in windows if w.mapped and re.search(title, w.title)), None)
    return found.geometry if found is not None and where(found.geometry) else None


# --- checker ---------------------------------------------------------------------------------------------------

def _saved(probe: Probe, truth: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
    path = f"{CHECKED}/{truth['batch']}-checked.pdf"
    data = probe.read_bytes(path)
    if data is None:
        return None, f"{path} does not exist"
    found = scan.read_saved(data)
    return (found, "") if found is not None else (None, f"{path} is not a PDF that could be read")


def check_copy(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found, why = _saved(probe, truth)
    if found is None:
        return Verdict.failed(why)
    same = found["digests"] == truth["digests"]
    return Verdict.check(same, f"{len(found['digests'])} page(s), the batch's scans in order: {same} "
                               f"(expected the {truth['pages']} scanned pages)")


def _fresh_notes(found: Mapping[str, Any], truth: Mapping[str, Any]) -> list[tuple[int, str]]:
    """The text notes written in this episode (their /M stamp not before setup's clock, a minute of slack)."""
    return [(page, text) for page, text, when in found["notes"] if when is not None
            and when >= truth["prepared_at"] - 60]


def check_noted_pages(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found, why = _saved(probe, truth)
    if found is None:
        return Verdict.failed(why)
    pages = sorted({page for page, _text in _fresh_notes(found, truth)})
    stale = len(found["notes"]) - len(_fresh_notes(found, truth))
    wanted = sorted(int(p) for p in truth["texts"])
    return Verdict.check(pages == wanted, f"notes on pages {pages} ({stale} older than this episode), "
                                          f"expected on {wanted}")


def check_note_texts(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found, why = _saved(probe, truth)
    if found is None:
        return Verdict.failed(why)
    notes = _fresh_notes(found, truth)
    right = [page for page, text in truth["texts"].items()
             if any(p == int(page) and norm(t) == norm(text) for p, t in notes)]
    wrong = sorted(set(truth["texts"]) - set(right), key=int)
    shown = "; ".join(f"p{p}: {t[:60]!r}" for p, t in notes[:6])
    evidence = f"{len(right)} of {len(truth['texts'])} notes right (wrong or missing on pages {wrong}); read {shown}"
    if not wrong:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if right else Verdict.failed(evidence)


def _claims(probe: Probe) -> tuple[list[dict[str, str]] | None, str]:
    text = probe.read_text(CLAIMS)
    if text is None:
        return None, f"{CLAIMS} does not exist or is not UTF-8 text"
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    if tuple(h.strip() for h in reader.fieldnames or ()) != HEADER:
        return None, f"{CLAIMS} header is {reader.fieldnames}, expected {','.join(HEADER)}"
    return [{k.strip(): (v or "").strip() for k, v in row.items() if k} for row in reader], ""


def check_claims(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, why = _claims(probe)
    if rows is None:
        return Verdict.failed(why)
    got = sorted(tuple(row.get(h, "") for h in HEADER[:-1]) for row in rows)
    want = sorted(tuple(row) for row in truth["claims"])
    missing, extra = [r for r in want if r not in got], [r for r in got if r not in want]
    evidence = f"{len(rows)} row(s); missing {[r[1] for r in missing]}, unexpected {[','.join(r)[:60] for r in extra]}"
    if not missing and not extra:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if len(missing) < len(want) and not extra else Verdict.failed(evidence)


def check_checksum(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, why = _claims(probe)
    if rows is None:
        return Verdict.failed(why)
    digest = probe.sha256(f"{CHECKED}/{truth['batch']}-checked.pdf")
    sums = sorted({row.get("pdf_sha256", "").lower() for row in rows})
    return Verdict.check(bool(rows) and digest is not None and sums == [digest],
                         f"claims name {[s[:12] for s in sums]}, the saved copy's SHA-256 is {(digest or 'none')[:12]}")


def check_register(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    fields = form_fields(probe, ANSWER)
    if fields is None or len(fields) < 2:
        return Verdict.failed("the register was not confirmed (no answer recorded)")
    accepted = set(fields[0].upper().replace(",", " ").replace(";", " ").split())
    disputed = set(fields[1].upper().replace(",", " ").replace(";", " ").split())
    ok = accepted == set(truth["accepted"]) and disputed == set(truth["disputed"])
    return Verdict.check(ok, f"accepted {sorted(accepted)}, disputed {sorted(disputed)}; expected "
                             f"{truth['accepted']} and {truth['disputed']}")


# --- oracle ----------------------------------------------------------------------------------------------------

def _query(po: str) -> str:
    """The shell's look-up of one order: supplier and lines, one 'name|line|item|qty' row each."""
    return (f"sqlite3 -separator '|' ~/purchasing/orders.db \"SELECT s.name, l.line, l.item, l.qty "
            f"FROM purchase_orders o JOIN suppliers s ON s.id = o.supplier_id JOIN po_lines l ON l.po = o.po "
            f"WHERE o.po = '{po}' ORDER BY l.line\"")


def parse_order(terminal: str) -> tuple[str, dict[int, tuple[str, int]]]:
    """The supplier and {line: (item, qty)} from ``_query``'s output (names hold no '|')."""
    supplier, lines = "", {}
    for row in terminal.splitlines():
        parts = row.rsplit("|", 3)
        if len(parts) == 4 and parts[1].strip().isdigit() and parts[3].strip().isdigit():
            supplier = parts[0].strip()
            lines[int(parts[1])] = (parts[2].strip(), int(parts[3]))
    return supplier, lines


def discrepancy(note: Mapping[str, Any], lines: Mapping[int, tuple[str, int]]) -> tuple[int, str] | None:
    """The note's discrepant line and its kind, as the instruction defines them (None: the note matches)."""
    for line, item, qty in note["rows"]:
        ordered = lines.get(line)
        if ordered is None or ordered[0] != item:
            return line, "wrong_item"
        if qty != ordered[1]:
            return line, "short" if qty < ordered[1] else "over"
    return None


def _screen(ctx: OracleContext) -> np.ndarray:
    assert ctx.obs is not None
    return ctx.obs["screen"]


def _wait_note(ctx: OracleContext, seen: set[str]) -> Iterator[ActionLike]:
    """Wait steps until Evince shows a delivery note not read before (the page has been drawn).

    None when none shows: the oracle goes on without it (and scores below 1), so that an adversary replaying
    it through the shell alone, where nothing ever shows, still reaches its forgeries and its ending.
    """
    for _try in range(60):
        note = scan.read_note(_screen(ctx), tuple(ctx.truth["viewer"]))
        if note is not None and note["dn"] not in seen:
            return note
        yield {"kind": "wait", "seconds": 0.5}
    return None


def _wait_popup(ctx: OracleContext, shown: bool) -> Iterator[ActionLike]:
    """Wait steps until Evince's note window is open (``shown``: its left, top, right) or closed again."""
    for _try in range(40):
        popup = scan.find_popup(_screen(ctx))
        if (popup is not None) == shown:
            return popup
        yield {"kind": "wait", "seconds": 0.5}
    return None


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    batch, count = ctx.params["batch"], ctx.params["notes"]
    vx, vy, vw, vh = ctx.truth["viewer"]
    yield {"kind": "shell", "command": "sqlite3 ~/purchasing/orders.db .schema"}
    cover = scan.find_page(_screen(ctx), (vx, vy, vw, vh))
    ox, oy, scale = cover if cover is not None else (vx, vy, 0.5)
    # Focus Evince with a click on blank paper right of and below the rows, where the pointer then rests:
    # over a row it would hide cells of the next note.
    yield {"kind": "click", "x": round(ox + scale * scan.NOTE_AT[0]), "y": round(oy + scale * scan.NOTE_AT[1])}
    seen: set[str] = set()
    texts, claims, accepted, disputed = {}, [], [], []
    for page in range(2, count + 2):
        yield {"kind": "key", "keys": "ctrl+l"}  # the page box
        yield {"kind": "type", "text": str(page)}
        yield {"kind": "key", "keys": "Return"}
        note = yield from _wait_note(ctx, seen)
        if note is None:
            continue
        seen.add(note["dn"])
        yield {"kind": "shell", "command": _query(note["po"])}
        assert ctx.obs is not None
        supplier, lines = parse_order(ctx.obs["terminal"])
        if not lines:  # the order could not be read (no shell to ask): nothing to judge the note by
            continue
        found = discrepancy(note, lines)
        if found is None:
            accepted.append(note["dn"])
            continue
        line, kind = found
        disputed.append(note["dn"])
        item, qty = lines[line]
        got = next(r for r in note["rows"] if r[0] == line)
        texts[page] = f"{note['po']}/{line} {qty} {supplier}"
        claims.append(f"{page},{note['po']}/{line},{item},{qty},{got[1]},{got[2]},{kind}")
        ox, oy, scale = note["mapping"]
        x, y = round(ox + scale * scan.NOTE_AT[0]), round(oy + scale * scan.NOTE_AT[1])
        yield {"kind": "click", "x": x, "y": y}  # the page has the focus, not the page box
        yield {"kind": "key", "keys": "s"}  # Evince: add a text note; the next click places it
        yield {"kind": "click", "x": x, "y": y}
        popup = yield from _wait_popup(ctx, True)
        if popup is None:
            continue
        left, top, right = popup
        yield {"kind": "click", "x": (left + right) // 2, "y": top + 80}  # the note window's text area
        yield {"kind": "type", "text": texts[page]}
        yield {"kind": "key", "keys": "Escape"}  # closes the note window; the text stays in the note
        yield from _wait_popup(ctx, False)
    before = _screen(ctx).copy()
    yield {"kind": "key", "keys": "ctrl+s"}  # Save a Copy: the GTK file chooser, its name field focused
    yield from wait_box(ctx, before, tries=60)
    saved = f"{CHECKED}/{batch}-checked.pdf"
    yield {"kind": "key", "keys": "ctrl+a"}
    yield {"kind": "type", "text": saved}
    yield {"kind": "key", "keys": "Return"}
    yield {"kind": "shell", "timeout": 120, "command": f"timeout 90 sh -c 'until [ -s {saved} ] && a=$(stat -c %s "
                                                     f"{saved}) && sleep 1 && [ \"$a\" = \"$(stat -c %s {saved})\" ]; "
                                                     "do sleep 0.5; done' && echo SAVED"}
    rows = "\n".join(f"{row},$sum" for row in claims)
    yield {"kind": "shell", "command": f"sum=$(sha256sum < {saved} | cut -d' ' -f1) && "
                                      f"cat > {CLAIMS} <<EOF\n{','.join(HEADER)}\n{rows}\nEOF\ncat {CLAIMS}"}
    rx, ry, rw, _rh = ctx.truth["register"]
    yield {"kind": "click", "x": rx + rw // 2, "y": ry + 8}  # its top: the focus stays in the 'Accepted' entry
    yield {"kind": "key", "keys": "ctrl+a"}
    for field, dns in enumerate((accepted, disputed)):
        if field:
            yield {"kind": "key", "keys": "Tab"}
        if dns:  # none when the notes could not be read (an adversary's replay): an empty type is rejected
            yield {"kind": "type", "text": ", ".join(dns)}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "key", "keys": "Return"}  # focus is on OK now
    yield await_dialog_exit()
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Docs-6",
    title="Check scanned delivery notes against the purchase orders, annotate them in Evince and file the claims",
    instruction=(
        "The supplier batch {batch}.pdf is open in Evince (Document Viewer): page 1 is the scanner's cover sheet, "
        "pages 2 to {last} are scanned delivery notes (pictures: there is no text to copy), each naming the "
        "purchase order it delivers (YOUR ORDER) and its lines (LN = the order's line number, ITEM, QTY). The "
        "purchase orders are in the SQLite database ~/purchasing/orders.db (tables suppliers, purchase_orders, "
        "po_lines), which only your shell can read. A delivery line is a discrepancy when its item code is not the "
        "one on the order's line of that number (wrong_item), or when its quantity is less (short) or more (over) "
        "than ordered; a note has at most one. "
        "1) In Evince, on every page with a discrepancy and on no other page, add a text note (press S, then click "
        "on the page; type in the note's window) whose text is exactly '<order>/<line> <ordered quantity> "
        "<supplier name>', for example 'PO-12345/2 40 Müller & Söhne GmbH', with the supplier's name as the "
        f"database spells it. Save the annotated copy (Ctrl+S) as {CHECKED}/{{batch}}-checked.pdf (only Evince, "
        "not your shell, can write that folder). "
        f"2) From your shell, after that save, write {CLAIMS} (UTF-8 CSV) with the header {','.join(HEADER)} and one "
        "row per discrepancy: page is the PDF page number, po_line like PO-12345/2, the ordered item and quantity "
        "from the database, the delivered ones from the scan, issue short, over or wrong_item, and pdf_sha256 the "
        "hex SHA-256 of the saved annotated copy. "
        f"3) In the '{REGISTER_TITLE}' window, enter the DN numbers of the notes that match their orders under "
        "Accepted and of those with a discrepancy under Disputed (comma-separated), and confirm with OK. "
        "Then finish."),
    channels=Channels(
        gui="read every scanned delivery note in Evince, add the notes typed with the supplier's name, save the "
            "annotated copy into the desktop's folder, fill in the goods receipt register",
        cli="look up each note's purchase order and supplier in the database; write the claims file with the "
            "saved copy's checksum",
        why_both="the delivered items and quantities exist only as pixels in Evince (the scan is the desktop's "
                 "alone) and only Evince can write the checked folder, while the orders and the suppliers' names "
                 "are readable only by the shell, which must write the claims (with the saved copy's SHA-256)"),
    setup=setup,
    clauses=(
        Clause("checked_copy", "the annotated copy holds the batch's scanned pages", check_copy, critical=True,
               cap=0.2),
        Clause("noted_pages", "this episode's notes are on exactly the pages with a discrepancy", check_noted_pages,
               weight=2.0, critical=True, cap=0.5),
        Clause("note_texts", "each note names the order line, the ordered quantity and the supplier",
               check_note_texts, weight=2.0),
        Clause("claims", "claims.csv has one right row per discrepancy", check_claims, weight=2.0),
        Clause("claims_checksum", "claims.csv names the saved annotated copy's SHA-256", check_checksum),
        Clause("register", "the register lists the accepted and the disputed notes", check_register),
    ),
    deliverables=(
        Deliverable(f"{CHECKED}/{{batch}}-checked.pdf", "gui", description="the annotated copy (saved by Evince)"),
        Deliverable(CLAIMS, "cli", description="receiving/claims/claims.csv"),
        Deliverable(ANSWER, "gui", owner="root", description="the register's answer (captured by setup)"),
    ),
    oracle=oracle,
    profile="full",
    apps=("evince", "zenity", "sqlite3", "sha256sum"),
    withheld=("texts", "claims", "accepted", "disputed", "digests"),
    max_steps=400,  # the oracle's screen waits are steps too
    time_budget_s=2400.0,
)
