"""Weave-Productivity-8: sort the morning's scanned post into the departments' folders with Thunar.

Three apps, data flowing both ways between the channels. The Mailroom Scanner (a Tk app, the desktop account's)
shows six letters one at a time, only as dot-matrix pixels (pixel_font, fed from a root-only file that setup
deletes once drawn): the first eight hex digits of the scan's SHA-256, the sender, the customer reference as
printed, the date and the subject. The scans themselves lie in ~/postroom/inbox under meaningless names
(scan-0123.pdf). ~/crm.db (SQLite, readable by the workspace account alone) maps references to customers and
accounts (department, client folder, account manager), with the mailroom's rules: a misprinted reference (O for
0, I for 1), a closed customer whose successor takes the post, near namesakes with other accounts. The post room
belongs to the desktop account (2755): the shell can read it but only Thunar can rename the scan to its filing
name, create a missing client folder and move the scan there. The scanner then takes the filing's path, checks
the file is really in place (its hash, its folder, its name, no copy left in the inbox), shows a receipt code
(pixels only) and the next letter. The shell writes the routing log ~/outbox/routing.txt (a folder only it may
write) with each letter's receipt code, reference, department, manager and SHA-256.

Scoring: every letter filed at the right path with its bytes intact (by the desktop account), nothing left in
the inbox and nothing stray in the post room, the scanner's confirmations, the routing log.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import sqlite3
from collections.abc import Generator, Iterator, Mapping
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import (
    DESKTOP_USER,
    HOME,
    PRIVATE_DIR,
    SHARED_GROUP,
    WORKSPACE_USER,
    SetupContext,
)
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.games.sgt_common import changed_box, changed_pixels
from weavegym.envs.tasks.productivity import _mailroom as mr
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

DB = f"{HOME}/crm.db"
POSTROOM = f"{HOME}/postroom"
INBOX = f"{POSTROOM}/inbox"
OUTBOX = f"{HOME}/outbox"
LOG = f"{OUTBOX}/routing.txt"
APP_DIR = "/usr/local/share/mailroom"
APP = f"{APP_DIR}/mailroom_scanner.py"
SCANNER_IN = f"{PRIVATE_DIR}/mailroom-scanner.json"
RECORD = f"{PRIVATE_DIR}/mailroom-records.jsonl"
THUNAR_TITLE = "^inbox - Thunar$"
SCHEMA = ("CREATE TABLE customers (ref TEXT PRIMARY KEY, name TEXT NOT NULL, status TEXT NOT NULL, "
          "successor TEXT REFERENCES customers(ref), account_id INTEGER NOT NULL REFERENCES accounts(account_id));"
          "CREATE TABLE accounts (account_id INTEGER PRIMARY KEY, client_folder TEXT NOT NULL, "
          "department TEXT NOT NULL, manager TEXT NOT NULL);"
          "CREATE TABLE rules (rule_no INTEGER PRIMARY KEY, rule TEXT NOT NULL);")
MAX_LOG = 64 << 10

# ---- setup -------------------------------------------------------------------------------------------------


def database(p: Mapping[str, Any]) -> bytes:
    """The CRM of plan ``p``: customers (by reference), accounts, the mailroom's rules."""
    con = sqlite3.connect(":memory:")
    con.executescript(SCHEMA)
    con.executemany("INSERT INTO accounts VALUES (?, ?, ?, ?)",
                    [(a["account_id"], a["client_folder"], a["department"], a["manager"])
                     for a in sorted(p["accounts"], key=lambda a: a["account_id"])])
    con.executemany("INSERT INTO customers VALUES (?, ?, ?, ?, ?)",
                    [(c["ref"], c["name"], c["status"], c["successor"], c["account_id"])
                     for c in sorted(p["customers"], key=lambda c: c["ref"])])
    con.executemany("INSERT INTO rules VALUES (?, ?)", list(enumerate(mr.RULES, 1)))
    con.commit()
    data = con.serialize()
    con.close()
    return bytes(data)


def _dir(ctx: SetupContext, path: str) -> None:
    """A post room folder: the desktop account's, readable (not writable) by the workspace account."""
    ctx.run(["install", "-d", "-m", "2755", "-o", DESKTOP_USER, "-g", SHARED_GROUP, path])


def setup(ctx: SetupContext) -> Prepared:
    p = mr.plan(ctx.rng)
    # The workspace account's alone (0600): a terminal on the desktop runs as the desktop account and cannot read it.
    ctx.write_file(DB, database(p), owner=WORKSPACE_USER, mode=0o600)
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, OUTBOX])
    for path in (POSTROOM, INBOX, *(f"{POSTROOM}/{d}" for d in mr.DEPARTMENTS),
                 *(f"{POSTROOM}/{d}/{f}" for d, f in p["folders"])):
        _dir(ctx, path)
    for letter in p["letters"]:
        ctx.write_file(f"{INBOX}/{letter['scan']}", letter["data"], mode=0o644)
    for old in p["old_post"]:
        ctx.write_file(f"{POSTROOM}/{old['path']}", old["data"], mode=0o644)
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/mailroom_scanner.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    conf = {"letters": [{k: x[k] for k in ("lines", "sha256", "path")} for x in p["letters"]],
            "root": POSTROOM, "inbox": INBOX, "layout": mr.layout()}
    ctx.write_file(SCANNER_IN, json.dumps(conf), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {SCANNER_IN} > {RECORD}", name="scanner")
    scanner = ctx.wait_window(f"^{mr.TITLE}$")
    ctx.place_window(scanner.id, mr.SCANNER_AT)
    _wait_drawn(ctx, mr.SCANNER_AT)
    ctx.run(["rm", "-f", SCANNER_IN])  # the window has read it: the letters now live only on screen
    ctx.launch_gui(f"cd {HOME} && {{as_user}} thunar {INBOX}", name="thunar")
    thunar = ctx.wait_window(THUNAR_TITLE, timeout=180)
    geometry = ctx.place_window(thunar.id, mr.THUNAR_AT, size=mr.THUNAR_SIZE)
    at = _wait_drawn(ctx, mr.SCANNER_AT)  # still where it was, beside Thunar
    if geometry[0] + geometry[2] > at[0]:
        raise TaskError(f"{ctx.task_id} setup: Thunar {geometry} overlaps the scanner at {at}")
    letters = [{k: x[k] for k in ("number", "sender", "printed_ref", "ref", "department", "client_folder", "manager",
                                  "sha256", "name", "path", "scan")} for x in p["letters"]]
    truth = {"letters": letters, "first_path": letters[0]["path"], "count": len(letters),
             "expected_dirs": sorted({f"{d}/{f}" for d, f in p["folders"]} |
                                     {f"{x['department']}/{x['client_folder']}" for x in letters}),
             "old_post": {o["path"]: _sha(o["data"]) for o in p["old_post"]},
             "scanner_at": list(at), "thunar": list(geometry),
             "targets": {"scan": mr.centre(at, mr.SCAN_BUTTON), "entry": mr.centre(at, mr.ENTRY),
                         "confirm": mr.centre(at, mr.CONFIRM)}}
    return Prepared(params={}, truth=truth)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _wait_drawn(ctx: SetupContext, near: Any) -> tuple[int, int]:
    """Mapped is not drawn (TCG): wait until the scanner's dot-matrix heading reads back near ``near``."""
    try:
        return wait_for(lambda: mr.origin(ctx.client.screenshot(hide_cursor=True).image, near), 120,
                        what="the Mailroom Scanner drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None


# ---- the checker -------------------------------------------------------------------------------------------

def filings(probe: Probe) -> dict[int, dict[str, Any]]:
    """{letter number: the scanner's record of its confirmed filing} (the root-only JSON lines it printed)."""
    data = probe.read_bytes(RECORD) or b""
    found: dict[int, dict[str, Any]] = {}
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("event") == "filed" and isinstance(record.get("letter"), int):
            found.setdefault(record["letter"], record)
    return found


def check_filed(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    wrong = []
    for x in truth["letters"]:
        path = f"{POSTROOM}/{x['path']}"
        got = probe.sha256(path)
        if got is None:
            wrong.append(f"letter {x['number']}: nothing at {x['path']}")
        elif got != x["sha256"]:
            wrong.append(f"letter {x['number']}: {x['path']} is not its scan")
        elif probe.provenance(path) != ("file", DESKTOP_USER):
            wrong.append(f"letter {x['number']}: {x['path']} is not the desktop account's file")
    right = len(truth["letters"]) - len(wrong)
    evidence = f"{right}/{len(truth['letters'])} letters filed at their path with their scan's bytes" + \
        (f"; {'; '.join(wrong[:3])}" if wrong else "")
    if not wrong:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if right else Verdict.failed(evidence)


def check_tidy(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    left = probe.glob(f"{INBOX}/*")
    top = {p.removeprefix(POSTROOM + "/") for p in probe.glob(f"{POSTROOM}/*")}
    second = {p.removeprefix(POSTROOM + "/") for p in probe.glob(f"{POSTROOM}/*/*")}
    third = {p.removeprefix(POSTROOM + "/") for p in probe.glob(f"{POSTROOM}/*/*/*")}
    deeper = probe.glob(f"{POSTROOM}/*/*/*/*")
    files = {x["path"] for x in truth["letters"]} | set(truth["old_post"])
    stray = (top - set(mr.DEPARTMENTS) - {"inbox"}) | \
        ({p for p in second if not p.startswith("inbox/")} - set(truth["expected_dirs"])) | \
        (third - files) | {p.removeprefix(POSTROOM + "/") for p in deeper}
    changed = [path for path, sha in truth["old_post"].items() if probe.sha256(f"{POSTROOM}/{path}") != sha]
    return Verdict.check(not left and not stray and not changed,
                         f"left in the inbox: {[p.rsplit('/', 1)[-1] for p in left][:3] or 'nothing'}; stray in the "
                         f"post room: {sorted(stray)[:3] or 'nothing'}; older post changed or gone: "
                         f"{changed[:3] or 'none'}")


def check_scanner(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    done = filings(probe)
    right = [x["number"] for x in truth["letters"] if done.get(x["number"], {}).get("path") == x["path"]]
    evidence = f"{len(right)}/{len(truth['letters'])} letters' filings confirmed at the scanner"
    if len(right) == len(truth["letters"]):
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if right else Verdict.failed(evidence)


def parse_log(data: bytes) -> tuple[list[list[str]], str]:
    """(the log's lines as 5 fields each, problem)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [], f"is not UTF-8 ({exc.reason} at byte {exc.start})"
    rows = []
    for number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip():
            continue
        fields = [" ".join(f.split()) for f in line.split("|")]
        if len(fields) != 5:
            return [], f"line {number} has {len(fields)} fields, not 5: {line[:60]!r}"
        rows.append(fields)
    return rows, "" if rows else "has no line"


def check_log(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    data = probe.read_bytes(LOG, max_bytes=MAX_LOG)
    if data is None:
        return Verdict.failed(f"{LOG} does not exist")
    rows, problem = parse_log(data)
    if problem:
        return Verdict.failed(f"{LOG} {problem}")
    done = filings(probe)
    by_code = {}
    for row in rows:
        by_code.setdefault(row[0].upper(), []).append(row)
    wrong, right, used = [], 0, set()
    for x in truth["letters"]:
        code = str(done.get(x["number"], {}).get("code", ""))
        if not code:
            wrong.append(f"letter {x['number']}: no receipt at the scanner")
            continue
        lines = by_code.get(code, [])
        used.add(code)
        want = [code, x["ref"], x["department"], x["manager"], x["sha256"]]
        if len(lines) != 1:
            wrong.append(f"letter {x['number']}: {len(lines)} lines with receipt {code}")
        elif [lines[0][0].upper(), lines[0][1].upper(), lines[0][2].lower(), lines[0][3], lines[0][4].lower()] != want:
            wrong.append(f"letter {x['number']}: {' | '.join(lines[0])!r}, expected {' | '.join(want)!r}")
        else:
            right += 1
    extra = sorted(set(by_code) - used)
    evidence = (f"{right}/{len(truth['letters'])} letters logged right" + (f"; {'; '.join(wrong[:3])}" if wrong else "")
                + (f"; lines with receipts the scanner never gave: {extra[:3]}" if extra else ""))
    if right == len(truth["letters"]) and not extra:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if right else Verdict.failed(evidence)


# ---- the oracle --------------------------------------------------------------------------------------------

RECEIPT = re.compile(r"LETTER (\d+) FILED RECEIPT ([A-Z2-9]{6})")
DIALOG_W, DIALOG_H = (240, 440), (100, 280)  # Thunar's rename, new-folder and select-by-pattern dialogs
SETTLED = 400
FAINT, TITLE_BAR, CENTRED = 8, 30, (80, 120)
VIEW = (180, 110)  # the folder view's offset in Thunar's window (right of the side pane, below the toolbar)


def _screen(ctx: OracleContext) -> np.ndarray:
    assert ctx.obs is not None
    return np.asarray(ctx.obs["screen"])


def _terminal(ctx: OracleContext) -> str:
    return str((ctx.obs or {}).get("terminal") or "")


def _read_letter(ctx: OracleContext, number: int) -> Generator[ActionLike, Any, dict[str, str] | None]:
    """The letter ``number`` as the pane shows it (pressing Scan when it is not shown yet), None if never."""
    x, y = ctx.truth["targets"]["scan"]
    for attempt in range(5):
        if number == 1 or attempt:
            yield {"kind": "click", "x": x, "y": y}
        for _ in range(5):
            letter = mr.parse_letter(mr.read_letter(_screen(ctx), ctx.truth["scanner_at"]))
            if letter is not None and letter["number"] == str(number):
                return letter
            yield {"kind": "wait", "seconds": 1.5}
    return None


def _focus_thunar(ctx: OracleContext) -> Iterator[ActionLike]:
    x, y, w, h = ctx.truth["thunar"]
    yield {"kind": "key", "keys": "Escape"}  # a dialog a lost key left open, or the location bar
    yield {"kind": "click", "x": x + w - 60, "y": y + h - 80}  # empty space in the folder view


def _settle(ctx: OracleContext, tries: int = 8) -> Iterator[ActionLike]:
    previous = _screen(ctx)
    for _ in range(tries):
        yield {"kind": "wait", "seconds": 1.0}
        frame = _screen(ctx)
        if frame.shape == previous.shape and int(changed_pixels(frame, previous).sum()) <= SETTLED:
            return
        previous = frame


def _go(ctx: OracleContext, folder: str) -> Iterator[ActionLike]:
    """Thunar to ~/postroom/<folder> through its location bar, then the focus into the folder view: Return in the
    location bar of the folder already shown leaves the focus there, where Ctrl+X would cut the bar's text."""
    x, y, w, h = ctx.truth["thunar"]
    before = _screen(ctx)
    yield {"kind": "key", "keys": "ctrl+l"}
    yield {"kind": "type", "text": f"{POSTROOM}/{folder}/"}
    yield {"kind": "key", "keys": "Return"}
    for _ in range(8):  # the folder view shows the new folder's content (under TCG, seconds after the key)
        frame = _screen(ctx)
        if frame.shape == before.shape and int(changed_pixels(frame[y + VIEW[1]:y + h - VIEW[1], x + VIEW[0]:x + w],
                                                              before[y + VIEW[1]:y + h - VIEW[1], x + VIEW[0]:x + w]
                                                              ).sum()) > SETTLED:
            break
        yield {"kind": "wait", "seconds": 0.75}
    yield from _settle(ctx)
    yield {"kind": "click", "x": x + w - 60, "y": y + h - 80}  # empty space in the folder view


def dialog_box(frame: np.ndarray, before: np.ndarray, window: Any) -> tuple[int, int, int, int] | None:
    """The largest region of Thunar's window (below its title bar, whose shade changes with the focus) that changed
    since ``before``, faint changes included: a dialog's grey over the folder view's white is one."""
    x, y, w, h = (int(v) for v in window)
    if frame.shape != before.shape:
        return None
    diff = np.abs(frame.astype(np.int16) - before.astype(np.int16)).max(axis=2) > FAINT
    mask = np.zeros(diff.shape, dtype=np.uint8)
    top = max(0, y + TITLE_BAR)
    mask[top:y + h, max(0, x):x + w] = diff[top:y + h, max(0, x):x + w] * 255
    return changed_box(np.repeat(mask[:, :, None], 3, axis=2), np.zeros(frame.shape, dtype=np.uint8))


def is_dialog(box: tuple[int, int, int, int] | None, window: Any) -> bool:
    """A box of a Thunar dialog's size, centred on Thunar's window as its dialogs are (a repaint of the folder view
    after a late navigation is larger, the type-ahead search box smaller and in a corner)."""
    if box is None:
        return False
    x, y, w, h = (int(v) for v in window)
    return (DIALOG_W[0] <= box[2] - box[0] <= DIALOG_W[1] and DIALOG_H[0] <= box[3] - box[1] <= DIALOG_H[1]
            and abs((box[0] + box[2]) / 2 - (x + w / 2)) <= CENTRED[0]
            and abs((box[1] + box[3]) / 2 - (y + h / 2)) <= CENTRED[1])


def _dialog(ctx: OracleContext, keys: str) -> Generator[ActionLike, Any, bool]:
    """Press ``keys`` and wait until a dialog of Thunar's size shows and holds still; False (and Escape) if none."""
    before = _screen(ctx)
    yield {"kind": "key", "keys": keys}
    previous = None
    for _ in range(24):
        frame = _screen(ctx)
        if is_dialog(dialog_box(frame, before, ctx.truth["thunar"]), ctx.truth["thunar"]) and \
                previous is not None and previous.shape == frame.shape and \
                int(changed_pixels(frame, previous).sum()) <= SETTLED:
            return True
        previous = frame
        yield {"kind": "wait", "seconds": 0.5}
    yield {"kind": "key", "keys": "Escape"}
    return False


def _select(ctx: OracleContext, name: str) -> Generator[ActionLike, Any, bool]:
    """Select the one file ``name`` in the current folder (Edit > Select by Pattern)."""
    if not (yield from _dialog(ctx, "ctrl+s")):
        return False
    yield {"kind": "key", "keys": "ctrl+a"}  # the last pattern may be offered
    yield {"kind": "type", "text": name}
    yield {"kind": "key", "keys": "Return"}
    yield {"kind": "wait", "seconds": 1.0}
    return True


def _new_folder(ctx: OracleContext, department: str, folder: str) -> Iterator[ActionLike]:
    yield from _go(ctx, department)
    if (yield from _dialog(ctx, "ctrl+shift+n")):
        yield {"kind": "key", "keys": "ctrl+a"}
        yield {"kind": "type", "text": folder}
        yield {"kind": "key", "keys": "Return"}
        yield {"kind": "wait", "seconds": 1.5}


def _rename_selected(ctx: OracleContext, new: str) -> Generator[ActionLike, Any, bool]:
    if not (yield from _dialog(ctx, "F2")):
        return False
    yield {"kind": "key", "keys": "ctrl+a"}
    yield {"kind": "type", "text": new}
    yield {"kind": "key", "keys": "Return"}
    yield {"kind": "wait", "seconds": 1.5}
    return True


def _file(ctx: OracleContext, rows: Mapping[str, list[str]], route: Mapping[str, str]
          ) -> Generator[ActionLike, Any, bool]:
    """Thunar until the shell sees the scan at its filing path. Each round makes the client folder if the shell
    found none, selects the scan where the shell found it, renames it (it stays selected), cuts it and pastes it
    into the client folder; the shell looks again, and the next round does what is still missing, so a lost key
    or a slow folder costs a round, not the letter."""
    target = f"{route['department']}/{route['folder']}"
    for _round in range(8):
        at = rows.get("AT", [""])[0]
        if at == f"{target}/{route['name']}":
            return True
        if not at:
            return False
        folder, _sep, name = at.rpartition("/")
        yield from _focus_thunar(ctx)
        stray = rows.get("STRAY", [""])[0]
        if stray and rows.get("DIR", ["no"])[0] != "yes":  # the client folder made elsewhere: move it where it goes
            parent, _sep, made = stray.rpartition("/")
            yield from _go(ctx, parent)
            if (yield from _select(ctx, made)):
                yield {"kind": "key", "keys": "ctrl+x"}
                yield {"kind": "wait", "seconds": 0.5}
                yield from _go(ctx, route["department"])
                yield {"kind": "key", "keys": "ctrl+v"}
                yield {"kind": "wait", "seconds": 2.0}
            yield {"kind": "shell", "command": mr.locate_command(route["sha"], route["department"], route["folder"])}
            rows = mr.parse_tagged(_terminal(ctx))
            continue
        if rows.get("DIR", ["no"])[0] != "yes":
            yield from _new_folder(ctx, route["department"], route["folder"])
        yield from _go(ctx, folder)
        selected = yield from _select(ctx, name)
        if selected and name != route["name"]:
            selected = yield from _rename_selected(ctx, route["name"])
        if selected and folder != target:
            yield {"kind": "key", "keys": "ctrl+x"}
            yield {"kind": "wait", "seconds": 0.5}
            yield from _go(ctx, target)
            yield {"kind": "key", "keys": "ctrl+v"}
            yield {"kind": "wait", "seconds": 2.0}
        yield {"kind": "shell", "command": mr.locate_command(route["sha"], route["department"], route["folder"])}
        rows = mr.parse_tagged(_terminal(ctx))
    return False


def _confirm(ctx: OracleContext, number: int, path: str) -> Generator[ActionLike, Any, str]:
    """Type the filing's path at the scanner until its status line shows this letter's receipt; the code or ''."""
    t = ctx.truth["targets"]
    for attempt in range(4):
        yield {"kind": "click", "x": t["entry"][0], "y": t["entry"][1]}
        if attempt:
            yield {"kind": "key", "keys": "ctrl+slash"}  # Tk's select all: what a refused or lost entry left
        yield {"kind": "type", "text": path + "\n"}
        for _ in range(8):
            status = mr.read_status(_screen(ctx), ctx.truth["scanner_at"])
            found = RECEIPT.fullmatch(status)
            if found and int(found.group(1)) == number:
                return found.group(2)
            if status.startswith("REFUSED"):
                break
            yield {"kind": "wait", "seconds": 1.0}
    return ""


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Per letter: read it on the scanner (GUI), find its scan and route it in the CRM (CLI), rename and move it
    in Thunar, checked from the shell after each step (GUI, CLI), confirm at the scanner and read the receipt
    (GUI), log it (CLI)."""
    for number in range(1, ctx.truth["count"] + 1):
        letter = yield from _read_letter(ctx, number)
        if letter is None:
            break
        yield {"kind": "python", "code": mr.lookup_program(letter), "timeout": 60}
        rows = mr.parse_tagged(_terminal(ctx))
        if "ROUTE" not in rows or len(rows["ROUTE"]) < 5:
            break
        sha, ref, department, folder, manager = rows["ROUTE"][:5]
        route = {"sha": sha, "ref": ref, "department": department, "folder": folder, "manager": manager,
                 "name": mr.filing_name(letter["date"], ref, letter["subject"])}
        if not (yield from _file(ctx, rows, route)):
            break
        code = yield from _confirm(ctx, number, f"{department}/{folder}/{route['name']}")
        if not code:
            break
        line = " | ".join((code, ref, department, manager, sha))
        yield {"kind": "shell", "command": f"printf '%s\\n' {shlex.quote(line)} >> ~/outbox/routing.txt && "
                                          "cat ~/outbox/routing.txt"}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Productivity-8",
    title="Sort the morning's scanned post into the departments' client folders with Thunar",
    instruction=(
        "You work in the mailroom. The morning's letters were scanned into ~/postroom/inbox under meaningless names "
        "(scan-NNNN.pdf). The 'Mailroom Scanner' window shows them one at a time (press 'Scan next letter'): the "
        "first 8 hex digits of the scan file's SHA-256, the sender, the customer reference as printed, the date and "
        "the subject. ~/crm.db (SQLite; tables customers: ref, name, status, successor, account_id; accounts: "
        "account_id, client_folder, department, manager; rules: the mailroom's rules, read them) says where each "
        "letter goes. File every letter in Thunar (open on the inbox; the post room can only be changed from the "
        "desktop): rename its scan to <date>_<reference>_<subject>.pdf, with the date as YYYY-MM-DD, the "
        "reference it is filed under and the subject in lower case with its words joined by '-' (e.g. "
        "2026-03-14_KD30517_water-damage-claim.pdf), and move it into ~/postroom/<department>/<client_folder>/ "
        "(create the client folder when it is missing). Then type the path under ~/postroom "
        "(<department>/<client_folder>/<file name>) at the scanner and press 'Confirm filing': it checks the filing, "
        "shows a receipt code and the next letter. Leave nothing in the inbox and nothing else in the post room. "
        "From your shell, keep the routing log ~/outbox/routing.txt: one line per letter with five fields "
        "separated by ' | ': receipt code, the reference it is filed under, department, account manager, the "
        "scan's full SHA-256. Then finish."),
    channels=Channels(
        gui="read each letter off the Mailroom Scanner, rename and move its scan in Thunar (creating missing client "
            "folders), confirm the filing at the scanner and read its receipt code back",
        cli="find each scan by its hash, route the letter through ~/crm.db and its rules, check Thunar's work and "
            "write ~/outbox/routing.txt",
        why_both="the letters exist only as pixels on the scanner and the receipts only after a filing it "
                 "confirms, the post room can be changed only by the desktop account (Thunar), while the CRM is "
                 "readable only by the shell's account and the routing log must be written by it into a folder "
                 "only it can write"),
    setup=setup,
    clauses=(
        Clause("filed", "every letter's scan is at <department>/<client_folder>/<filing name> under ~/postroom with "
                        "its bytes intact, the desktop account's file", check_filed, weight=3.0, critical=True,
               cap=0.5),
        Clause("tidy", "the inbox is empty, nothing stray in the post room, the older post untouched", check_tidy),
        Clause("scanner_confirmed", "the scanner confirmed every letter's filing", check_scanner, weight=2.0,
               critical=True, cap=0.0),
        Clause("routing_log", "~/outbox/routing.txt has one right line per letter with the scanner's receipt code",
               check_log, weight=3.0, critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(f"{POSTROOM}/{{first_path}}", "gui", description="the first letter's scan, filed by Thunar"),
        Deliverable(RECORD, "gui", owner="root",
                    description="the Mailroom Scanner's confirmations (captured by setup)"),
        Deliverable(LOG, "cli", description="~/outbox/routing.txt"),
    ),
    withheld=("letters", "first_path", "expected_dirs", "old_post"),
    oracle=oracle,
    profile="full",
    apps=("Mailroom Scanner (python3-tk)", "thunar", "sqlite3", "python3", "sha256sum"),
    max_steps=700,
    time_budget_s=3600.0,
)
