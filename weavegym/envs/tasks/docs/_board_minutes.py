"""What each seed of Weave-Docs-7 varies, and where its Minutes Desk window draws (no TASK).

Kept apart from the task module so that setup, the oracle and the tests share one plan of the meeting (the
register's members with their numbers, terms and accents, the meetings, the agenda items with their motions,
votes, decisions and actions), one reference rule, one line of minutes per item and one geometry of the desk:
the fixture draws at these positions, the oracle reads and clicks there.

The transcript names members by their initials only (pixel_font has ASCII capitals); the register maps initials
to full names, and a former member who shares an attendee's initials makes the term dates matter. Due dates are
relative ("DUE THREE WEEKS AFTER THE MEETING"); the meeting's date is in the register only.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.core.errors import TaskError
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.dialogs import FOCUS_RING, FOCUS_RING_COLOUR, focus_ring_shown, ring_colour_hex

# ---- the register -----------------------------------------------------------------------------------------------

# (full name, initials): the names the agent types into Writer, accents and all. Initials are unique in this list.
MEMBERS = (("Zoë Brontë", "ZB"), ("José Núñez", "JN"), ("Åsa Lindström", "AL"), ("Søren Kjær", "SK"),
           ("Renée Fournier", "RF"), ("Łukasz Wójcik", "LW"), ("Jürgen Weiß", "JW"), ("Inés Ibáñez", "II"),
           ("François Lefèvre", "FL"), ("Małgorzata Nowak", "MN"), ("Björn Ødegård", "BO"), ("Chloé Durand", "CD"),
           ("Dagný Jónsdóttir", "DJ"), ("Mária Horváth", "MH"), ("Tomáš Dvořák", "TD"), ("Ayşe Yılmaz", "AY"))
# A former member with the same initials as a current one: the register's terms tell them apart.
FORMER = {"ZB": "Zygmunt Bąk", "JN": "Jana Nováková", "AL": "Anders Lund", "SK": "Sigrid Krogh",
          "RF": "Raúl Fernández", "LW": "Lotte Wagner", "JW": "Jan Wouters", "II": "Ivo Ilić", "FL": "Félix Lorenz",
          "MN": "Mette Nørgaard", "BO": "Bruno Ortiz", "CD": "César Díaz", "DJ": "Dóra Jakab",
          "MH": "Matías Herrera", "TD": "Teresa Domínguez", "AY": "Anaïs Yvon"}
ROLES = ("Chair", "Vice-chair", "Treasurer", "Secretary")
BOARD_SIZE = 7
# (agenda title, the decision as the transcript words it, the action given to its owner)
AGENDA = (("Operating budget 2027", "APPROVED THE 2027 OPERATING BUDGET", "PUBLISH THE BUDGET"),
          ("Office lease", "APPROVED THE OFFICE LEASE RENEWAL", "SIGN THE NEW LEASE"),
          ("External auditor", "APPOINTED NORDVIK AUDIT AS AUDITOR", "SEND THE ENGAGEMENT LETTER"),
          ("Travel policy", "REJECTED THE NEW TRAVEL POLICY", "REDRAFT THE TRAVEL POLICY"),
          ("Website redesign", "DEFERRED THE WEBSITE REDESIGN", "COLLECT THREE QUOTES"),
          ("Membership fee", "RAISED THE MEMBERSHIP FEE BY 4 PERCENT", "NOTIFY THE MEMBERS"),
          ("Data protection", "ADOPTED THE DATA PROTECTION POLICY", "TRAIN THE STAFF"),
          ("Reserve fund", "MOVED 20000 EUR TO THE RESERVE FUND", "UPDATE THE CASH PLAN"))
DUES = {5: "FIVE DAYS", 7: "ONE WEEK", 10: "TEN DAYS", 14: "TWO WEEKS", 21: "THREE WEEKS", 28: "FOUR WEEKS",
        30: "THIRTY DAYS", 45: "FORTY-FIVE DAYS"}
N_ITEMS = (3, 5)  # at least, below
N_MEETINGS = 4

# ---- the Minutes Desk window's geometry (pixels inside the window) ------------------------------------------------

TITLE, HEADING = "Minutes Desk", "MINUTES DESK"
SCALE, HEADING_AT = 2, (16, 10)
DESK_AT, DESK_SIZE = (716, 40), (556, 600)
WRITER_AT, WRITER_SIZE = (0, 40), (700, 640)
PAPER = (16, 34, 524, 236)
TEXT_AT, LINE_H, LINES, CHARS = (30, 46), 26, 8, 41
SHOW_BUTTON = (16, 300, 150, 32)
REF_LABEL, REF_ENTRY, FILE_BUTTON = (180, 278), (180, 300, 220, 32), (412, 300, 128, 32)
STATUS_AT, STATUS_CHARS = (24, 350), 42
HELP_AT = (24, 390)
RING, RING_COLOUR = FOCUS_RING, FOCUS_RING_COLOUR  # the reference entry's focus ring


def layout() -> dict[str, Any]:
    """Where the Minutes Desk puts everything; boxes are [x, y, width, height] in the window."""
    return {"title": TITLE, "heading": HEADING, "heading_at": list(HEADING_AT), "scale": SCALE,
            "size": list(DESK_SIZE), "paper": list(PAPER), "text_at": list(TEXT_AT), "line_h": LINE_H,
            "show_button": list(SHOW_BUTTON), "ref_label": list(REF_LABEL), "ref_entry": list(REF_ENTRY),
            "file_button": list(FILE_BUTTON), "status_at": list(STATUS_AT), "help_at": list(HELP_AT), "ring": RING,
            "ring_colour": ring_colour_hex(RING_COLOUR)}


def centre(origin: Sequence[int], box: Sequence[int]) -> list[int]:
    return [origin[0] + box[0] + box[2] // 2, origin[1] + box[1] + box[3] // 2]


def origin(image: Any, near: Sequence[int], reach: int = 40) -> tuple[int, int] | None:
    """The desk's top-left on screen, where its heading reads back near ``near``; None while not drawn."""
    return pixel_font.find_drawn(image, HEADING, near, HEADING_AT, SCALE, reach=reach)


def read_transcript(image: Any, at: Sequence[int]) -> list[str]:
    return [pixel_font.read_text(image, at[0] + TEXT_AT[0], at[1] + TEXT_AT[1] + i * LINE_H, SCALE, CHARS)
            for i in range(LINES)]


def entry_focused(image: Any, at: Sequence[int]) -> bool:
    """True when the reference entry shows its focus ring: the desk has the keyboard."""
    x, y, w, h = REF_ENTRY
    return focus_ring_shown(image, (at[0] + x, at[1] + y, w, h), RING_COLOUR)


def read_status(image: Any, at: Sequence[int]) -> str:
    return pixel_font.read_text(image, at[0] + STATUS_AT[0], at[1] + STATUS_AT[1], SCALE, STATUS_CHARS)


# ---- the meeting ----------------------------------------------------------------------------------------------------


def reference(code: str, number: int, owner_no: int, due: str) -> str:
    """An item's minute reference: the meeting's code, the item's number, the action owner's member number and the
    due date as YYYYMMDD, joined by '-'."""
    return f"{code}-{number}-{owner_no}-{due.replace('-', '')}"


def minute_line(item: Mapping[str, Any]) -> str:
    """The line of minutes the instruction asks for, as the oracle types it (sentence case)."""
    decision = item["decision"].capitalize()
    return (f"Decision: {decision}. Vote: for {item['for']}, against {item['against']}, abstained "
            f"{item['abstained']}. Moved by {item['mover']}, seconded by {item['seconder']}. Action: "
            f"{item['owner']} to {item['action'].lower()}, due {item['due']}.")


def norm(text: str) -> str:
    """How the checker compares minutes: NFC, case-folded, every run of other characters than letters, digits and
    '-' (any dash) one space. Autocorrect's dashes, quotes and capitals do not matter; names' accents do."""
    text = unicodedata.normalize("NFC", str(text)).casefold()
    text = re.sub(r"[\u2010-\u2015\u2212]", "-", text)
    return " ".join(re.sub(r"[^\w-]+|_", " ", text).split())


def required(item: Mapping[str, Any]) -> dict[str, str]:
    """{part: normalized words} an item's section must contain."""
    return {"decision": norm(f"decision: {item['decision']}"),
            "vote": norm(f"vote: for {item['for']}, against {item['against']}, abstained {item['abstained']}"),
            "motion": norm(f"moved by {item['mover']}, seconded by {item['seconder']}"),
            "action": norm(f"action: {item['owner']} to {item['action']}, due {item['due']}")}


def _dates(rng: np.random.Generator) -> list[dt.date]:
    """N_MEETINGS meeting dates a few weeks apart, oldest first."""
    day = dt.date(2026, int(rng.integers(1, 7)), int(rng.integers(1, 28)))
    out = []
    for _ in range(N_MEETINGS):
        out.append(day)
        day += dt.timedelta(days=int(rng.integers(21, 50)))
    return out


def plan(rng: np.random.Generator) -> dict[str, Any]:
    """One seed's meeting: the register (members, former members, meetings), which meeting it is, and its items
    with everything the minutes need."""
    picked = [MEMBERS[int(i)] for i in rng.choice(len(MEMBERS), BOARD_SIZE, replace=False)]
    numbers = [int(n) for n in rng.choice(np.arange(101, 400), BOARD_SIZE + 2, replace=False)]
    dates = _dates(rng)
    which = int(rng.integers(1, N_MEETINGS))  # never the first: the former members left before it
    day = dates[which]
    year = day.year % 100
    codes = [f"BM{year:02d}{i + 3:02d}" for i in range(N_MEETINGS)]
    members = []
    for index, (name, initials) in enumerate(picked):
        role = ROLES[index] if index < len(ROLES) else "Member"
        joined = dates[0] - dt.timedelta(days=int(rng.integers(200, 1500)))
        members.append({"initials": initials, "member_no": numbers[index], "full_name": name, "role": role,
                        "joined": str(joined), "left": None})
    n = int(rng.integers(N_ITEMS[0], N_ITEMS[1]))
    agenda = [AGENDA[int(i)] for i in rng.choice(len(AGENDA), n, replace=False)]
    items = []
    by_initials = {m["initials"]: m for m in members}
    for number, (title, decision, action) in enumerate(agenda, 1):
        mover, seconder, owner = (members[int(i)] for i in rng.choice(BOARD_SIZE, 3, replace=False))
        if rng.random() < 0.4:
            owner = mover
        present = BOARD_SIZE - int(rng.integers(0, 3))  # 5 to 7 of the board
        minority, abstained = int(rng.integers(0, 2)), int(rng.integers(0, 2))
        majority = present - minority - abstained  # at least 3
        cast, against = (minority, majority) if decision.startswith("REJECTED") else (majority, minority)
        days = int(rng.choice(sorted(DUES)))
        due = str(day + dt.timedelta(days=days))
        item = {"number": number, "title": title, "decision": decision, "action": action,
                "mover_initials": mover["initials"], "seconder_initials": seconder["initials"],
                "owner_initials": owner["initials"], "mover": mover["full_name"], "seconder": seconder["full_name"],
                "owner": owner["full_name"], "owner_no": owner["member_no"], "for": cast, "against": against,
                "abstained": abstained, "due_words": DUES[days], "due": due}
        item["reference"] = reference(codes[which], number, owner["member_no"], due)
        item["lines"] = [f"MEETING {codes[which]}  ITEM {number} OF {n}", title.upper(),
                         f"MOVED BY {mover['initials']}, SECONDED BY {seconder['initials']}",
                         f"VOTES: {cast} FOR, {against} AGAINST, {abstained} ABSTAINED", "DECISION:", decision,
                         f"ACTION: {owner['initials']} TO {action}", f"DUE {DUES[days]} AFTER THE MEETING"]
        items.append(item)
    # Two former members share the initials of an action owner or a mover; they left before the first meeting.
    shared = sorted({i["owner_initials"] for i in items} | {i["mover_initials"] for i in items})
    former = []
    for k, initials in enumerate(rng.choice(shared, min(2, len(shared)), replace=False)):
        joined = dates[0] - dt.timedelta(days=int(rng.integers(2000, 3000)))
        left = dates[0] - dt.timedelta(days=int(rng.integers(10, 300)))
        former.append({"initials": str(initials), "member_no": numbers[BOARD_SIZE + k], "full_name": FORMER[
            str(initials)], "role": "Member", "joined": str(joined), "left": str(left)})
    meetings = [{"code": c, "held_on": str(d), "place": place}
                for c, d, place in zip(codes, dates, ("Lisbon", "Gdańsk", "Malmö", "Zürich"), strict=True)]
    for item in items:
        for line in item["lines"]:
            if len(line) > CHARS or pixel_font.unsupported(line):
                raise TaskError(f"Weave-Docs-7: transcript line {line!r} does not fit the desk")
        assert by_initials[item["owner_initials"]]["full_name"] == item["owner"]
    return {"members": members, "former": former, "meetings": meetings, "meeting": codes[which],
            "held_on": str(day), "items": items}


# ---- the oracle's reading of a transcript ---------------------------------------------------------------------------

_HEAD = re.compile(r"MEETING (BM\d{4})  ITEM (\d+) OF (\d+)")
_MOVED = re.compile(r"MOVED BY ([A-Z]{2}), SECONDED BY ([A-Z]{2})")
_VOTES = re.compile(r"VOTES: (\d+) FOR, (\d+) AGAINST, (\d+) ABSTAINED")
_ACTION = re.compile(r"ACTION: ([A-Z]{2}) TO (.+)")
_DUE = re.compile(r"DUE (.+) AFTER THE MEETING")
WORD_DAYS = {words: days for days, words in DUES.items()}


def parse_transcript(lines: Sequence[str]) -> dict[str, Any] | None:
    """The facts of a transcript's drawn lines, or None when they do not read as one (not drawn yet, covered)."""
    if len(lines) < LINES or "?" in "".join(lines):
        return None
    head, moved, votes, action, due = (_HEAD.fullmatch(lines[0]), _MOVED.fullmatch(lines[2]),
                                       _VOTES.fullmatch(lines[3]), _ACTION.fullmatch(lines[6]),
                                       _DUE.fullmatch(lines[7]))
    if not (head and moved and votes and action and due and lines[4] == "DECISION:" and lines[5]):
        return None
    if due.group(1) not in WORD_DAYS:
        return None
    return {"meeting": head.group(1), "number": int(head.group(2)), "count": int(head.group(3)), "title": lines[1],
            "mover_initials": moved.group(1), "seconder_initials": moved.group(2), "for": int(votes.group(1)),
            "against": int(votes.group(2)), "abstained": int(votes.group(3)), "decision": lines[5],
            "owner_initials": action.group(1), "action": action.group(2), "days": WORD_DAYS[due.group(1)]}
