"""What each seed of Weave-Productivity-6 varies, and where its Mail and Badge Desk windows draw (no TASK).

Kept apart from the task module so that setup, the oracle and the tests share one plan of the conference
(people with their registered UTF-8 names, rooms, talks), one list of the programme chair's messages with the
final state each changed talk must reach, and one geometry of the two windows: the fixtures draw at these
positions and the oracle reads and clicks there.

The plan keeps every message's meaning independent of the order an agent applies them in: a talk that needs a
bigger room sits in a time slot no other change touches (so "the smallest room with no other talk at that
time" is one room whether or not earlier messages were applied), and a talk moved to another time keeps a room
that is free then in every version of the schedule.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.core.errors import TaskError
from weavegym.envs.tasks import pixel_font

# (name as registered, ASCII handle for the e-mail address, script). The scripts make sure every seed types
# CJK, an accented Latin name and a Cyrillic, Greek or right-to-left one.
CJK, LATIN, CYRILLIC, RTL, GREEK, PLAIN = "cjk", "latin", "cyrillic", "rtl", "greek", "plain"
PEOPLE: tuple[tuple[str, str, str], ...] = (
    ("王小明", "wang.xiaoming", CJK), ("李娜", "li.na", CJK), ("张伟", "zhang.wei", CJK), ("陈静", "chen.jing", CJK),
    ("佐藤健", "sato.ken", CJK), ("鈴木花子", "suzuki.hanako", CJK), ("高橋蓮", "takahashi.ren", CJK),
    ("김민준", "kim.minjun", CJK), ("이서연", "lee.seoyeon", CJK), ("박지훈", "park.jihoon", CJK),
    ("Иван Петров", "ivan.petrov", CYRILLIC), ("Ольга Смирнова", "olga.smirnova", CYRILLIC),
    ("Дмитрий Козлов", "dmitry.kozlov", CYRILLIC), ("Анна Соколова", "anna.sokolova", CYRILLIC),
    ("Νίκος Παπαδόπουλος", "nikos.papadopoulos", GREEK), ("Ελένη Γεωργίου", "eleni.georgiou", GREEK),
    ("שרה כהן", "sara.cohen", RTL), ("דוד לוי", "david.levi", RTL), ("נועה מזרחי", "noa.mizrahi", RTL),
    ("أحمد منصور", "ahmad.mansour", RTL), ("ليلى حداد", "layla.haddad", RTL), ("يوسف قاسم", "yousef.qasem", RTL),
    ("Zoë Lefèvre", "zoe.lefevre", LATIN), ("Jürgen Weiß", "juergen.weiss", LATIN),
    ("Søren Kjær", "soeren.kjaer", LATIN), ("Łukasz Wójcik", "lukasz.wojcik", LATIN),
    ("Inés Núñez", "ines.nunez", LATIN), ("François Dubois", "francois.dubois", LATIN),
    ("Ömer Çelik", "oemer.celik", LATIN), ("Małgorzata Nowak", "malgorzata.nowak", LATIN),
    ("Björn Ångström", "bjoern.angstrom", LATIN), ("Anaïs Pérès", "anais.peres", LATIN),
    ("Siobhán Ó Briain", "siobhan.obriain", LATIN), ("Zoltán Kovács", "zoltan.kovacs", LATIN),
    ("José Martín", "jose.martin", LATIN), ("Thérèse Brontë", "therese.bronte", LATIN),
    ("Antonín Dvořák", "antonin.dvorak", LATIN), ("Paul Schmidt", "paul.schmidt", PLAIN),
    ("Maria Costa", "maria.costa", PLAIN), ("Priya Raman", "priya.raman", PLAIN),
)
AFFILIATIONS = (("Universität Wien", "univie.ac.at"), ("東京大学", "u-tokyo.ac.jp"), ("ETH Zürich", "ethz.ch"),
                ("Sorbonne Université", "sorbonne.fr"), ("МГУ", "msu.ru"), ("Technion", "technion.ac.il"),
                ("KAIST", "kaist.ac.kr"), ("Tsinghua University", "tsinghua.edu.cn"), ("TU Delft", "tudelft.nl"),
                ("Universidade de São Paulo", "usp.br"), ("Københavns Universitet", "ku.dk"), ("Inria", "inria.fr"))
ROOMS = ("AULA", "HALL A", "HALL B", "ROOM 101", "ROOM 102", "ROOM 204", "STUDIO", "FORUM", "LOFT", "ATRIUM")
SLOTS = ("09:00", "09:45", "10:30", "11:15", "13:00", "13:45", "14:30", "15:15", "16:00", "16:45")
TITLES = ("Scaling graph neural networks", "Verified compilers in practice", "Privacy budgets for analytics",
          "Energy-aware scheduling", "Robust speech recognition", "Type inference for Python",
          "Streaming joins at scale", "Quantum error correction 101", "Fairness audits of ranking",
          "Sparse attention revisited", "Learning to index", "Memory-safe systems code", "Federated evaluation",
          "Causal discovery from logs", "Compressing language models", "Formal methods for robotics")
SENDERS = ("PROGRAMME CHAIR", "LOCAL ORGANISER", "TRACK CHAIR")
NOISE = ("REMINDER: THE SPEAKER DINNER STARTS AT 19:30 IN THE ATRIUM. NO CHANGE TO THE PROGRAMME.",
         "THE SPEAKER ROOM IS OPEN FROM 08:00 FOR SLIDE CHECKS. NO CHANGE TO THE PROGRAMME.",
         "PLEASE REMIND SPEAKERS TO UPLOAD THEIR SLIDES BY NOON. NO CHANGE TO THE PROGRAMME.")
N_ROOMS, N_SLOTS, N_TALKS, N_PEOPLE = 6, 6, 13, 36
SWAP, COSPEAKER, CANCEL, TIME, ROOM = "swap", "cospeaker", "cancel", "time", "room"
BADGE, WITHDRAW = "badge", "withdraw"

# ---- the two windows' geometry (pixels inside each window) ---------------------------------------------------

SCALE, HEADING_AT = 2, (16, 12)
MAIL_TITLE, MAIL_HEADING = "Mail - Inbox", "INBOX - SPEAKER CHANGES"
MAIL_SIZE, MAIL_AT = (630, 560), (0, 0)
LIST_X, LIST_Y, LIST_W, LIST_H, LIST_STEP = 12, 48, 150, 38, 44
BODY = (172, 48, 446, 480)  # the message pane: [x, y, width, height]
BODY_TEXT, LINE_H, LINE_CHARS, MAX_LINES = (182, 60), 24, 35, 18
DESK_TITLE, DESK_HEADING = "Badge Desk", "BADGE AND SCHEDULE DESK"
DESK_SIZE, DESK_AT = (620, 440), (650, 0)
FIELDS = (("talk", "Talk id"), ("room", "Room"), ("time", "Time (HH:MM)"), ("speaker", "Speaker's name"))
FIELD_X, FIELD_Y, FIELD_W, FIELD_H, FIELD_STEP = 180, 56, 420, 32, 44
PRINT, WITHDRAW_BOX = (180, 236, 200, 38), (400, 236, 200, 38)
STATUS, STATUS_TEXT, STATUS_CHARS = (16, 292, 588, 44), (24, 307), 48
PREVIEW = (16, 350, 588, 76)


def mail_layout() -> dict[str, Any]:
    """Where the Mail window puts everything; boxes are [x, y, width, height] in the window."""
    return {"title": MAIL_TITLE, "heading": MAIL_HEADING, "heading_at": list(HEADING_AT), "scale": SCALE,
            "size": list(MAIL_SIZE), "at": list(MAIL_AT), "body": list(BODY), "body_text": list(BODY_TEXT),
            "line_h": LINE_H, "list": [LIST_X, LIST_Y, LIST_W, LIST_H, LIST_STEP]}


def desk_layout() -> dict[str, Any]:
    """Where the Badge Desk puts everything; boxes are [x, y, width, height] in the window."""
    return {"title": DESK_TITLE, "heading": DESK_HEADING, "heading_at": list(HEADING_AT), "scale": SCALE,
            "size": list(DESK_SIZE), "at": list(DESK_AT), "labels": [list(f) for f in FIELDS],
            "fields": [[FIELD_X, FIELD_Y + i * FIELD_STEP, FIELD_W, FIELD_H] for i in range(len(FIELDS))],
            "print": list(PRINT), "withdraw": list(WITHDRAW_BOX), "status": list(STATUS),
            "status_text": list(STATUS_TEXT), "preview": list(PREVIEW)}


def centre(origin: Sequence[int], box: Sequence[int]) -> list[int]:
    return [origin[0] + box[0] + box[2] // 2, origin[1] + box[1] + box[3] // 2]


# ---- what each seed varies -----------------------------------------------------------------------------------

def nfc(text: str) -> str:
    """A name compared as a person would: Unicode NFC, runs of white space as one space."""
    return unicodedata.normalize("NFC", " ".join(text.split()))


def wrap(text: str, width: int = LINE_CHARS) -> list[str]:
    """Greedy word wrap for the dot-matrix pane (every word fits a line)."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _people(rng: np.random.Generator) -> list[dict[str, Any]]:
    ids = sorted(int(i) for i in rng.choice(np.arange(1000, 9999), N_PEOPLE, replace=False))
    order = rng.permutation(len(PEOPLE))[:N_PEOPLE]
    people = []
    for reg, index in zip(ids, order, strict=True):
        name, handle, script = PEOPLE[int(index)]
        affiliation, domain = AFFILIATIONS[int(rng.integers(len(AFFILIATIONS)))]
        people.append({"reg_id": f"R{reg}", "name": name, "email": f"{handle}@{domain}",
                       "affiliation": affiliation, "script": script, "role": "attendee"})
    return people


def _free(talks: Sequence[Mapping[str, Any]], slot: str, room: str, but: str = "") -> bool:
    return not any(t["time"] == slot and t["room"] == room and t["talk_id"] != but for t in talks)


def _ref(rng: np.random.Generator, person: Mapping[str, Any]) -> str:
    """How a message names a person: the registration id or the e-mail address (upper case: the pixel font)."""
    return person["reg_id"] if rng.random() < 0.5 else person["email"].upper()


def _try_plan(rng: np.random.Generator) -> dict[str, Any] | None:
    """One draw of the conference and its changes, or None when the draw cannot hold them all."""
    people = _people(rng)
    rooms = [str(r) for r in rng.choice(ROOMS, N_ROOMS, replace=False)]
    capacity = dict(zip(rooms, (int(c) * 10 for c in rng.choice(np.arange(3, 41), N_ROOMS, replace=False)),
                        strict=True))
    slots = sorted(str(s) for s in rng.choice(SLOTS, N_SLOTS, replace=False))
    cells = [(s, r) for s in slots for r in rooms]
    chosen = rng.choice(len(cells), N_TALKS, replace=False)
    ids = [f"T{int(i)}" for i in rng.choice(np.arange(100, 1000), N_TALKS, replace=False)]
    titles = [str(t) for t in rng.choice(TITLES, N_TALKS, replace=False)]
    roles = [int(i) for i in rng.permutation(N_PEOPLE)]  # speakers, then attendees who can step in or join
    talks = [{"talk_id": tid, "title": title, "time": cells[int(c)][0], "room": cells[int(c)][1],
              "speaker": people[roles[i]]["reg_id"]}
             for i, (tid, title, c) in enumerate(zip(ids, titles, chosen, strict=True))]
    for i in roles[:N_TALKS]:
        people[i]["role"] = "speaker"
    spare = roles[N_TALKS:]
    by_id = {p["reg_id"]: p for p in people}
    kinds = [SWAP, COSPEAKER, CANCEL, TIME, ROOM, str(rng.choice([SWAP, COSPEAKER, TIME]))]
    kinds = [kinds[int(i)] for i in rng.permutation(len(kinds))]
    order = [int(i) for i in rng.permutation(N_TALKS)]
    changed = dict(zip((talks[i]["talk_id"] for i in order[:len(kinds)]), kinds, strict=True))
    talk = {t["talk_id"]: t for t in talks}
    room_talk = next(tid for tid, k in changed.items() if k == ROOM)
    busy_slot = talk[room_talk]["time"]
    if any(talk[tid]["time"] == busy_slot for tid in changed if tid != room_talk):
        return None
    messages: list[dict[str, Any]] = []  # {"text", "talk", "after"}: "after" = index of the message it corrects
    final: dict[str, dict[str, Any]] = {}
    stale: dict[str, dict[str, Any]] = {}
    corrections = int(rng.integers(1, 3))
    correctable = [tid for tid, k in changed.items() if k in (SWAP, TIME)]
    corrected = set(str(t) for t in rng.choice(correctable, min(corrections, len(correctable)), replace=False))
    used_cells = {(t["time"], t["room"]) for t in talks}
    for tid, kind in changed.items():
        t = talk[tid]
        speaker = by_id[t["speaker"]]
        base = {"action": BADGE, "room": t["room"], "time": t["time"], "speaker": speaker["name"]}
        if kind in (SWAP, COSPEAKER):
            newcomer = people[spare.pop(int(rng.integers(len(spare))))]
            if kind == SWAP:
                text = f"TALK {tid}: {_ref(rng, newcomer)} WILL SPEAK INSTEAD OF {_ref(rng, speaker)}."
            else:
                text = f"{_ref(rng, newcomer)} JOINS TALK {tid} AS CO-SPEAKER. THE SPEAKER STAYS."
            final[tid] = {**base, "speaker": newcomer["name"], "reg_id": newcomer["reg_id"]}
            messages.append({"text": text, "talk": tid})
            if tid in corrected:
                other = people[spare.pop(int(rng.integers(len(spare))))]
                stale[tid] = final[tid]
                final[tid] = {**base, "speaker": other["name"], "reg_id": other["reg_id"]}
                messages.append({"text": f"UPDATE ON TALK {tid}: {_ref(rng, newcomer)} CANNOT COME AFTER ALL; "
                                         f"{_ref(rng, other)} WILL SPEAK INSTEAD.", "talk": tid,
                                 "after": len(messages) - 1})
        elif kind == CANCEL:
            final[tid] = {"action": WITHDRAW}
            messages.append({"text": f"TALK {tid} IS CANCELLED: {_ref(rng, speaker)} CANNOT COME.", "talk": tid})
        elif kind == TIME:
            free = [s for s in slots if s not in (t["time"], busy_slot) and (s, t["room"]) not in used_cells]
            if len(free) < 2:
                return None
            first, second = (str(s) for s in rng.choice(free, 2, replace=False))
            used_cells |= {(first, t["room"]), (second, t["room"])}
            final[tid] = {**base, "time": first}
            messages.append({"text": f"TALK {tid} MOVES TO {first}, IN THE SAME ROOM.", "talk": tid})
            if tid in corrected:
                stale[tid] = final[tid]
                final[tid] = {**base, "time": second}
                messages.append({"text": f"CORRECTION: TALK {tid} MOVES TO {second}, NOT {first}. SAME ROOM.",
                                 "talk": tid, "after": len(messages) - 1})
        else:
            target = _bigger_room(rng, talks, t, rooms, capacity)
            if target is None:
                return None
            room, need = target
            final[tid] = {**base, "room": room}
            messages.append({"text": f"TALK {tid} EXPECTS {need} PEOPLE: MOVE IT TO THE SMALLEST FREE ROOM THAT "
                                     f"SEATS {need}.", "talk": tid})
    return {"people": people, "rooms": rooms, "capacity": capacity, "slots": slots, "talks": talks,
            "changed": changed, "final": final, "stale": stale, "drafts": messages}


def _bigger_room(rng: np.random.Generator, talks: Sequence[Mapping[str, Any]], talk: Mapping[str, Any],
                 rooms: Sequence[str], capacity: Mapping[str, int]) -> tuple[str, int] | None:
    """(room, people) for a talk that outgrew its room: the smallest room free at its time seating ``people``,
    with an occupied room that seats them too but is smaller (reading capacities alone picks that one), and
    a larger free room (taking the largest picks that one)."""
    own = capacity[talk["room"]]
    free = sorted((capacity[r], r) for r in rooms if r != talk["room"] and _free(talks, talk["time"], r))
    taken = sorted(capacity[r] for r in rooms if r != talk["room"] and not _free(talks, talk["time"], r))
    options = []
    for i, (cap, room) in enumerate(free[:-1]):
        below = max([own] + [c for c, _r in free[:i]])
        trap = [c for c in taken if below < c < cap]
        if cap > own and trap:
            options.append((room, int(rng.integers(below + 1, min(trap) + 1))))
    if not options:
        return None
    room, need = options[int(rng.integers(len(options)))]
    return room, need


def plan(rng: np.random.Generator) -> dict[str, Any]:
    """One seed's conference: people, rooms and talks (the database), the inbox and the final state of every
    changed talk, and the programme the handout must show."""
    for _attempt in range(400):
        drawn = _try_plan(rng)
        if drawn is None:
            continue
        names = {f["speaker"] for f in [*drawn["final"].values(), *drawn["stale"].values()] if f["action"] == BADGE}
        typed = {p["script"] for p in drawn["people"] if p["name"] in names}
        if CJK in typed and LATIN in typed and typed & {CYRILLIC, RTL, GREEK}:
            break
    else:
        raise TaskError("Weave-Productivity-6: no conference whose changes type every kind of name")
    drafts = drawn["drafts"]
    firsts = [m for m in drafts if "after" not in m]
    positions = [firsts[int(i)] for i in rng.permutation(len(firsts))]
    for m in drafts:  # each correction somewhere after the message it corrects
        if "after" in m:
            original = drafts[m["after"]]
            at = positions.index(original) + 1
            positions.insert(int(rng.integers(at, len(positions) + 1)), m)
    noise = {"text": str(rng.choice(NOISE)), "talk": ""}
    positions.insert(int(rng.integers(1, len(positions))), noise)
    minute = int(rng.integers(7 * 60, 8 * 60))
    messages = []
    for i, m in enumerate(positions):
        minute += int(rng.integers(3, 19))
        sender = SENDERS[0] if rng.random() < 0.7 else str(rng.choice(SENDERS[1:]))
        received = f"{minute // 60:02d}:{minute % 60:02d}"
        head = [f"MESSAGE {i + 1} OF {len(positions)}", f"FROM: {sender}", f"RECEIVED {received}", ""]
        messages.append({"received": received, "sender": sender,
                         "lines": head + wrap(m["text"]), "talk": m["talk"]})
    drawn["messages"] = messages
    drawn["programme"] = programme(drawn)
    del drawn["drafts"]
    return drawn


def programme(p: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """{talk id: {time, room, title, speakers}} of every talk that still takes place, after all the changes."""
    names = {person["reg_id"]: person["name"] for person in p["people"]}
    out = {}
    for t in p["talks"]:
        change, kind = p["final"].get(t["talk_id"]), p["changed"].get(t["talk_id"])
        if kind == CANCEL:
            continue
        speakers = names[t["speaker"]]
        if kind == SWAP:
            speakers = change["speaker"]
        elif kind == COSPEAKER:
            speakers += " & " + change["speaker"]
        out[t["talk_id"]] = {"time": change["time"] if change else t["time"],
                             "room": change["room"] if change else t["room"], "title": t["title"],
                             "speakers": speakers}
    return out


# ---- the oracle's reading of a message and its lookups ---------------------------------------------------

PATTERNS = (  # what a message asks, in the order tried (an update is also "... WILL SPEAK INSTEAD")
    (SWAP, re.compile(r"UPDATE ON TALK (?P<talk>T\d+): \S+ CANNOT COME AFTER ALL; (?P<who>\S+) WILL SPEAK")),
    (SWAP, re.compile(r"TALK (?P<talk>T\d+): (?P<who>\S+) WILL SPEAK INSTEAD OF")),
    (COSPEAKER, re.compile(r"(?P<who>\S+) JOINS TALK (?P<talk>T\d+) AS CO-SPEAKER")),
    (CANCEL, re.compile(r"TALK (?P<talk>T\d+) IS CANCELLED")),
    (TIME, re.compile(r"TALK (?P<talk>T\d+) MOVES TO (?P<time>\d\d:\d\d)")),
    (ROOM, re.compile(r"TALK (?P<talk>T\d+) EXPECTS (?P<need>\d+) PEOPLE")),
)


def parse_message(lines: Sequence[str]) -> dict[str, str] | None:
    """{"kind", "talk", and "who", "time" or "need"} of a message's text (after its 4 header lines), or None."""
    text = " ".join(lines[4:])
    for kind, pattern in PATTERNS:
        found = pattern.search(text)
        if found:
            return {"kind": kind, **found.groupdict()}
    return None


def lookup_command(change: Mapping[str, str]) -> str:
    """The sqlite3 line that prints what the desk entry needs: the talk, its speaker, the person named, the room."""
    tid = change["talk"]
    sql = [f"SELECT 'TALK', talk_id, room, time, speaker FROM talks WHERE talk_id = '{tid}';",
           f"SELECT 'SPEAKER', p.reg_id, p.name FROM talks t JOIN people p ON p.reg_id = t.speaker "
           f"WHERE t.talk_id = '{tid}';"]
    if "who" in change:
        who = change["who"]
        where = f"reg_id = '{who}'" if re.fullmatch(r"R\d+", who) else f"lower(email) = lower('{who}')"
        sql.append(f"SELECT 'PERSON', reg_id, name FROM people WHERE {where};")
    if "need" in change:
        sql.append(f"SELECT 'ROOM', name, capacity FROM rooms WHERE capacity >= {int(change['need'])} AND name NOT IN "
                   f"(SELECT room FROM talks WHERE time = (SELECT time FROM talks WHERE talk_id = '{tid}') AND "
                   f"talk_id <> '{tid}') ORDER BY capacity LIMIT 1;")
    return f"sqlite3 -separator '|' ~/registration.db \"{' '.join(sql)}\""


def parse_lookup(terminal: str) -> dict[str, list[str]]:
    """{tag: fields} of the lookup's tagged lines."""
    rows = {}
    for line in terminal.replace("\r", "").split("\n"):
        tag, _sep, rest = line.partition("|")
        if tag in ("TALK", "SPEAKER", "PERSON", "ROOM"):
            rows[tag] = rest.split("|")
    return rows


def desk_entry(change: Mapping[str, str], rows: Mapping[str, list[str]]) -> dict[str, str] | None:
    """What to type at the desk ({"talk", "room", "time", "speaker"}; just "talk" to withdraw), or None."""
    if "TALK" not in rows or "SPEAKER" not in rows:
        return None
    _tid, room, time, _speaker = rows["TALK"][:4]
    entry = {"talk": change["talk"], "room": room, "time": time, "speaker": rows["SPEAKER"][1]}
    kind = change["kind"]
    if kind == CANCEL:
        return {"talk": change["talk"]}
    if kind in (SWAP, COSPEAKER):
        if "PERSON" not in rows:
            return None
        entry["speaker"] = rows["PERSON"][1]
    elif kind == TIME:
        entry["time"] = change["time"]
    elif kind == ROOM:
        if "ROOM" not in rows:
            return None
        entry["room"] = rows["ROOM"][0]
    return entry


# ---- reading the windows off the screen (the oracle's eyes; setup's readiness check) -------------------------

def origin(image: np.ndarray, window: Sequence[int], heading: str, reach: int = 12) -> tuple[int, int] | None:
    """The window's top-left on screen, found where its heading reads back near the window's geometry (the
    window manager may place a window a few pixels off), or None while it is not drawn."""
    return pixel_font.find_drawn(image, heading, window, HEADING_AT, SCALE, reach=reach)


def read_message(image: np.ndarray, at: Sequence[int]) -> list[str]:
    """The message pane's lines as drawn (trailing blank lines cut), for the Mail window at ``at``."""
    lines = [pixel_font.read_text(image, at[0] + BODY_TEXT[0], at[1] + BODY_TEXT[1] + i * LINE_H, SCALE, LINE_CHARS)
             for i in range(MAX_LINES)]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def read_status(image: np.ndarray, at: Sequence[int]) -> str:
    """The desk's status line (dot matrix) for the Badge Desk at ``at``."""
    return pixel_font.read_text(image, at[0] + STATUS_TEXT[0], at[1] + STATUS_TEXT[1], SCALE, STATUS_CHARS)
