"""Weave-Productivity-6: a conference's last-minute speaker changes, from the programme chair's mail through the
registration database to the badge desk, and the updated programme as a handout.

Three apps, data flowing both ways between the channels. The Mail window (a Tk app, the desktop account's)
holds eight or nine messages, one shown per click, as dot-matrix pixels (pixel_font, fed from a root-only file
that setup deletes once drawn): a speaker is replaced, a co-speaker joins, a talk is cancelled, moves to another
time or needs a bigger room; one or two later messages correct an earlier one, and one changes nothing. The
messages name people by registration id or e-mail address only; ~/registration.db (SQLite, readable by the
workspace account alone) has their names as registered, in UTF-8 (CJK, accents, Cyrillic, Greek, Hebrew,
Arabic), the talks and the rooms' capacities. The Badge Desk (a second Tk app) takes each changed talk's id,
room, time and the speaker's name, typed (non-ASCII through the agent's `type`), and records it in a root-only
file with a random confirmation code that it shows only as pixels. The shell then writes the updated programme
to ~/outbox/programme.txt, a folder only the workspace account may write, carrying the desk's codes. The plan,
the messages and the windows' geometry are in _badge_desk.py.

Scoring: the desk's last entry for every changed talk is its final state (room, time, the right badge name, or
withdrawn), and nothing else was entered; the handout lists exactly the talks that still take place with
their final time, room, title and speakers as registered; its codes are the ones the desk recorded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator, Mapping, Sequence
from typing import Any

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.productivity import _badge_desk as bd
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

DB = f"{HOME}/registration.db"
OUTBOX = f"{HOME}/outbox"
HANDOUT = f"{OUTBOX}/programme.txt"
APP_DIR = "/usr/local/share/badgedesk"
MAIL_APP, DESK_APP = f"{APP_DIR}/speaker_mail.py", f"{APP_DIR}/badge_desk.py"
MAIL_IN, DESK_IN = f"{PRIVATE_DIR}/mail-inbox.json", f"{PRIVATE_DIR}/badge-desk.json"
RECORD = f"{PRIVATE_DIR}/badge-desk-records.jsonl"
SCHEMA = ("CREATE TABLE people (reg_id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, "
          "affiliation TEXT NOT NULL, role TEXT NOT NULL);"
          "CREATE TABLE rooms (name TEXT PRIMARY KEY, capacity INTEGER NOT NULL);"
          "CREATE TABLE talks (talk_id TEXT PRIMARY KEY, title TEXT NOT NULL, room TEXT NOT NULL, "
          "time TEXT NOT NULL, speaker TEXT NOT NULL REFERENCES people(reg_id));")
MAX_HANDOUT = 64 << 10

# ---- setup -------------------------------------------------------------------------------------------------


def database(p: Mapping[str, Any]) -> bytes:
    """The registration database of plan ``p``: people, rooms and the talks as they were before the changes."""
    people = [(x["reg_id"], x["name"], x["email"], x["affiliation"], x["role"])
              for x in sorted(p["people"], key=lambda x: x["reg_id"])]
    rooms = [(r, p["capacity"][r]) for r in sorted(p["rooms"])]
    talks = [(t["talk_id"], t["title"], t["room"], t["time"], t["speaker"])
             for t in sorted(p["talks"], key=lambda t: (t["time"], t["room"]))]
    return database_bytes(SCHEMA, {"people": people, "rooms": rooms, "talks": talks})


def setup(ctx: SetupContext) -> Prepared:
    p = bd.plan(ctx.rng)
    # The workspace account's alone (0600): a terminal on the desktop runs as the desktop account and cannot read it.
    ctx.write_file(DB, database(p), owner=WORKSPACE_USER, mode=0o600)
    # Only the shell may write the handout (a desktop terminal cannot: 2755), and it belongs to its account.
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, OUTBOX])
    ctx.write_file(MAIL_APP, ctx.fixture(__package__, "fixtures/speaker_mail.py"), owner="root")
    ctx.write_file(DESK_APP, ctx.fixture(__package__, "fixtures/badge_desk.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    inbox = {"messages": [{k: m[k] for k in ("received", "sender", "lines")} for m in p["messages"]],
             "layout": bd.mail_layout()}
    mail = _open(ctx, "mail", MAIL_IN, inbox, f"{MAIL_APP} < {MAIL_IN} > /dev/null", bd.MAIL_TITLE, bd.MAIL_HEADING,
                 bd.MAIL_AT)
    desk_conf = {"talks": [t["talk_id"] for t in p["talks"]], "rooms": p["rooms"], "layout": bd.desk_layout()}
    desk = _open(ctx, "desk", DESK_IN, desk_conf, f"{DESK_APP} < {DESK_IN} > {RECORD}", bd.DESK_TITLE,
                 bd.DESK_HEADING, bd.DESK_AT)
    _wait_drawn(ctx, mail, bd.MAIL_HEADING)  # both visible at once: neither covers the other
    step = bd.LIST_STEP
    targets = {"messages": [bd.centre(mail, [bd.LIST_X, bd.LIST_Y + i * step, bd.LIST_W, bd.LIST_H])
                            for i in range(len(p["messages"]))],
               "talk": bd.centre(desk, bd.desk_layout()["fields"][0]), "withdraw": bd.centre(desk, bd.WITHDRAW_BOX)}
    truth = {k: p[k] for k in ("changed", "final", "stale", "programme", "messages")}
    return Prepared(params={}, truth={**truth, "count": len(p["messages"]), "mail_at": list(mail),
                                      "desk_at": list(desk), "targets": targets})


def _open(ctx: SetupContext, name: str, path: str, content: Mapping[str, Any], command: str, title: str,
          heading: str, at: Sequence[int]) -> tuple[int, int]:
    """Start one window with ``content`` on stdin, put it at ``at`` (the window manager may not), wait until it is
    drawn, then delete the stdin file; return where its canvas is on screen."""
    ctx.write_file(path, json.dumps(content, ensure_ascii=False), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {command}", name=name)
    window = ctx.wait_window(f"^{re.escape(title)}$")
    if abs(window.x - at[0]) > 16 or abs(window.y - at[1]) > 40:
        ctx.run(["env", "DISPLAY=:0", "xdotool", "windowmove", str(window.id), str(at[0]), str(at[1])], user=ctx.user)
    found = _wait_drawn(ctx, [at[0], at[1]], heading)
    ctx.run(["rm", "-f", path])
    return found


def _wait_drawn(ctx: SetupContext, near: Sequence[int], heading: str) -> tuple[int, int]:
    """Mapped is not drawn (TCG): wait until the window's dot-matrix heading reads back near ``near``."""
    try:
        return wait_for(lambda: bd.origin(ctx.client.screenshot(hide_cursor=True).image, near, heading, reach=40),
                        120, what=f"{heading!r} drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None


# ---- the checker -------------------------------------------------------------------------------------------

def desk_records(probe: Probe) -> list[dict[str, Any]]:
    """Every entry the desk accepted, in order (the JSON lines it printed into its root-only record)."""
    data = probe.read_bytes(RECORD) or b""
    found = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("talk"), str):
            found.append(record)
    return found


def last_entries(records: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """{talk: its last entry}: a talk entered again counts as its latest entry."""
    return {str(r["talk"]): r for r in records}


def judge_entry(entry: Mapping[str, Any] | None, want: Mapping[str, Any], stale: Mapping[str, Any] | None) -> str:
    """'' when the desk's last entry for a talk is its final state, else what is wrong with it."""
    if entry is None:
        return "not entered"
    if entry.get("action") != want["action"]:
        return f"{entry.get('action')}, expected {want['action']}"
    if want["action"] == bd.WITHDRAW:
        return ""
    got = {"room": " ".join(str(entry.get("room", "")).split()).upper(), "time": str(entry.get("time", "")),
           "speaker": bd.nfc(str(entry.get("speaker", "")))}
    wrong = [f"{k} {got[k]!r}, expected {want[k]!r}" for k in ("room", "time", "speaker")
             if got[k] != (bd.nfc(want[k]) if k == "speaker" else want[k])]
    if wrong and stale is not None and all(got[k] == bd.nfc(stale[k]) for k in ("room", "time", "speaker")):
        wrong.append("(the state before a later message corrected it)")
    return "; ".join(wrong)


def check_desk(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    last = last_entries(desk_records(probe))
    if not last:
        return Verdict.failed("the Badge Desk recorded no entry")
    problems = {tid: judge_entry(last.get(tid), want, truth["stale"].get(tid)) for tid, want in truth["final"].items()}
    wrong = {tid: why for tid, why in problems.items() if why}
    right = len(problems) - len(wrong)
    evidence = f"{right}/{len(problems)} changed talks' last desk entries are their final state" + \
        (f"; wrong: {'; '.join(f'{tid}: {why}' for tid, why in list(wrong.items())[:4])}" if wrong else "")
    if not wrong:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if right else Verdict.failed(evidence)


def check_desk_only_changes(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    records = desk_records(probe)
    extra = sorted({str(r["talk"]) for r in records} - set(truth["final"]))
    if not records:
        return Verdict.failed("the Badge Desk recorded no entry")
    return Verdict.check(not extra, f"desk entries for talks no message changed: {extra}" if extra else
                         f"all {len(records)} desk entries are for changed talks")


def parse_handout(data: bytes) -> tuple[dict[str, list[str]], str]:
    """({talk id: [time, room, title, speakers, code]}, problem) of the handout's ' | '-separated lines."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return {}, f"is not UTF-8 ({exc.reason} at byte {exc.start})"
    rows: dict[str, list[str]] = {}
    for number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(" | ")]
        if len(fields) != 6:
            return {}, f"line {number} has {len(fields)} fields, not 6: {line[:60]!r}"
        tid = fields[2].upper()
        if tid in rows:
            return {}, f"lists {tid} twice"
        rows[tid] = [fields[0], " ".join(fields[1].split()).upper(), fields[3], bd.nfc(fields[4]), fields[5]]
    return rows, "" if rows else "has no line"


def _handout(probe: Probe) -> tuple[dict[str, list[str]], str]:
    data = probe.read_bytes(HANDOUT, max_bytes=MAX_HANDOUT)
    return ({}, f"{HANDOUT} does not exist") if data is None else parse_handout(data)


def check_handout(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, problem = _handout(probe)
    if problem:
        return Verdict.failed(problem if problem.startswith("/") else f"{HANDOUT} {problem}")
    want = truth["programme"]
    missing, extra = sorted(set(want) - set(rows)), sorted(set(rows) - set(want))
    wrong = []
    for tid in sorted(set(want) & set(rows)):
        expected = [want[tid]["time"], want[tid]["room"], want[tid]["title"], bd.nfc(want[tid]["speakers"])]
        if rows[tid][:4] != expected:
            wrong.append(f"{tid}: {' | '.join(rows[tid][:4])!r}, expected {' | '.join(expected)!r}")
    evidence = (f"{len(want) - len(missing) - len(wrong)}/{len(want)} talks right; missing {missing}, not in the "
                f"programme {extra}" + (f"; {'; '.join(wrong[:3])}" if wrong else ""))
    if not (missing or extra or wrong):
        return Verdict.satisfied(f"all {len(want)} talks that still take place, each with its final time, room, "
                                 "title and speakers as registered")
    return Verdict.partial(evidence) if len(missing) + len(wrong) < len(want) else Verdict.failed(evidence)


def check_codes(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, problem = _handout(probe)
    if problem:
        return Verdict.failed(problem if problem.startswith("/") else f"{HANDOUT} {problem}")
    last = last_entries(desk_records(probe))
    wrong = []
    for tid in sorted(truth["programme"]):
        code = rows.get(tid, ["", "", "", "", "(no line)"])[4]
        expected = str(last[tid]["code"]) if tid in last else ("-" if tid not in truth["final"] else "")
        if not expected:
            wrong.append(f"{tid}: the desk has no entry to take a code from")
        elif code.upper() != expected:
            wrong.append(f"{tid}: {code!r}, the desk recorded {expected!r}")
    return Verdict.check(not wrong, "; ".join(wrong[:4]) if wrong else
                         f"every code is the desk's last for its talk ({len(truth['programme'])} lines)")


# ---- the oracle --------------------------------------------------------------------------------------------

def handout_program(changes: Mapping[str, Mapping[str, Any]]) -> str:
    """Python for the shell: the programme from the database with the changes applied, codes from the desk."""
    return f"""import os, sqlite3
changes = {dict(changes)!r}
db = sqlite3.connect(os.path.expanduser("~/registration.db"))
names = dict(db.execute("SELECT reg_id, name FROM people"))
lines = []
for tid, title, room, time, speaker in db.execute("SELECT talk_id, title, room, time, speaker FROM talks"):
    c = changes.get(tid, {{}})
    if c.get("cancel"):
        continue
    who = names[c.get("speaker", speaker)] + (" & " + names[c["co"]] if c.get("co") else "")
    lines.append((c.get("time", time), c.get("room", room), tid, title, who, c.get("code", "-")))
with open(os.path.expanduser("{HANDOUT.replace(HOME, '~')}"), "w", encoding="utf-8") as out:
    out.writelines(" | ".join(line) + "\\n" for line in sorted(lines))
print("HANDOUT", len(lines), "talks")
"""


STATUS = re.compile(r"#(\d+) (BADGE|WITHDRAWN) (T\d+) CODE ([A-Z2-9]{6})")
# Under TCG on a loaded host a click can trail its observation by many seconds, or be lost while the window
# manager works through the keyboard remappings that typing non-ASCII names causes: the oracle reads until the
# effect shows and clicks again after a while (showing a message twice, or re-entering a refused entry, is
# harmless).
MAIL_TRIES, MAIL_WAITS, DESK_TRIES, DESK_WAITS = 5, 5, 3, 8


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Per message: open it (GUI), read it off the screen, look the talk and the person up (CLI), enter the talk at
    the desk (GUI) and read the code back; then write the handout from the shell."""
    changes: dict[str, dict[str, Any]] = {}
    entered = 0
    for index in range(ctx.truth["count"]):
        lines = yield from _open_message(ctx, index)
        change = bd.parse_message(lines)
        if change is None:  # the message that changes nothing (or one this channel could not read)
            continue
        yield {"kind": "shell", "command": bd.lookup_command(change)}
        rows = bd.parse_lookup((ctx.obs or {}).get("terminal", ""))
        entry = bd.desk_entry(change, rows)
        if entry is None:
            continue
        entered, code = yield from _enter(ctx, entry, entered)
        _note(changes, change, entry, rows, code)
    yield {"kind": "python", "code": handout_program(changes), "timeout": 60}
    yield {"kind": "done"}


def _open_message(ctx: OracleContext, index: int) -> Generator[ActionLike, Any, list[str]]:
    """Click message ``index`` until the pane shows it; its lines ([] when it never showed)."""
    x, y = ctx.truth["targets"]["messages"][index]
    want = f"MESSAGE {index + 1} OF {ctx.truth['count']}"
    for _try in range(MAIL_TRIES):
        yield {"kind": "click", "x": x, "y": y}
        for _ in range(MAIL_WAITS):
            lines = bd.read_message((ctx.obs or {})["screen"], ctx.truth["mail_at"])
            if lines and lines[0] == want and len(lines) > 4:
                return lines
            yield {"kind": "wait", "seconds": 2}
    return []


def _enter(ctx: OracleContext, entry: Mapping[str, str], entered: int) -> Generator[ActionLike, Any, tuple[int, str]]:
    """Type the entry into the desk until its status line shows the entry's number and code: (number, code), or
    (entered, "") when it never did."""
    t = ctx.truth["targets"]
    for attempt in range(DESK_TRIES):
        yield {"kind": "click", "x": t["talk"][0], "y": t["talk"][1]}
        if attempt:  # what a lost click or a refusal left in the talk field; Tab selects the others' text
            yield {"kind": "key", "keys": "ctrl+slash"}
        if "room" in entry:
            yield {"kind": "type", "text": f"{entry['talk']}\t{entry['room']}\t{entry['time']}\t{entry['speaker']}\n"}
        else:
            yield {"kind": "type", "text": entry["talk"]}
            yield {"kind": "click", "x": t["withdraw"][0], "y": t["withdraw"][1]}
        for _ in range(DESK_WAITS):
            status = bd.read_status((ctx.obs or {})["screen"], ctx.truth["desk_at"])
            found = STATUS.search(status)
            if found and int(found.group(1)) > entered and found.group(3) == entry["talk"]:
                return int(found.group(1)), found.group(4)
            if attempt == 0 and status.startswith("REFUSED"):
                break
            yield {"kind": "wait", "seconds": 1}
    return entered, ""


def _note(changes: dict[str, dict[str, Any]], change: Mapping[str, str], entry: Mapping[str, str],
          rows: Mapping[str, list[str]], code: str) -> None:
    """What the handout needs to know of a talk once it was entered at the desk."""
    note = changes.setdefault(change["talk"], {})
    kind = change["kind"]
    if kind == bd.CANCEL:
        note["cancel"] = True
    elif kind == bd.SWAP:
        note["speaker"] = rows["PERSON"][0]
    elif kind == bd.COSPEAKER:
        note["co"] = rows["PERSON"][0]
    else:
        note.update(room=entry["room"], time=entry["time"])
    if code:
        note["code"] = code


TASK = Task(
    id="Weave-Productivity-6",
    title="Put a conference's last-minute speaker changes through the badge desk and hand out the updated "
          "programme",
    instruction=(
        "You run the badge and schedule desk of a conference. The 'Mail - Inbox' window on the desktop holds the "
        "programme chair's messages about last-minute changes (click a message to read it). Apply them in order: a "
        "later message can correct an earlier one. The mail is written in capitals and names people by registration "
        "id or e-mail address; "
        "~/registration.db (SQLite; tables people: reg_id, name, email, affiliation, role; rooms: name, capacity; "
        "talks: talk_id, title, room, time, speaker, the speaker being a reg_id) has the programme before the "
        "changes and everyone's name exactly as registered. A talk that needs a bigger room moves to the smallest "
        "room that seats the number asked for and has no other talk at that time. 1) For every talk a message "
        "changes, enter its final state in the 'Badge Desk' window: the talk id, its room, its time (HH:MM) and the "
        "name, exactly as registered, of the person whose badge to print (the new speaker when one replaces "
        "another; the co-speaker when one joins, the talk keeps its speaker too; the talk's speaker when it moves "
        "room or time), then press 'Print badge'; for a cancelled talk enter its id and press 'Withdraw talk'. "
        "Enter no other talk. The desk shows a confirmation code for every entry; when you enter a talk again, its "
        "latest entry and code count. 2) From your shell, write the updated programme to ~/outbox/programme.txt "
        "in UTF-8: one line per talk that still takes place (any order, no header) with six fields separated by "
        "' | ': time, room, talk id, title, speakers, code. Speakers are the names as registered, a co-speaker "
        "after the speaker joined by ' & '; code is the desk's latest confirmation code for a talk you entered "
        "there and '-' for every other talk. Then finish."),
    channels=Channels(
        gui="read the programme chair's messages off the Mail window and enter each changed talk at the Badge Desk, "
            "reading its confirmation code back",
        cli="look the talks, people and rooms up in ~/registration.db and write ~/outbox/programme.txt",
        why_both="the changes exist only as pixels in the Mail window and the desk's records and codes only "
                 "through the Badge Desk, while the registered names, the programme and the rooms are readable "
                 "only by the shell's account and the handout must be written by it into a folder only it can "
                 "write"),
    setup=setup,
    clauses=(
        Clause("desk_entries", "the desk's last entry for every changed talk is its final room, time and badge "
                               "name, or its withdrawal", check_desk, weight=3.0, critical=True, cap=0.5),
        Clause("desk_only_changes", "no talk that no message changed was entered at the desk",
               check_desk_only_changes),
        Clause("handout_programme", "~/outbox/programme.txt lists exactly the talks that still take place, each "
                                    "with its final time, room, title and speakers as registered", check_handout,
               weight=3.0, critical=True, cap=0.5),
        Clause("handout_codes", "the handout carries the desk's latest confirmation code for every talk entered "
                                "there and '-' for the others", check_codes, weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the Badge Desk's records (captured by setup)"),
        Deliverable(HANDOUT, "cli", description="~/outbox/programme.txt"),
    ),
    withheld=("changed", "final", "stale", "programme", "messages"),
    oracle=oracle,
    apps=("Mail (python3-tk)", "Badge Desk (python3-tk)", "sqlite3", "python3"),
    max_steps=200,
    time_budget_s=1800.0,
)
