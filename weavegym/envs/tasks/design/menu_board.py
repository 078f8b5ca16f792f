"""Weave-Design-5: a café's menu board corrected in Inkscape from the manager's marked-up proof, then sent to print.

The marks (which slot, what change) exist only as pixels: a Tk "Menu proof" window (the desktop account's, fed
from a root-only file that setup deletes once it is up) draws each section's circled lines in dot-matrix text
behind a tab. What a mark turns into exists only for the shell: a SQLite menu database (in a folder only the
workspace account may open) with each dish's cost, each section's markup and rounding, the approved renames and
the winter stand-ins, with decoys (renames the proof did not approve, summer stand-ins, stale board prices). So
per mark: read it on the proof (GUI) -> query and compute in the shell (CLI) -> edit the text in Inkscape (GUI,
French, Japanese and Greek names typed). The board lives in ~/studio, which only the desktop account can write
(2755): only Inkscape's save changes it. The print files are the shell's: a PNG that Inkscape's command line
renders from the saved board and a print order naming both files' SHA-256 and the changed texts.
"""

from __future__ import annotations

import json
import re
import shlex
import unicodedata
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import DESKTOP_USER, HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.design import menu_books as mb
from weavegym.evaluators import Clause, Probe, Verdict

APP_DIR = "/usr/local/share/menuproof"
PROOF_IN = f"{PRIVATE_DIR}/menuproof.json"
DB_DIR = "/srv/menudb"
DB = f"{DB_DIR}/menu.db"
STUDIO = f"{HOME}/studio"
BOARD = f"{STUDIO}/menu-board.svg"
PRINT = f"{HOME}/print"
PNG = f"{PRINT}/menu-board.png"
ORDER = f"{PRINT}/print-order.json"
PROOF_AT = (0, 40)
INK = "{http://www.inkscape.org/namespaces/inkscape}"
WAIT_TRIES = 12


def setup(ctx: SetupContext) -> Prepared:
    w = mb.world(ctx.rng)
    ctx.run(["install", "-d", "-m", "0700", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, DB_DIR])
    ctx.write_file(DB, database_bytes(mb.SCHEMA, mb.db_rows(w)), owner=WORKSPACE_USER, mode=0o600)
    # ~/studio: the desktop account's alone to write (its Inkscape saves there); the shell reads via the group.
    ctx.run(["install", "-d", "-m", "2755", "-o", DESKTOP_USER, "-g", SHARED_GROUP, STUDIO])
    ctx.write_file(BOARD, mb.board_svg(w), mode=0o644)
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, PRINT])
    # Names are typed key by key: a stalled guest X server must not autorepeat a key (see Weave-Data-6).
    ctx.run(["env", "DISPLAY=:0", "xset", "r", "off"], user=ctx.user)
    proof = _open_proof(ctx, w)
    ctx.launch_gui(f"cd {STUDIO} && {{as_user}} inkscape {BOARD}", name="inkscape")
    ink = _inkscape_window(ctx, ctx.wait_window(r"^menu-board\.svg - Inkscape$", timeout=400).id)
    proof = ctx.place_window(proof, PROOF_AT)
    if proof[0] + proof[2] + 8 > ink[0]:
        raise TaskError(f"{ctx.task_id} setup: the Menu proof {proof} and Inkscape {ink} overlap")
    page = _fit_page(ctx, ink)
    return Prepared(params={"cafe": w["cafe"].title()},
                    truth={"proof": mb.proof_targets(proof), "page": page, "changes": w["changes"],
                           "original": mb.board_texts(w)})


def _open_proof(ctx: SetupContext, w: Mapping[str, Any]) -> int:
    """Start the Menu proof with the marks on its stdin, wait until its cover is drawn, delete the input."""
    ctx.write_file(f"{APP_DIR}/menu_proof.py", ctx.fixture(__package__, "fixtures/menu_proof.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    proof = {"sections": list(mb.SECTIONS), "lines": [mb.proof_lines(m) for m in w["marks"]],
             "layout": mb.proof_layout()}
    ctx.write_file(PROOF_IN, json.dumps(proof), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP_DIR}/menu_proof.py < {PROOF_IN}", name="menuproof")
    window = ctx.wait_window("^Menu proof$")
    targets = mb.proof_targets(window.geometry)
    try:  # mapped is not drawn (TCG); the cover is drawn after the marks were read from stdin
        wait_for(lambda: mb.shown_title(ctx.client.screenshot().image, targets) == "MENU PROOF", 120,
                 what="the Menu proof drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", PROOF_IN])  # the window has read it: the marks now live only on screen
    return window.id


def _inkscape_window(ctx: SetupContext, window_id: int) -> list[int]:
    """Inkscape's window, once it sits right of the proof (the board's namedview asks for that geometry; the
    window manager may place it a little differently, and a window it cannot shrink is moved, not resized)."""
    width, height, x, y = mb.WINDOW
    ctx.run(["env", "DISPLAY=:0", "xdotool", "windowsize", str(window_id), str(width), str(height), "windowmove",
             str(window_id), str(x), str(y)], user=ctx.user)

    def placed() -> list[int] | None:
        found = next((w for w in ctx.client.list_windows(timeout=10)[0] if w.id == window_id), None)
        return found.geometry if found is not None and x - 4 <= found.x <= x + 16 else None

    try:
        return wait_for(placed, 60, what="Inkscape's window beside the proof", max_poll=0.5)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None


def _blank_point(image: np.ndarray, area: list[int]) -> tuple[int, int] | None:
    """A point of the board's background with nothing drawn within 10 px, inside the window ``area``."""
    x, y, width, height = area
    mask = np.abs(image[y:y + height, x:x + width, :3].astype(int) - mb.BG).max(axis=2) < 10
    sums = np.pad(mask.astype(int).cumsum(0).cumsum(1), ((1, 0), (1, 0)))
    box = sums[21:, 21:] - sums[:-21, 21:] - sums[21:, :-21] + sums[:-21, :-21]
    ys, xs = np.nonzero(box == 21 * 21)
    if xs.size == 0:
        return None
    pick = int(np.argmax(ys))  # the lowest blank spot: below the last row of dishes
    return int(x + xs[pick] + 10), int(y + ys[pick] + 10)


def _fit_page(ctx: SetupContext, ink: list[int]) -> list[int]:
    """Inkscape keeps its zoom when setup resizes its window: click the board's background (it is locked, so
    nothing gets selected) and press 5 (zoom to page), then return the page's screen box once it is drawn."""
    try:
        point = wait_for(lambda: _blank_point(ctx.client.screenshot().image, ink), 300,
                         what="the board drawn in Inkscape", max_poll=2.0)
        ctx.client.click(*point)
        ctx.client.key("5")
        seen: list[tuple[int, int, int, int] | None] = [None]

        def settled() -> tuple[int, int, int, int] | None:
            """The page's box once two screenshots in a row agree on it (the zoom and scroll bars have settled)."""
            now = mb.find_page(ctx.client.screenshot().image)
            same = now is not None and now == seen[-1]
            seen.append(now)
            return now if same else None

        page = wait_for(settled, 180, what="the whole page shown, settled", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    return list(page)


# -- the checker --------------------------------------------------------------------------------------------


def _nfc(text: str) -> str:
    """NFC, with any run of white space (a no-break space too: Inkscape's Ctrl+Space) read as one space."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def board_texts(probe: Probe) -> tuple[dict[str, str] | None, list[str], str]:
    """The saved board's texts by id, the non-empty texts without a board id, and why it could not be read."""
    root = probe.xml(BOARD)
    if root is None:
        return None, [], f"{BOARD} is missing or not XML"
    texts, strays = {}, []
    for element in root.iter():
        if not isinstance(element.tag, str) or not element.tag.endswith("}text"):
            continue
        content = _nfc("".join(element.itertext()))
        if element.get("id"):
            texts[element.get("id")] = content
        if element.get("id") is None or not re.fullmatch(r"(title|footer|section-\d|(num|name|price)-\d+)",
                                                         element.get("id", "")):
            strays.append(content) if content else None
    return texts, strays, ""


def check_marks(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    texts, _strays, why = board_texts(probe)
    if texts is None:
        return Verdict.failed(why)
    wrong = [f"{field}-{slot}: {texts.get(f'{field}-{slot}')!r} (expected {text!r})"
             for slot, field, text in truth["changes"] if texts.get(f"{field}-{slot}") != _nfc(text)]
    good = len(truth["changes"]) - len(wrong)
    evidence = f"{good}/{len(truth['changes'])} marked texts changed as the proof and database say; wrong: " \
               f"{'; '.join(wrong[:4]) or 'none'}"
    if not wrong:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if good * 2 >= len(truth["changes"]) else Verdict.failed(evidence)


def check_rest_intact(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    """Every unmarked text is as it was, nothing was added, and the file is Inkscape's save (stamped with its
    version), owned by the desktop account."""
    texts, strays, why = board_texts(probe)
    stat = probe.stat(BOARD)
    if texts is None or stat is None:
        return Verdict.failed(why or f"{BOARD} is missing")
    changed = {f"{field}-{slot}" for slot, field, _ in truth["changes"]}
    altered = [key for key, text in truth["original"].items() if key not in changed and texts.get(key) != _nfc(text)]
    root = probe.xml(BOARD)
    saved = root is not None and bool(root.get(f"{INK}version"))  # Inkscape stamps its version when it saves
    ok = not altered and not strays and saved and stat.owner == DESKTOP_USER
    return Verdict.check(ok, f"unmarked texts altered: {altered[:4] or 'none'}; added texts: {strays[:3] or 'none'}; "
                             f"saved by Inkscape: {saved}; owner {stat.owner} (expected {DESKTOP_USER})")


def check_png(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    image, png, svg = probe.image(PNG), probe.stat(PNG), probe.stat(BOARD)
    if image is None or png is None or svg is None:
        return Verdict.failed(f"{PNG} is missing or not an image (or the board is gone)")
    size = image.shape[1], image.shape[0]
    corners = [image[4, 4, :3], image[-5, -5, :3]]
    board = all(np.abs(c.astype(int) - mb.BG).max() < 12 for c in corners)
    after = png.mtime >= svg.mtime
    ok = size == (mb.WIDTH, mb.HEIGHT) and board and after
    return Verdict.check(ok, f"{size[0]}x{size[1]} (expected {mb.WIDTH}x{mb.HEIGHT}); the board's background in "
                             f"its corners: {board}; rendered after the board's last save: {after}")


def check_order(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    try:
        order = probe.json(ORDER)
    except ValueError as exc:
        return Verdict.failed(f"{ORDER} is not JSON: {exc}")
    if not isinstance(order, dict):
        return Verdict.failed(f"{ORDER} is missing or not a JSON object")
    board_ok = str(order.get("board_sha256", "")).lower() == (probe.sha256(BOARD) or "-")
    png_ok = str(order.get("png_sha256", "")).lower() == (probe.sha256(PNG) or "-")
    found = set()
    for item in order.get("changes") or []:
        if isinstance(item, dict):
            found.add((item.get("slot"), item.get("field"), _nfc(str(item.get("text", "")))))
    want = {(slot, field, _nfc(text)) for slot, field, text in truth["changes"]}
    return Verdict.check(board_ok and png_ok and found == want,
                         f"board_sha256 matches the saved board: {board_ok}; png_sha256 matches the PNG: {png_ok}; "
                         f"changes: {len(found & want)}/{len(want)} right, {len(found - want)} wrong")


# -- the oracle ---------------------------------------------------------------------------------------------


def _wait_until(ctx: OracleContext, ready: Any) -> Iterator[ActionLike]:
    """Wait steps until ``ready(screen)`` holds: a redraw may trail under TCG."""
    for _ in range(WAIT_TRIES):
        assert ctx.obs is not None
        if ready(ctx.obs["screen"]):
            return
        yield {"kind": "wait", "seconds": 1}


def slot_sql(slot: int) -> str:
    """One row per slot: the dish's code, new price (cents), approved rename, and winter stand-in with its price."""
    rule = "((({cost} * (100 + p.markup_pct)) + 100 * p.round_up_to_cents - 1) / (100 * p.round_up_to_cents)) " \
           "* p.round_up_to_cents"
    return (f"SELECT 'SLOT', d.slot, d.code, {rule.format(cost='d.cost_cents')}, IFNULL(r.new_name, ''), "
            f"IFNULL(s.name, ''), IFNULL({rule.format(cost='s.cost_cents')}, '') FROM dishes d "
            f"JOIN pricing p ON p.section = d.section LEFT JOIN renames r ON r.code = d.code "
            f"LEFT JOIN seasonal s ON s.slot = d.slot AND s.season = '{mb.SEASON}' WHERE d.slot = {slot};")


def _settled(ctx: OracleContext, page: list[int]) -> Iterator[ActionLike]:
    """Wait steps until two observations in a row show the same board: Inkscape has caught up with the input
    (a click that lands while it still works through earlier keys can miss the text and start a new one)."""
    x, y, width, height = page
    previous = None
    for _ in range(WAIT_TRIES):
        assert ctx.obs is not None
        now = ctx.obs["screen"][y:y + height, x:x + width]
        if previous is not None and np.array_equal(now, previous):
            return
        previous = now.copy()
        yield {"kind": "wait", "seconds": 1}


def _edit(ctx: OracleContext, page: list[int], slot: int, field: str, text: str) -> Iterator[ActionLike]:
    """Once the board is still: click into the text (the text tool is on), select all of it, type the new text,
    leave it. Whether it took is read back from the saved file (the oracle's read-back round)."""
    yield from _settled(ctx, page)
    assert ctx.obs is not None
    point = mb.ink_point(ctx.obs["screen"], page, slot, field)
    if point is None:
        return
    yield {"kind": "click", "x": point[0], "y": point[1]}
    yield {"kind": "key", "keys": "ctrl+a"}
    # Inkscape's text tool drops a typed space under xdotool-style input; Ctrl+Space's no-break space is
    # what it inserts for one, and the board reads it as a space.
    yield {"kind": "type", "text": text.replace(" ", "\u00a0")}
    yield {"kind": "key", "keys": "Escape"}


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Per section: its marks off the proof (GUI); per mark its figures from the database (CLI) and the edit in
    Inkscape (GUI); then save, read the saved texts back in the shell and redo the edits that did not take (a
    lagging canvas can lose a click or a Ctrl+A); then the PNG and print order from the saved board (CLI)."""
    targets, page = ctx.truth["proof"], ctx.truth["page"]
    blank = mb.to_screen(page, mb.WIDTH // 2, 550)
    yield {"kind": "click", "x": blank[0], "y": blank[1]}  # the locked background: focus, nothing selected
    yield {"kind": "key", "keys": "t"}  # the text tool: a click on a text then puts the cursor into it
    changes: list[dict[str, Any]] = []
    for index, section in enumerate(mb.SECTIONS):
        tab = targets["tabs"][index]
        yield {"kind": "click", "x": tab[0], "y": tab[1]}
        yield from _wait_until(ctx, lambda s, name=section: mb.shown_title(s, targets) == name)
        assert ctx.obs is not None
        for slot, kind in mb.read_marks(ctx.obs["screen"], targets):
            yield {"kind": "shell", "command": f"sqlite3 -separator '|' {DB} {shlex.quote(slot_sql(slot))}"}
            found = re.search(rf"^SLOT\|{slot}\|D\d+\|(\d+)\|(.*?)\|(.*?)\|(\d*)\s*$",
                              ctx.obs.get("terminal", "").replace("\r", ""), re.M)
            if found is None:
                continue
            edits = {"PRICE": [("price", mb.euros(int(found[1])))], "NEW NAME": [("name", found[2])]}.get(kind)
            if edits is None:  # sold out: the winter stand-in if there is one, else the sold-out word
                edits = ([("price", mb.euros(int(found[4]))), ("name", found[3])] if found[3]
                         else [("price", mb.SOLD_OUT_WORD)])
            for field, text in edits:
                yield from _edit(ctx, page, slot, field, text)
                changes.append({"slot": slot, "field": field, "text": text})
    saved = ""
    for _ in range(3):
        yield {"kind": "key", "keys": "ctrl+s"}
        yield {"kind": "shell", "timeout": 200, "command": READ_BACK.format(board=shlex.quote(BOARD), before=saved)}
        terminal = ctx.obs.get("terminal", "").replace("\r", "") if ctx.obs else ""
        digest = re.findall(r"^SAVED ([0-9a-f]{64})$", terminal, re.M)
        saved = digest[-1] if digest else saved
        shown = dict(re.findall(r"^TEXT\|([a-z]+-\d+)\|(.*)$", terminal, re.M))
        redo = [c for c in changes if _nfc(shown.get(f"{c['field']}-{c['slot']}", "")) != _nfc(c["text"])]
        if not redo:
            break
        for change in redo:
            yield from _edit(ctx, page, change["slot"], change["field"], change["text"])
    yield {"kind": "shell", "timeout": 300,
           # The shell cannot write the desktop's ~/.config: Inkscape's preferences go to /tmp.
           "command": "XDG_CONFIG_HOME=/tmp/ink-config XDG_CACHE_HOME=/tmp/ink-cache inkscape "
                      f"{shlex.quote(BOARD)} --export-type=png --export-dpi=96 --export-filename={PNG} 2>/dev/null; "
                      f"sha256sum {shlex.quote(BOARD)} {PNG}"}
    yield {"kind": "python", "code": ORDER_PY.format(board=BOARD, png=PNG, order=ORDER,
                                                     changes=json.dumps(changes, ensure_ascii=False))}
    yield {"kind": "done"}


# Waits until Inkscape's save is on disk (its version stamp, and a checksum other than the last save's), then
# prints the checksum and every slot's texts as the saved file has them.
READ_BACK = ("timeout 150 sh -c 'until grep -q inkscape:version= {board} && "
             "[ \"$(sha256sum < {board} | cut -c1-64)\" != \"{before}\" ]; do sleep 0.5; done'; "
             "echo SAVED $(sha256sum < {board} | cut -c1-64); "
             "python3 -c 'import sys, xml.etree.ElementTree as E\n"
             "for e in E.parse(sys.argv[1]).iter():\n"
             " i = e.get(\"id\", \"\")\n"
             " if e.tag.endswith(\"}}text\") and i[:3] in (\"nam\", \"pri\"): print(\"TEXT|\" + i + \"|\" + "
             "\"\".join(e.itertext()))' {board}")


ORDER_PY = """import hashlib, json
changes = json.loads({changes!r})
digest = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
order = {{"board_sha256": digest({board!r}), "png_sha256": digest({png!r}), "changes": changes}}
with open({order!r}, "w", encoding="utf-8") as f:
    json.dump(order, f, ensure_ascii=False, indent=1)
print(open({order!r}, encoding="utf-8").read())
"""

TASK = Task(
    id="Weave-Design-5",
    title="Correct the café's menu board in Inkscape from the manager's marked-up proof, then send it to print",
    instruction=(
        "Café {cafe} is updating its menu board. The board " + BOARD + " is open in Inkscape (only Inkscape can save "
        "in ~/studio); the small number before each dish is its slot. The 'Menu proof' window shows the manager's "
        "marks: click a section's tab to see its circled lines, each 'SLOT <n> <mark>'. The menu database " + DB +
        " (SQLite, for your shell) has the tables dishes (code, slot, section, name, cost_cents), pricing "
        "(section, markup_pct, round_up_to_cents), renames (code, new_name) and seasonal (slot, season, name, "
        "cost_cents). A price is cost_cents x (100 + markup_pct of the slot's section) / 100, rounded up to the next "
        "multiple of round_up_to_cents, written in euros with two decimals and a dot (for example 4.60). In "
        "Inkscape, apply every mark and change nothing else: PRICE: the slot's price becomes its dish's price by "
        "that rule; NEW NAME: the slot's name becomes its dish's new_name in renames, spelt exactly as there "
        "(a no-break space, Inkscape's Ctrl+Space, counts as a space); SOLD "
        "OUT: if seasonal has a 'winter' stand-in for the slot, the slot shows it instead (its name, and its price "
        "by the rule from its cost_cents and the slot's section), otherwise the slot's price becomes the word "
        f"{mb.SOLD_OUT_WORD} and its name stays. Save the board there with Ctrl+S (same file). Then, from your "
        f"shell, render the saved board with Inkscape's command line as a PNG at 96 dpi ({mb.WIDTH}x{mb.HEIGHT}) "
        "to " + PNG + ", and write " + ORDER + ": a JSON object with board_sha256 (the SHA-256 of the saved "
        "board file), png_sha256 (the PNG's) and changes: a list with one object per text you changed, with "
        "the keys slot (its number), field (\"name\" or \"price\") and text (its new text). Then finish with done."),
    channels=Channels(
        gui="read each section's marks on the Menu proof; edit the marked names and prices in Inkscape (typing "
            "French, Japanese and Greek names) and save the board",
        cli="look up each marked slot's price rule, rename or winter stand-in in the menu database; render the saved "
            "board with Inkscape's command line and write the print order with both checksums",
        why_both="the marks exist only as pixels on the proof and the board can only be saved by Inkscape, while the "
                 "prices, names and stand-ins are in a database only the shell can open and the print files belong "
                 "in the shell's own folder, made from the saved board"),
    setup=setup,
    clauses=(
        Clause("marked_texts", "every marked name and price reads as the proof and the database say", check_marks,
               weight=3.0, critical=True, cap=0.3),
        Clause("rest_intact", "the rest of the board is unchanged and the file is Inkscape's save", check_rest_intact,
               critical=True, cap=0.5),
        Clause("print_png", "the PNG is a 96 dpi render of the board made after its save", check_png, critical=True,
               cap=0.5),
        Clause("print_order", "the print order names both files' SHA-256 and exactly the changed texts",
               check_order, critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(BOARD, "gui", description="~/studio/menu-board.svg (saved by Inkscape)"),
        Deliverable(PNG, "cli", description="~/print/menu-board.png (rendered by the shell)"),
        Deliverable(ORDER, "cli", description="~/print/print-order.json"),
    ),
    withheld=("changes",),
    oracle=oracle,
    profile="full",
    apps=("inkscape", "Menu proof (python3-tk)", "sqlite3", "inkscape CLI"),
    max_steps=200,  # the oracle takes about 50 steps, and up to WAIT_TRIES waits per redraw
    time_budget_s=2400.0,
)
