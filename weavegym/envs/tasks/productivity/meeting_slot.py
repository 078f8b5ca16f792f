"""Weave-Productivity-5: find the earliest slot a team in several time zones and a meeting room can all make,
hold it on the room's booking board, write the invitation, and answer a question about the slots.

The attendees' calendars are .ics files (weekly series with BYDAY, INTERVAL, COUNT, UNTIL and EXDATE; meetings
written in the owner's zone, in UTC or in a colleague's; all-day out-of-office; cancelled and free events that
do not count) and people.csv (logins, emails, zones, working hours) in /srv/calendars, a folder only the
workspace account can read. The room's bookings exist only as pixels: a Tk "Room Bookings" board (desktop
account) draws one room's week at a time in dot-matrix text (``pixel_font``) after its tab is clicked (it opens
on another room), fed from a root-only stdin file that setup deletes once the board is drawn. Every seed's room
is booked over the earliest and the latest slot the calendars alone leave, and the seeds are drawn so that
reading the zones or the series wrong changes the answer too. The question varies by seed (the earliest start,
the latest, how many starts work); the answer is scored from ``done(answer=...)``, the hold on the board (a
root-only record) and ~/invite.ics, which the shell writes.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.dialogs import json_record
from weavegym.envs.tasks.pixel_font import read_text
from weavegym.envs.tasks.productivity import _calendars as cal
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.answers import check_number, extract_answer
from weavegym.evaluators.provenance import Deliverable

FOLDER = "/srv/calendars"
INVITE = f"{HOME}/invite.ics"
APP_DIR = "/usr/local/share/roombookings"
APP = f"{APP_DIR}/booking_board.py"
BOARD_IN = f"{PRIVATE_DIR}/room-bookings.json"
RECORD = f"{PRIVATE_DIR}/room-hold.json"
TITLE = "Room Bookings"

# The board's geometry (pixels inside its window): the fixture draws here, the oracle reads and clicks here.
WIDTH, HEIGHT = 900, 560
CANVAS = (10, 52, 880, 330)
STATUS = (10, 486, 880, 36)
SCALE, TITLE_SCALE, TITLE_AT, SUBTITLE_AT = 2, 3, (16, 10), (16, 40)
COLUMN_X0, COLUMN_W, HEADER_Y, RULE_Y, FIRST_LINE_Y, LINE_H, LINES = 16, 172, 74, 92, 102, 20, 11
STATUS_AT = (8, 11)
WAIT_TRIES = 20
HOLD_TRIES, RETRY_WAITS = 3, 8


def layout() -> dict[str, Any]:
    """Where the board puts everything, the same for every seed (so none of it says anything secret)."""
    return {"width": WIDTH, "height": HEIGHT, "canvas": list(CANVAS), "status": list(STATUS), "scale": SCALE,
            "title_scale": TITLE_SCALE, "title": list(TITLE_AT), "subtitle": list(SUBTITLE_AT),
            "columns": [COLUMN_X0 + i * COLUMN_W for i in range(5)], "column_w": COLUMN_W, "header_y": HEADER_Y,
            "rule_y": RULE_Y, "first_line_y": FIRST_LINE_Y, "line_h": LINE_H, "status_text": list(STATUS_AT),
            "tabs": [[10 + i * 130, 10, 120, 32] for i in range(4)], "date": [20, 414, 160, 30],
            "start": [220, 414, 130, 30], "length": [390, 414, 130, 30], "hold": [740, 410, 150, 38]}


def screen_targets(window: Sequence[int]) -> dict[str, Any]:
    """Where on the screen the oracle reads and clicks, from the board window's position alone."""
    x, y = window[0], window[1]
    lay = layout()
    cx, cy = x + CANVAS[0], y + CANVAS[1]
    return {"tabs": [_center(x, y, box) for box in lay["tabs"]],
            **{key: _center(x, y, lay[key]) for key in ("date", "start", "length", "hold")},
            "title": [cx + TITLE_AT[0], cy + TITLE_AT[1]], "subtitle": [cx + SUBTITLE_AT[0], cy + SUBTITLE_AT[1]],
            "columns": [[cx + c, cy + FIRST_LINE_Y] for c in lay["columns"]],
            "headers": [[cx + c, cy + HEADER_Y] for c in lay["columns"]],
            "status": [x + STATUS[0] + STATUS_AT[0], y + STATUS[1] + STATUS_AT[1]]}


def _center(x: int, y: int, box: Sequence[int]) -> list[int]:
    return [x + box[0] + box[2] // 2, y + box[1] + box[3] // 2]


# -- reading the board (the oracle's eyes) -------------------------------------------------------------------


def shown_room(image: np.ndarray, targets: Mapping[str, Any]) -> str:
    """The room whose week the board shows ("" when the title does not read)."""
    match = re.fullmatch(r"ROOM ([A-Z]+)", read_text(image, *targets["title"], TITLE_SCALE, 14))
    return "" if match is None else match[1]


def read_bookings(image: np.ndarray, targets: Mapping[str, Any], dates: Sequence[str]) -> list[list[str]]:
    """The shown room's bookings, [date, "HH:MM", "HH:MM"] per line of each day's column, in order."""
    found = []
    for date, (x, y) in zip(dates, targets["columns"], strict=True):
        for row in range(LINES):
            match = re.fullmatch(r"(\d\d:\d\d)-(\d\d:\d\d)", read_text(image, x, y + row * LINE_H, SCALE, 11))
            if match is None:
                break
            found.append([date, match[1], match[2]])
    return found


def read_status(image: np.ndarray, targets: Mapping[str, Any]) -> str:
    return read_text(image, *targets["status"], SCALE, 70)


# -- setup ------------------------------------------------------------------------------------------------------


def _spoken(iso: str) -> str:
    day = dt.date.fromisoformat(iso)
    return f"{day:%A} {day.day} {day:%B %Y}"


def question(kind: str) -> str:
    if kind == "earliest":
        return ("when does that earliest slot start? Give its room-time date and time as YYYY-MM-DD HH:MM "
                "(for example 2026-12-08 14:30).")
    if kind == "latest":
        return ("what is the latest time in the whole window at which such a meeting could start? Give its "
                "room-time date and time as YYYY-MM-DD HH:MM (for example 2026-12-08 14:30).")
    return "how many different quarter-hour start times in the whole window would work? Answer with the number."


def _open_board(ctx: SetupContext, world: Mapping[str, Any]) -> list[int]:
    """Start the board with the rooms on its stdin, wait until the first room is drawn, then delete the input."""
    board = {"rooms": world["boards"], "dates": world["dates"], "zone": f"UTC{cal.utc_offset(world['offset'])}",
             "open": world["window"]["open"], "close": world["window"]["close"], "layout": layout()}
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/booking_board.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.write_file(BOARD_IN, json.dumps(board), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {BOARD_IN} > {RECORD}", name="roombookings")
    window = ctx.wait_window(f"^{TITLE}$").geometry
    targets, first = screen_targets(window), world["boards"][0]["name"]
    try:  # mapped is not drawn (TCG): wait until the first room's title and status read back (pointer hidden)
        wait_for(lambda: _drawn(ctx.client.screenshot(hide_cursor=True).image, targets, first), 120,
                 what="the Room Bookings board drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", BOARD_IN])  # the board has read it: the bookings now live only on screen
    return window


def _drawn(image: np.ndarray, targets: Mapping[str, Any], room: str) -> bool:
    return shown_room(image, targets) == room and read_status(image, targets) == f"SHOWING ROOM {room}"


def setup(ctx: SetupContext) -> Prepared:
    world = cal.make_world(ctx.rng, cal.kind_of(ctx.seed))
    ctx.make_private_dir()
    # The workspace account's alone (0700 folder, 0600 files): a desktop terminal cannot read one calendar.
    ctx.run(["install", "-d", "-m", "0700", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, FOLDER])
    for login, text in world["calendars"].items():
        ctx.write_file(f"{FOLDER}/{login}.ics", text, owner=WORKSPACE_USER, mode=0o600)
    ctx.write_file(f"{FOLDER}/people.csv", world["people_csv"], owner=WORKSPACE_USER, mode=0o600)
    window = _open_board(ctx, world)
    names = world["attendees"]
    kind, slots = world["kind"], world["slots"]
    return Prepared(
        params={"attendees": ", ".join(names[:-1]) + " and " + names[-1], "minutes": world["minutes"],
                "room": world["room"], "office": world["office"], "offset": cal.utc_offset(world["offset"]),
                "first": _spoken(world["dates"][0]), "last": _spoken(world["dates"][-1]),
                "open": world["window"]["open"], "close": world["window"]["close"], "question": question(kind)},
        truth={"kind": kind, "board": window, "targets": screen_targets(window), "room": world["room"],
               "room_index": world["room_index"], "dates": world["dates"], "offset": world["offset"],
               "open": world["window"]["open"], "close": world["window"]["close"], "minutes": world["minutes"],
               "attendees": names, "bookings": world["window"]["room"], "emails": world["emails"],
               "slots": slots, "earliest": slots[0], "answer": cal.answer_of(kind, slots)})


# -- the checker ------------------------------------------------------------------------------------------------

STAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2})[T ](\d{1,2}):(\d{2})(?::\d{2})?"
                   r"(?:\s*(Z\b|(?:UTC|GMT)\s?[+-]\d{1,2}(?::?\d{2})?|\+\d{2}:?\d{2}|UTC\b|GMT\b))?", re.I)


def _zone_minutes(zone: str) -> int | None:
    """East of UTC in minutes for "Z", "UTC", "UTC+5:30", "+0800"; None when the time has no zone (room time)."""
    if not zone:
        return None
    match = re.search(r"([+-])(\d{1,2})(?::?(\d{2}))?", zone)
    if match is None:
        return 0
    return (1 if match[1] == "+" else -1) * (int(match[2]) * 60 + int(match[3] or 0))


def read_starts(answer: str, offset: int) -> list[str]:
    """Every date-and-time of the answer in room time ("YYYY-MM-DD HH:MM"), a stated zone converted."""
    found = []
    for match in STAMP.finditer(extract_answer(answer)):
        try:
            at = dt.datetime(int(match[1]), int(match[2]), int(match[3]), int(match[4]), int(match[5]))
        except ValueError:
            continue
        zone = _zone_minutes(match[6] or "")
        if zone is not None:
            at += dt.timedelta(minutes=offset - zone)
        found.append(at.strftime("%Y-%m-%d %H:%M"))
    return sorted(set(found))


def check_answer(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    answer = probe.episode.answer
    if truth["kind"] == "count":
        return check_number(answer, truth["answer"])
    said = read_starts(answer, truth["offset"])
    evidence = f"the answer {answer[:120]!r} names {said or 'no date and time'} (room time); expected {truth['answer']}"
    return Verdict.check(said == [truth["answer"]], evidence)


def parse_invite(text: str) -> list[dict[str, list[str]]]:
    """The VEVENTs of an iCalendar text: each property's values by name (parameters dropped but TZID kept)."""
    text = re.sub(r"\r?\n[ \t]", "", text)
    events: list[dict[str, list[str]]] = []
    current: dict[str, list[str]] | None = None
    for line in text.splitlines():
        head, _, value = line.partition(":")
        name = head.split(";")[0].upper()
        if line.upper() == "BEGIN:VEVENT":
            current = {}
        elif line.upper() == "END:VEVENT" and current is not None:
            events.append(current)
            current = None
        elif current is not None:
            zone = re.search(r";TZID=([^;:]+)", head)
            current.setdefault(name, []).append((f"{zone[1]}|" if zone else "") + value.strip())
    return events


def _utc(value: str) -> dt.datetime | None:
    """A DTSTART/DTEND value in UTC: "...Z" or "Zone|..." for a zone of the task's table; None otherwise."""
    zone, _, stamp = value.rpartition("|")
    try:
        local = dt.datetime.strptime(stamp.rstrip("Zz")[:15], "%Y%m%dT%H%M%S")
    except ValueError:
        return None
    if stamp.upper().endswith("Z") and not zone:
        return local
    return local - dt.timedelta(minutes=cal.ZONES[zone]) if zone in cal.ZONES else None


def _duration(value: str) -> int | None:
    match = re.fullmatch(r"PT(?:(\d+)H)?(?:(\d+)M)?", value.strip().upper())
    return None if match is None or not (match[1] or match[2]) else int(match[1] or 0) * 60 + int(match[2] or 0)


def check_invite(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(INVITE)
    if text is None:
        return Verdict.failed(f"{INVITE} does not exist")
    events = parse_invite(text)
    if len(events) != 1:
        return Verdict.failed(f"{INVITE} has {len(events)} VEVENTs, not one")
    event = events[0]
    want = dt.datetime.strptime(truth["earliest"], "%Y-%m-%d %H:%M") - dt.timedelta(minutes=truth["offset"])
    start = _utc(event.get("DTSTART", [""])[0])
    end = _utc(event["DTEND"][0]) if "DTEND" in event else None
    length = (end - start).total_seconds() // 60 if start and end else _duration(event.get("DURATION", [""])[0])
    emails = sorted(v.split(":", 1)[-1].strip().lower() for v in event.get("ATTENDEE", []))
    location = " ".join(event.get("LOCATION", [])).upper()
    parts = {"start": start == want, "length": length == truth["minutes"], "location": truth["room"] in location,
             "attendees": emails == sorted(truth["emails"])}
    evidence = (f"{INVITE}: DTSTART {start} UTC (expected {want}), {length} minutes (expected {truth['minutes']}), "
                f"LOCATION {location!r} (expected {truth['room']}), attendees {emails} (expected "
                f"{sorted(truth['emails'])})")
    if all(parts.values()):
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if parts["start"] else Verdict.failed(evidence)


def check_hold(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = json_record(probe, RECORD)
    if found is None:
        return Verdict.failed("no slot was held on the Room Bookings board")
    said = (found.get("room"), f"{found.get('date')} {found.get('start')}", found.get("minutes"))
    want = (truth["room"], truth["earliest"], truth["minutes"])
    return Verdict.check(said == want, f"the board held room {said[0]!r} at {said[1]!r} for {said[2]!r} minutes; "
                                       f"expected room {want[0]} at {want[1]} for {want[2]} minutes")


# -- the oracle -------------------------------------------------------------------------------------------------

LINE = re.compile(r"^(SLOTS|EARLIEST|LATEST) (.*?)\s*$", re.M)


def parse_output(terminal: str) -> dict[str, str]:
    """The program's SLOTS/EARLIEST/LATEST lines as the terminal shows them (the last of each)."""
    return {m[1].lower(): m[2] for m in LINE.finditer(terminal.replace("\r", ""))}


def spoken(kind: str, output: Mapping[str, str]) -> str:
    """The oracle's answer from what its program printed ("" when it printed nothing)."""
    return output.get({"count": "slots", "earliest": "earliest", "latest": "latest"}[kind], "")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Room tab (GUI), read its bookings off the screen, the slots from the calendars (CLI), hold it (GUI)."""
    truth, targets = ctx.truth, ctx.truth["targets"]
    tab = targets["tabs"][truth["room_index"]]
    yield {"kind": "click", "x": tab[0], "y": tab[1]}
    for _ in range(WAIT_TRIES):  # the click's redraw may trail the observation under TCG
        assert ctx.obs is not None
        if shown_room(ctx.obs["screen"], targets) == truth["room"]:
            break
        yield {"kind": "wait", "seconds": 1}
    assert ctx.obs is not None
    on_screen = shown_room(ctx.obs["screen"], targets) == truth["room"]
    window = {"offset": truth["offset"], "dates": truth["dates"], "open": truth["open"], "close": truth["close"],
              "minutes": truth["minutes"],
              "room": read_bookings(ctx.obs["screen"], targets, truth["dates"]) if on_screen else []}
    yield {"kind": "python", "code": cal.program(window, truth["attendees"], FOLDER, INVITE, truth["room"]),
           "timeout": 120}
    output = parse_output((ctx.obs or {}).get("terminal", ""))
    earliest = output.get("earliest", "")
    if on_screen and earliest:
        yield from _hold(ctx, earliest, truth["minutes"])
    yield {"kind": "done", "answer": spoken(truth["kind"], output)}


def _hold(ctx: OracleContext, earliest: str, length: int) -> Iterator[ActionLike]:
    """Fill the hold form and press Hold slot until the board says HELD (the board prints its record first).

    Each field is selected whole (Tk's ctrl+slash) before typing, so a retry replaces what a lost or doubled
    keystroke under TCG left there instead of adding to it.
    """
    targets = ctx.truth["targets"]
    for attempt in range(HOLD_TRIES):
        for key, text in (("date", earliest[:10]), ("start", earliest[11:]), ("length", str(length))):
            yield {"kind": "click", "x": targets[key][0], "y": targets[key][1]}
            yield {"kind": "key", "keys": "ctrl+slash"}
            yield {"kind": "type", "text": text}
        yield {"kind": "click", "x": targets["hold"][0], "y": targets["hold"][1]}
        # A refusal ends the first wait; a retry's refusal would read the same as the one before, so a retry
        # waits for HELD alone, a shorter while.
        for _ in range(WAIT_TRIES if attempt == 0 else RETRY_WAITS):
            status = read_status((ctx.obs or {})["screen"], targets)
            if status.startswith("HELD "):
                return
            if attempt == 0 and status.startswith("REFUSED"):
                break
            yield {"kind": "wait", "seconds": 1}


TASK = Task(
    id="Weave-Productivity-5",
    title="Find the earliest meeting slot for a team across time zones and a booked room",
    instruction=(
        "Find a slot for a {minutes}-minute meeting of {attendees} in meeting room {room}, whose office keeps "
        "{office} time (room time: UTC{offset}). Everyone's calendar is an .ics file in /srv/calendars/, named "
        "after the person's login; /srv/calendars/people.csv gives each person's login, name, email, time zone and "
        "working hours (in their own time, Monday to Friday). The room's bookings are on the 'Room Bookings' board "
        "on the desktop (one tab per room). The meeting must start on a quarter hour (:00, :15, :30 or :45) of room "
        "time on one of the days {first} to {last}, begin and end within the room's bookable hours {open}-{close} "
        "(room time) and within every attendee's working hours on one of their own weekdays, and overlap none of "
        "the room's bookings and none of the attendees' events: every occurrence of recurring ones (RRULE, minus "
        "EXDATE) counts, cancelled events (STATUS:CANCELLED) and events marked free (TRANSP:TRANSPARENT) do not, "
        "and an all-day event takes the attendee's whole day(s) in their own time zone. 1) On the board, hold the "
        "earliest such slot: on the room's tab, enter its date (YYYY-MM-DD), its start (HH:MM, room time) and the "
        "length in minutes, and press 'Hold slot'. 2) Write ~/invite.ics, an iCalendar file with one VEVENT for "
        "that slot: DTSTART and DTEND in UTC (like 20261208T063000Z), LOCATION:{room} and one ATTENDEE line per "
        "attendee (ATTENDEE:mailto:<their email from people.csv>). 3) Finish with done, answering: {question}"),
    channels=Channels(
        gui="open the room's tab on the booking board, read its bookings off the screen, hold the slot there",
        cli="expand the attendees' .ics calendars (zones, weekly series, exceptions, all-day absences) against their "
            "working hours and the room's bookings, write the invitation",
        why_both="the room's bookings exist only as pixels of the board (after a tab click) and always take the "
                 "earliest slot the calendars leave, while the calendars are in files only the shell's account can "
                 "read; the hold is a record only the board writes"),
    setup=setup,
    clauses=(
        Clause("answer", "the answer to the seed's question about the meeting's slots is right", check_answer,
               weight=2.0, critical=True),
        Clause("invitation", "~/invite.ics has one event at the earliest slot, of the meeting's length, in the room, "
               "for exactly the attendees", check_invite),
        Clause("slot_held", "the Room Bookings board held the earliest slot in the asked room for the meeting's "
               "length", check_hold, weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the Room Bookings board's hold (captured by setup)"),
        Deliverable(INVITE, "cli", description="~/invite.ics"),
    ),
    withheld=("bookings", "emails", "slots", "earliest", "answer"),
    oracle=oracle,
    apps=("python3-tk", "python3"),
    max_steps=100,
    time_budget_s=900.0,
)
