"""Weave-Docs-7: write up a board meeting's minutes in LibreOffice Writer from a recording transcript and the
board's register, filing each agenda item with the Minutes Desk and keeping the clerk's filing record.

Four apps, data flowing both ways between the channels. The Minutes Desk (a Tk app, the desktop account's) shows
the transcript of one agenda item at a time, only as dot-matrix pixels (fed from a root-only file setup deletes
once drawn): the meeting's code, who moved and who seconded (initials only), the vote, the decision's wording and
the action with its owner's initials and a due date relative to the meeting ("DUE THREE WEEKS AFTER THE MEETING").
~/board.db (SQLite, readable by the workspace account alone) maps initials to members' full names, with accents,
their member numbers and their terms (a former member shares an attendee's initials), and has the meetings' dates.
Each item must be filed in the desk with its minute reference (meeting code, item, the action owner's member
number and the due date), computed in the shell from the register, before the next item shows; a right reference
shows a filing code, again only as pixels. The minutes template ~/minutes/minutes.odt (the desktop account's,
0644 in a sticky folder), open in Writer, gets one typed line per item in place of its placeholder: decision,
vote, mover and seconder by full name, action owner by full name with the absolute due date. The shell keeps
~/clerk/filing.txt (a folder only the workspace account may write): each item's filing code and the SHA-256 of
the minutes as Writer saved them.

Scoring: every item filed in the desk; each item's minutes right in its section of the saved document; the filing
record's codes; its checksum of the saved minutes.
"""

from __future__ import annotations

import hashlib
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Generator, Iterator, Mapping, Sequence
from typing import Any

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.docs import _board_minutes as bm
from weavegym.envs.tasks.docs.office import FORGERY, NS, content_xml, odt, protect, wait_until_ready, write_profile
from weavegym.evaluators import Clause, ForbiddenPatterns, GuiArtifactViaCli, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

DB = f"{HOME}/board.db"
MINUTES_DIR = f"{HOME}/minutes"
MINUTES = f"{MINUTES_DIR}/minutes.odt"
CLERK = f"{HOME}/clerk"
FILING = f"{CLERK}/filing.txt"
APP_DIR = "/usr/local/share/minutesdesk"
APP = f"{APP_DIR}/minutes_desk.py"
DESK_IN = f"{PRIVATE_DIR}/minutes-desk.json"
RECORD = f"{PRIVATE_DIR}/minutes-desk-records.jsonl"
WRITER_TITLE = r"^minutes\.odt - LibreOffice Writer$"
SCHEMA = ("CREATE TABLE members (initials TEXT NOT NULL, member_no INTEGER PRIMARY KEY, full_name TEXT NOT NULL, "
          "role TEXT NOT NULL, joined TEXT NOT NULL, left_on TEXT);"
          "CREATE TABLE meetings (code TEXT PRIMARY KEY, held_on TEXT NOT NULL, place TEXT NOT NULL);")
MAX_FILING = 64 << 10
TEXT_TAGS = {f"{{{NS['text']}}}h": True, f"{{{NS['text']}}}p": False}

# ---- setup -------------------------------------------------------------------------------------------------


def database(p: Mapping[str, Any]) -> bytes:
    """The board's register of plan ``p``: members past and present, and the meetings."""
    members = sorted(((m["initials"], m["member_no"], m["full_name"], m["role"], m["joined"], m["left"])
                      for m in (*p["members"], *p["former"])), key=lambda row: row[1])
    meetings = [(m["code"], m["held_on"], m["place"]) for m in p["meetings"]]
    return database_bytes(SCHEMA, {"members": members, "meetings": meetings})


def template(p: Mapping[str, Any]) -> bytes:
    """The minutes template: a heading per item with its placeholder line below ([ITEM1], [ITEM2], ...)."""
    paragraphs = [("h", "Minutes of the board meeting"),
                  ("p", "Replace each item's placeholder line with the item's minutes.")]
    for item in p["items"]:
        paragraphs += [("h", f"Item {item['number']}: {item['title']}"), ("p", f"[ITEM{item['number']}]")]
    paragraphs.append(("p", "Recorded by the board's clerk."))
    return odt(paragraphs)


def setup(ctx: SetupContext) -> Prepared:
    p = bm.plan(ctx.rng)
    # The workspace account's alone (0600): a terminal on the desktop runs as the desktop account and cannot read it.
    ctx.write_file(DB, database(p), owner=WORKSPACE_USER, mode=0o600)
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, CLERK])
    ctx.write_file(MINUTES, template(p), mode=0o644)
    protect(ctx, MINUTES_DIR, MINUTES)  # Writer's to save; the shell can read it but neither rewrite nor replace it
    # Typed names are long strings with accents: a stalled guest must not repeat a key.
    ctx.run(["env", "DISPLAY=:0", "xset", "r", "off"], user=ctx.user)
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/minutes_desk.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    conf = {"items": [{"lines": i["lines"], "reference": i["reference"]} for i in p["items"]], "layout": bm.layout()}
    ctx.write_file(DESK_IN, json.dumps(conf), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {DESK_IN} > {RECORD}", name="minutesdesk")
    desk = ctx.wait_window(f"^{bm.TITLE}$")
    near = ctx.place_window(desk.id, bm.DESK_AT)[:2]
    _wait_drawn(ctx, near)
    ctx.run(["rm", "-f", DESK_IN])  # the window has read it: the transcripts now live only on screen
    write_profile(ctx, "Board", "Clerk")
    ctx.launch_gui(f"cd {MINUTES_DIR} && {{as_user}} soffice --writer {MINUTES}", name="writer")
    writer = ctx.wait_window(WRITER_TITLE, timeout=400)
    wait_until_ready(ctx, MINUTES)
    geometry = _place_writer(ctx, writer.id)
    at = _wait_drawn(ctx, near)  # still where it was, above Writer
    if geometry[0] + WRITER_CLICK[0] >= at[0]:
        raise TaskError(f"{ctx.task_id} setup: Writer {geometry} has no free page left of the Minutes Desk at {at}")
    items = [{k: v for k, v in i.items() if k != "lines"} for i in p["items"]]
    return Prepared(params={}, truth={"items": items, "meeting": p["meeting"], "held_on": p["held_on"],
                                      "count": len(items), "desk_at": list(at), "writer": list(geometry)})


def _place_writer(ctx: SetupContext, window_id: int) -> list[int]:
    """Writer left of the desk where the window manager lets it be resized; a maximized Writer stays as it is,
    under the desk (which keeps itself on top). Its geometry once it no longer changes."""
    ctx.run(["env", "DISPLAY=:0", "xdotool", "windowsize", str(window_id), *map(str, bm.WRITER_SIZE), "windowmove",
             str(window_id), *map(str, bm.WRITER_AT)], user=ctx.user)
    seen: list[list[int]] = []

    def settled() -> list[int] | None:
        found = next((w for w in ctx.client.list_windows(timeout=10)[0] if w.id == window_id), None)
        if found is None:
            return None
        seen.append(list(found.geometry))
        return seen[-1] if len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3] else None

    try:
        return wait_for(settled, 60, what="Writer's window settled", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None


def _wait_drawn(ctx: SetupContext, near: Sequence[int]) -> tuple[int, int]:
    """Mapped is not drawn (TCG): wait until the desk's dot-matrix heading reads back near where it was put."""
    try:
        return wait_for(lambda: bm.origin(ctx.client.screenshot(hide_cursor=True).image, near), 120,
                        what="the Minutes Desk drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None


# ---- the checker -------------------------------------------------------------------------------------------


def _text(element: ET.Element) -> str:
    """A paragraph's text as Writer means it: <text:s c="n"/> spaces, tabs and line breaks as blanks."""
    out = [element.text or ""]
    for child in element:
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "s":
            out.append(" " * min(int(child.get(f"{{{NS['text']}}}c", "1") or 1), 100))
        elif tag in ("tab", "line-break"):
            out.append(" ")
        elif tag not in ("note", "annotation"):
            out.append(_text(child))
        out.append(child.tail or "")
    return "".join(out)


def paragraphs(data: bytes | None) -> list[tuple[bool, str]] | None:
    """(is a heading, text) of every paragraph of a text document's bytes, in order; None when it is not one."""
    root = content_xml(data)
    if root is None or root.find("office:body/office:text", NS) is None:
        return None
    return [(TEXT_TAGS[e.tag], _text(e)) for e in root.iter() if e.tag in TEXT_TAGS][:2000]


def sections(paras: Sequence[tuple[bool, str]], count: int) -> dict[int, str]:
    """{item: the normalized text below its heading ("Item k: ..."), up to the next heading}."""
    out: dict[int, str] = {}
    current = None
    for heading, text in paras:
        if heading:
            found = re.match(r"item (\d+)\b", bm.norm(text))
            current = int(found.group(1)) if found and 1 <= int(found.group(1)) <= count else None
            if current is not None and current in out:
                current = None  # a second heading for the same item: only the first counts
            elif current is not None:
                out[current] = ""
        elif current is not None:
            out[current] = f"{out[current]} {bm.norm(text)}".strip()
    return out


def judge_item(section: str, item: Mapping[str, Any]) -> list[str]:
    """The parts of an item's minutes its section lacks (empty when all are there)."""
    padded = f" {section} "
    return [part for part, words in bm.required(item).items() if f" {words} " not in padded]


def records(probe: Probe) -> list[dict[str, Any]]:
    """The desk's "file" records, in order."""
    data = probe.read_bytes(RECORD) or b""
    found = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("event") == "file" and isinstance(record.get("item"), int):
            found.append(record)
    return found


def check_filed(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    filed = sorted({r["item"] for r in records(probe)})
    evidence = f"{len(filed)}/{truth['count']} agenda items filed in the Minutes Desk with their minute reference"
    if len(filed) == truth["count"]:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if filed else Verdict.failed(evidence)


def check_minutes(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    paras = paragraphs(probe.read_bytes(MINUTES))
    if paras is None:
        return Verdict.failed(f"{MINUTES} is missing or not an ODF text document")
    found = sections(paras, truth["count"])
    right, wrong = 0, []
    for item in truth["items"]:
        number = item["number"]
        if number not in found:
            wrong.append(f"item {number}: no heading")
            continue
        missing = judge_item(found[number], item)
        if missing:
            wrong.append(f"item {number}: {', '.join(missing)} wrong or missing (found {found[number][:80]!r})")
        else:
            right += 1
    evidence = f"{right}/{truth['count']} items' minutes right" + (f"; {'; '.join(wrong[:3])}" if wrong else "")
    if right == truth["count"]:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if right else Verdict.failed(evidence)


def parse_filing(data: bytes) -> tuple[dict[str, list[str]], str]:
    """({first field: [second fields]} of filing.txt's 'a | b' lines, problem)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return {}, f"is not UTF-8 ({exc.reason} at byte {exc.start})"
    out: dict[str, list[str]] = {}
    for number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split("|")]
        if len(fields) != 2:
            return {}, f"line {number} has {len(fields)} fields, not 2: {line[:60]!r}"
        out.setdefault(fields[0].lower(), []).append(fields[1])
    return out, "" if out else "has no line"


def _filing(probe: Probe) -> tuple[dict[str, list[str]], str]:
    data = probe.read_bytes(FILING, max_bytes=MAX_FILING)
    if data is None:
        return {}, f"{FILING} is missing"
    lines, problem = parse_filing(data)
    return lines, f"{FILING} {problem}" if problem else ""


def check_codes(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    lines, problem = _filing(probe)
    if problem:
        return Verdict.failed(problem)
    codes = {r["item"]: str(r.get("code", "")) for r in records(probe)}
    wrong = []
    for number in range(1, truth["count"] + 1):
        listed = lines.get(str(number), [])
        if number not in codes:
            wrong.append(f"item {number} was never filed in the desk")
        elif listed != [codes[number]]:
            wrong.append(f"item {number}: {listed or 'no line'}, the desk's code is {codes[number]}")
    extra = sorted(k for k in lines if k not in {str(n) for n in range(1, truth["count"] + 1)} | {"minutes.odt"})
    if extra:
        wrong.append(f"lines for no item: {extra[:3]}")
    return Verdict.check(not wrong, "; ".join(wrong[:4]) if wrong else
                         f"the desk's {truth['count']} filing codes, one line per item")


def check_checksum(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    lines, problem = _filing(probe)
    if problem:
        return Verdict.failed(problem)
    data = probe.read_bytes(MINUTES)
    if data is None:
        return Verdict.failed(f"{MINUTES} is missing")
    paras = paragraphs(data) or []
    if not paras or any(re.search(r"\[ITEM\d+\]", text) for _h, text in paras):
        return Verdict.failed("the saved minutes still have a placeholder line: no checksum of unwritten minutes "
                              "counts")
    want = hashlib.sha256(data).hexdigest()
    listed = [v.lower() for v in lines.get("minutes.odt", [])]
    return Verdict.check(listed == [want], f"minutes.odt listed as {listed or 'nothing'}; the saved minutes' "
                                           f"SHA-256 is {want}")


# ---- the oracle --------------------------------------------------------------------------------------------

MARK = "/tmp/minutes-save.mark"
WRITER_CLICK = (250, 120)  # on the page, left of the desk: x from Writer's left, y from its bottom
SHOW_TRIES, FILE_TRIES, WAITS, SAVE_TRIES, FIX_TRIES = 4, 3, 8, 3, 3


def lookup_program(facts: Mapping[str, Any]) -> str:
    """Python for the shell: the register's names of the item's initials (members on the meeting's day), the due
    date and the minute reference, as one JSON line (ASCII escapes, whatever the terminal's encoding)."""
    return f"""import datetime as dt, json, os, sqlite3
t = {dict(facts)!r}
db = sqlite3.connect(os.path.expanduser("~/board.db"))
held = db.execute("SELECT held_on FROM meetings WHERE code = ?", (t["meeting"],)).fetchone()[0]
def member(initials):
    return db.execute("SELECT full_name, member_no FROM members WHERE initials = ? AND joined <= ? "
                      "AND (left_on IS NULL OR left_on >= ?)", (initials, held, held)).fetchone()
mover, seconder, owner = member(t["mover_initials"]), member(t["seconder_initials"]), member(t["owner_initials"])
due = (dt.date.fromisoformat(held) + dt.timedelta(days=t["days"])).isoformat()
ref = "-".join([t["meeting"], str(t["number"]), str(owner[1]), due.replace("-", "")])
print("LOOKUP", json.dumps({{"number": t["number"], "mover": mover[0], "seconder": seconder[0], "owner": owner[0],
                            "due": due, "reference": ref}}))
"""


SECTIONS_PY = """import json, os, re, unicodedata, zipfile, xml.etree.ElementTree as ET
T = '{urn:oasis:names:tc:opendocument:xmlns:text:1.0}'
def norm(s):
    s = re.sub(r'[\\u2010-\\u2015\\u2212]', '-', unicodedata.normalize('NFC', s).casefold())
    return ' '.join(re.sub(r'[^\\w-]+|_', ' ', s).split())
def text(e):
    out = [e.text or '']
    for c in e:
        tag = c.tag.rsplit('}', 1)[-1]
        if tag == 's':
            out.append(' ' * int(c.get(T + 'c', '1') or 1))
        elif tag in ('tab', 'line-break'):
            out.append(' ')
        elif tag not in ('note', 'annotation'):
            out.append(text(c))
        out.append(c.tail or '')
    return ''.join(out)
root = ET.fromstring(zipfile.ZipFile(os.path.expanduser('~/minutes/minutes.odt')).read('content.xml'))
found, current = {}, None
for e in root.iter():
    if e.tag == T + 'h':
        m = re.match(r'item (\\d+)\\b', norm(text(e)))
        current = m.group(1) if m and m.group(1) not in found else None
        if current:
            found[current] = ''
    elif e.tag == T + 'p' and current:
        found[current] = (found[current] + ' ' + norm(text(e))).strip()
print('SECTIONS', json.dumps(found))
"""


PLACES_PY = """import json, os, re, zipfile, xml.etree.ElementTree as ET
T = '{urn:oasis:names:tc:opendocument:xmlns:text:1.0}'
O = '{urn:oasis:names:tc:opendocument:xmlns:office:1.0}'
root = ET.fromstring(zipfile.ZipFile(os.path.expanduser('~/minutes/minutes.odt')).read('content.xml'))
body = root.find(O + 'body')
places, index = {}, 0
for e in body.iter():
    if e.tag not in (T + 'h', T + 'p'):
        continue
    m = re.match(r'\\s*item\\s+(\\d+)\\b', ''.join(e.itertext()), re.I)
    if e.tag == T + 'h' and m and m.group(1) not in places:
        places[m.group(1)] = index + 1
    index += 1
print('PLACES', json.dumps(places))
"""


def saved_places(terminal: str) -> dict[int, int] | None:
    """{item: the index of the paragraph below its heading} as PLACES_PY printed it, or None when it printed none."""
    found = re.search(r"^PLACES (\{.*\})$", terminal, re.M)
    if found is None:
        return None
    try:
        data = json.loads(found.group(1))
    except ValueError:
        return None
    return {int(k): int(v) for k, v in data.items() if str(k).isdigit()} if isinstance(data, dict) else None


def wait_saved(seconds: int = 100) -> str:
    """Shell code that waits until Writer has saved minutes.odt since MARK was touched, then prints "saved"."""
    return (f"timeout {seconds} sh -c 'until [ -n \"$(find ~/minutes/minutes.odt -newer {MARK})\" ]; do sleep 0.3; "
            "done' && echo saved")


def saved_sections(terminal: str) -> dict[int, str] | None:
    """The sections SECTIONS_PY printed from the saved minutes, or None when it printed none."""
    found = re.search(r"^SECTIONS (\{.*\})$", terminal, re.M)
    if found is None:
        return None
    try:
        data = json.loads(found.group(1))
    except ValueError:
        return None
    return {int(k): str(v) for k, v in data.items() if str(k).isdigit()} if isinstance(data, dict) else None


def _screen(ctx: OracleContext) -> Any:
    return (ctx.obs or {})["screen"]


def _terminal(ctx: OracleContext) -> str:
    return str((ctx.obs or {}).get("terminal") or "")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Per item: show it and read it (GUI), look up the names, the due date and the reference (CLI), file it and
    read its filing code (GUI), record the code (CLI), write its line of minutes in Writer (GUI, saving to place
    the cursor); then save, read the saved minutes back from the shell and retype any item that came out wrong;
    last, the checksum of the saved minutes into the filing record (CLI)."""
    count = ctx.truth["count"]
    written: dict[int, dict[str, Any]] = {}
    for number in range(1, count + 1):
        facts = yield from _show(ctx, number)
        if facts is None:
            break
        yield {"kind": "python", "code": lookup_program(facts), "timeout": 60}
        found = re.search(r"^LOOKUP (\{.*\})$", _terminal(ctx), re.M)
        if found is None:
            break
        item = {**facts, **json.loads(found.group(1))}
        code = yield from _file(ctx, number, item["reference"], count)
        if not code:
            break
        yield {"kind": "shell", "command": f"echo '{number} | {code}' >> ~/clerk/filing.txt && touch {MARK}"}
        if not (yield from _write(ctx, number, bm.minute_line(item), marked=True)):
            break
        written[number] = item
    for _attempt in range(FIX_TRIES if written else 0):  # (nothing to read back when nothing was written)
        found_sections = yield from _read_back(ctx)
        if found_sections is None:
            continue
        wrong = [n for n, item in written.items() if judge_item(found_sections.get(n, ""), item)]
        if not wrong:
            break
        for number in wrong:
            yield {"kind": "shell", "command": f"touch {MARK}"}
            yield from _write(ctx, number, bm.minute_line(written[number]), marked=True)
    yield {"kind": "shell", "command": "echo \"minutes.odt | $(sha256sum < ~/minutes/minutes.odt | cut -d' ' -f1)\" "
                                       ">> ~/clerk/filing.txt && cat ~/clerk/filing.txt"}
    yield {"kind": "done"}


def _show(ctx: OracleContext, number: int) -> Generator[ActionLike, Any, dict[str, Any] | None]:
    """Press "Show item" until item ``number``'s transcript reads back; its facts, or None when it never did."""
    at = ctx.truth["desk_at"]
    x, y = bm.centre(at, bm.SHOW_BUTTON)
    for attempt in range(SHOW_TRIES):
        if attempt or number == 1:
            yield {"kind": "click", "x": x, "y": y}
        for _ in range(WAITS):
            facts = bm.parse_transcript(bm.read_transcript(_screen(ctx), at))
            if facts is not None and facts["number"] == number:
                return facts
            yield {"kind": "wait", "seconds": 1}
    return None


def _file(ctx: OracleContext, number: int, reference: str, count: int) -> Generator[ActionLike, Any, str]:
    """Type the item's reference into the desk until its filing code shows: the code, or "" when it never did."""
    at = ctx.truth["desk_at"]
    x, y = bm.centre(at, bm.REF_ENTRY)
    for _attempt in range(FILE_TRIES):
        yield {"kind": "click", "x": x, "y": y}
        for _ in range(WAITS):  # typed before the desk has the keyboard, the reference would land in Writer
            if bm.entry_focused(_screen(ctx), at):
                break
            yield {"kind": "wait", "seconds": 1}
        else:
            continue
        yield {"kind": "key", "keys": "ctrl+slash"}  # what a lost attempt left there is replaced
        yield {"kind": "type", "text": f"{reference}\n"}
        for _ in range(WAITS):
            found = re.fullmatch(rf"ITEM {number} FILED AS (FC-[A-Z0-9]{{6}})", bm.read_status(_screen(ctx), at))
            if found:
                return found.group(1)
            yield {"kind": "wait", "seconds": 1}
    return ""


def _focus(ctx: OracleContext) -> ActionLike:
    x, y, _w, h = ctx.truth["writer"]
    return {"kind": "click", "x": x + WRITER_CLICK[0], "y": y + h - WRITER_CLICK[1]}


def _focus_writer(ctx: OracleContext) -> Generator[ActionLike, Any, None]:
    """Click Writer's page and wait (bounded) until the desk has lost the keyboard (its focus ring gone)."""
    yield _focus(ctx)
    for _ in range(WAITS):
        if not bm.entry_focused(_screen(ctx), ctx.truth["desk_at"]):
            return
        yield {"kind": "wait", "seconds": 1}


def _write(ctx: OracleContext, number: int, line: str, *, marked: bool) -> Generator[ActionLike, Any, bool]:
    """Type item ``number``'s line over the paragraph below its heading in Writer.

    Where that paragraph is comes from the saved file (a key that went astray under load may have added a
    paragraph above it): save, read its place back from the shell, then select it (ctrl+Home, one ctrl+Down per
    paragraph above it, ctrl+shift+Down to its end) and save again. LibreOffice runs its shortcuts after the
    typed text that follows them, so typing waits for that save; a lost save (the focus gone under load) is tried
    again after a new click."""
    for attempt in range(SAVE_TRIES):
        if attempt or not marked:
            yield {"kind": "shell", "command": f"touch {MARK}"}
        yield from _focus_writer(ctx)
        yield {"kind": "key", "keys": "ctrl+s"}
        yield {"kind": "shell", "timeout": 150, "command": f"{wait_saved(120)} && python3 - <<'EOF'\n{PLACES_PY}EOF"}
        places = saved_places(_terminal(ctx))
        if places is None or number not in places:
            continue
        yield {"kind": "shell", "command": f"touch {MARK}"}
        for key in ("ctrl+Home", *["ctrl+Down"] * places[number], "ctrl+shift+Down", "ctrl+s"):
            yield {"kind": "key", "keys": key}
        yield {"kind": "shell", "timeout": 150, "command": wait_saved(120)}
        if "saved" in _terminal(ctx):
            yield {"kind": "type", "text": line}
            return True
    return False


def _read_back(ctx: OracleContext) -> Generator[ActionLike, Any, dict[int, str] | None]:
    """Save the minutes and read each item's section back from the saved file (None when no save showed)."""
    for _attempt in range(SAVE_TRIES):
        yield {"kind": "shell", "command": f"touch {MARK}"}
        yield from _focus_writer(ctx)
        yield {"kind": "key", "keys": "ctrl+s"}
        yield {"kind": "shell", "timeout": 210, "command": f"{wait_saved(180)} && python3 - <<'EOF'\n{SECTIONS_PY}EOF"}
        found = saved_sections(_terminal(ctx))
        if found is not None:
            return found
    return None


TASK = Task(
    id="Weave-Docs-7",
    title="Write up the board meeting's minutes in Writer from the recording transcript and the register",
    instruction=(
        "Write the minutes of the board meeting. The 'Minutes Desk' window shows the recording transcript of one "
        "agenda item at a time ('Show item'): the meeting's code, who moved and who seconded (initials), the vote, "
        "the decision, and the action with its owner's initials and a due date counted from the meeting. "
        "~/board.db (SQLite) is the board's register: members (initials, member_no, full_name, role, joined, "
        "left_on: initials are reused, so take the member whose term covers the meeting's day) and meetings (code, "
        "held_on). 1) File every item in the desk: type its minute reference and press 'File item'; the reference "
        "is the meeting's code, the item's number, the action owner's member_no and the due date as YYYYMMDD, "
        "joined by '-' (e.g. BM2607-2-123-20260714). A right reference shows the item's filing code and the next "
        "item; a wrong one is refused. 2) In the minutes ~/minutes/minutes.odt, open in LibreOffice Writer, replace "
        "each item's placeholder line ([ITEM1], [ITEM2], ...) with one line: 'Decision: <the decision as worded>. "
        "Vote: for <n>, against <n>, abstained <n>. Moved by <full name>, seconded by <full name>. Action: <owner's "
        "full name> to <the action>, due <YYYY-MM-DD>.' Full names exactly as the register spells them, with their "
        "accents. Save it in Writer (the shell cannot write it). 3) From your shell, write ~/clerk/filing.txt in "
        "UTF-8: one line '<item number> | <filing code>' per item, and a last line 'minutes.odt | <SHA-256 of the "
        "minutes as saved>'. Then finish."),
    channels=Channels(
        gui="read each item's transcript off the Minutes Desk, file it with its reference and read its filing "
            "code, and type each item's minutes into Writer and save",
        cli="look up full names, member numbers and the meeting's date in ~/board.db, compute due dates and "
            "references, and write ~/clerk/filing.txt with the filing codes and the saved minutes' checksum",
        why_both="the transcripts and the filing codes exist only as pixels in the Minutes Desk and the minutes can "
                 "only be saved by Writer, while the register is readable only by the shell's account and the "
                 "filing record must be written by it into a folder only it can write"),
    setup=setup,
    clauses=(
        Clause("items_filed", "every agenda item was filed in the Minutes Desk with its minute reference",
               check_filed, weight=2.0, critical=True, cap=0.5),
        Clause("minutes", "each item's section of minutes.odt has its decision, vote, mover and seconder by full "
                          "name, and action with its owner's full name and absolute due date", check_minutes,
               weight=4.0, critical=True, cap=0.5),
        Clause("filing_codes", "~/clerk/filing.txt lists the desk's filing code of every item", check_codes,
               weight=2.0, critical=True, cap=0.5),
        Clause("minutes_checksum", "~/clerk/filing.txt has the SHA-256 of minutes.odt as saved", check_checksum),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the Minutes Desk's records (captured by setup)"),
        Deliverable(MINUTES, "gui", description="minutes.odt as Writer saved it"),
        Deliverable(FILING, "cli", description="~/clerk/filing.txt"),
    ),
    withheld=("items", "meeting", "held_on"),
    oracle=oracle,
    rules=(ForbiddenPatterns(FORGERY, defaults=False),
           GuiArtifactViaCli([MINUTES], "the minutes must be typed and saved in Writer")),
    profile="full",
    apps=("Minutes Desk: recording transcripts (python3-tk)", "libreoffice-writer", "sqlite3", "python3"),
    max_steps=400,
    time_budget_s=4800.0,
)
