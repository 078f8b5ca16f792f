"""The calendar side of Weave-Productivity-5 (no TASK here): the team's .ics calendars and people.csv the shell
gets, the room's bookings the board shows, and the meeting slots over both.

``slot_starts`` is self-contained (standard library only, imports and helpers inside) on purpose: the oracle's
python step runs its own source in the guest, and setup's truth comes from the very same function on the very
same texts, so the two cannot drift apart (Weave-Docs-4 does the same with its bill). Times inside it are whole
minutes since the epoch, UTC; every zone the world uses keeps one UTC offset all year (no daylight saving), and
the calendars' VTIMEZONEs say so, so an agent with zoneinfo and one with the files alone agree.
"""

from __future__ import annotations

import datetime as dt
import inspect
import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.core.errors import TaskError

# Zones without daylight saving (their offsets are right for any date), minutes east of UTC.
ZONES = {"Atlantic/Reykjavik": 0, "Africa/Lagos": 60, "Africa/Johannesburg": 120, "Africa/Nairobi": 180,
         "Asia/Dubai": 240, "Asia/Karachi": 300, "Asia/Kolkata": 330, "Asia/Kathmandu": 345, "Asia/Dhaka": 360,
         "Asia/Bangkok": 420, "Asia/Singapore": 480, "Asia/Tokyo": 540, "Australia/Brisbane": 600,
         "America/Sao_Paulo": -180, "America/Bogota": -300, "America/Regina": -360, "America/Phoenix": -420}
OFFICES = ("Africa/Lagos", "Africa/Nairobi", "Asia/Dubai", "Asia/Kolkata", "Asia/Singapore", "Africa/Johannesburg")
ROOMS = ("ORCHID", "BAOBAB", "CEDAR", "LOTUS", "MAPLE", "JUNIPER", "SEQUOIA", "WILLOW", "AZALEA", "ACACIA")
FIRST = ("Ana", "Bilal", "Chen", "Dara", "Emeka", "Farah", "Goran", "Hana", "Ines", "Jomo", "Kenji", "Leila",
         "Mateo", "Nia", "Omar", "Priya", "Quinn", "Rahul", "Sofia", "Tariq", "Uma", "Viktor", "Wen", "Yusuf")
LAST = ("Ruiz", "Okafor", "Tanaka", "Mehta", "Haddad", "Silva", "Novak", "Kariuki", "Lindqvist", "Osei",
        "Rahman", "Moreau", "Adeyemi", "Castillo", "Ibrahim", "Nakamura", "Petrov", "Sato", "Varga", "Zulu")
DOMAINS = ("kestrel.example", "ardent.example", "lumen.example", "northwind.example")
TOPICS = ("Standup", "1:1 with manager", "Design review", "Sprint planning", "Customer call", "Hiring panel",
          "Budget sync", "Vendor demo", "Architecture forum", "Release triage", "Lunch and learn", "Roadmap")
DETAILS = ("agenda and dial-in details are in the shared notes of the team's planning folder",
           "please read the pre-reads before the call, we will go through the open questions in order",
           "bring the numbers for your region; the slides are in the quarterly review deck", "weekly",
           "notes from the last session and the action items are attached to the invitation")
KINDS = ("earliest", "count", "latest")
LENGTHS = (30, 45, 60, 75, 90)
DAYS = ("MO", "TU", "WE", "TH", "FR")
WEEKS = tuple(dt.date(2026, 11, 16) + dt.timedelta(weeks=i) for i in range(5))  # Mondays


def kind_of(seed: int) -> str:
    """The seed's question: consecutive seeds cycle through the kinds, and so do seeds three apart (0, 3, 6)."""
    return KINDS[(seed + seed // 3) % len(KINDS)]


# -- the slots: self-contained, shipped to the guest as the oracle's program -------------------------------------


def slot_starts(people_csv: str, calendars: dict[str, str], names: list[str], window: dict[str, Any]) -> list[str]:
    """Every room-time start ("YYYY-MM-DD HH:MM", in order) of a meeting every named person and the room can make.

    ``calendars`` maps a login to its .ics text; ``window`` has the room's UTC offset ("offset", minutes), its
    working "dates", its bookable "open"/"close" ("HH:MM"), the meeting's "minutes" and the room's bookings
    ("room": [[date, "HH:MM", "HH:MM"], ...]). A person is free when the meeting lies inside their working
    hours on one of their own Monday-to-Fridays and overlaps none of their events: recurring ones (weekly
    RRULE with BYDAY, INTERVAL, COUNT, UNTIL; EXDATE) expanded, cancelled and transparent ones left out, an
    all-day one taking their whole day in their own zone.
    """
    import csv
    import datetime
    import io

    epoch = datetime.datetime(1970, 1, 1)

    def minutes(local: datetime.datetime, offset: int) -> int:
        return int((local - epoch).total_seconds()) // 60 - offset

    def hm(text: str) -> int:
        hours, mins = text.split(":")
        return int(hours) * 60 + int(mins)

    def parse(text: str) -> tuple[dict[str, int], list[dict[str, Any]], str]:
        lines: list[str] = []
        for raw in text.replace("\r\n", "\n").split("\n"):
            if raw[:1] in (" ", "\t") and lines:
                lines[-1] += raw[1:]
            elif raw:
                lines.append(raw)
        zones, events, stack, home = {}, [], [], ""
        current: dict[str, Any] = {}
        for line in lines:
            head, _, value = line.partition(":")
            name, *params = head.split(";")
            name = name.upper()
            if name == "BEGIN":
                stack.append(value.upper())
                if value.upper() in ("VEVENT", "VTIMEZONE"):
                    current = {}
            elif name == "END":
                done = stack.pop() if stack else ""
                if done == "VEVENT":
                    events.append(current)
                elif done == "VTIMEZONE" and "TZID" in current:
                    zones[current["TZID"][1]] = current["OFFSET"]
            elif name == "X-WR-TIMEZONE":
                home = value
            elif stack and stack[-1] == "STANDARD" and name == "TZOFFSETTO":
                sign = -1 if value.startswith("-") else 1
                current["OFFSET"] = sign * (int(value[1:3]) * 60 + int(value[3:5]))
            elif name == "EXDATE" and stack and stack[-1] == "VEVENT":
                current.setdefault("EXDATE", []).append((dict(p.split("=", 1) for p in params if "=" in p), value))
            elif stack and stack[-1] in ("VEVENT", "VTIMEZONE"):
                current[name] = (dict(p.split("=", 1) for p in params if "=" in p), value)
        return zones, events, home

    def instant(prop: tuple[dict[str, str], str], zones: dict[str, int], home: int) -> tuple[int, bool]:
        """(UTC minutes, all-day?) of a DTSTART/DTEND/EXDATE value."""
        params, value = prop
        if params.get("VALUE") == "DATE" or len(value) == 8:
            day = datetime.datetime.strptime(value[:8], "%Y%m%d")
            return minutes(day, home), True
        local = datetime.datetime.strptime(value[:15], "%Y%m%dT%H%M%S")
        if value.endswith("Z"):
            return minutes(local, 0), False
        return minutes(local, zones.get(params.get("TZID", ""), home)), False

    def busy(text: str, home_zone: str, lo: int, hi: int) -> list[tuple[int, int]]:
        zones, events, _home = parse(text)
        home = zones[home_zone]
        found = []
        for event in events:
            if event.get("STATUS", ({}, ""))[1].upper() == "CANCELLED":
                continue
            if event.get("TRANSP", ({}, ""))[1].upper() == "TRANSPARENT":
                continue
            start, _all_day = instant(event["DTSTART"], zones, home)
            end = instant(event["DTEND"], zones, home)[0] if "DTEND" in event else start + 24 * 60
            offset = zones.get(event["DTSTART"][0].get("TZID", ""), home)
            if event["DTSTART"][1].endswith("Z"):
                offset = 0
            first = epoch + datetime.timedelta(minutes=start + offset)  # local wall time of the first one
            length = end - start
            starts = [start]
            if "RRULE" in event:
                rule = dict(part.split("=", 1) for part in event["RRULE"][1].split(";") if "=" in part)
                assert rule.get("FREQ") == "WEEKLY", rule
                days = [("MO", "TU", "WE", "TH", "FR", "SA", "SU").index(d) for d in
                        rule.get("BYDAY", ("MO", "TU", "WE", "TH", "FR", "SA", "SU")[first.weekday()]).split(",")]
                interval, count = int(rule.get("INTERVAL", "1")), int(rule.get("COUNT", "0"))
                until = instant(({}, rule["UNTIL"]), zones, offset)[0] if "UNTIL" in rule else None
                if until is not None and len(rule["UNTIL"]) == 8:
                    until += 24 * 60 - 1
                monday = first - datetime.timedelta(days=first.weekday())
                starts, made, week = [], 0, 0
                while minutes(monday + datetime.timedelta(weeks=week), offset) <= hi:
                    for day in sorted(days) if week % interval == 0 else []:
                        local = monday + datetime.timedelta(weeks=week, days=day)
                        if local < first:
                            continue
                        at = minutes(local, offset)
                        if (count and made >= count) or (until is not None and at > until):
                            break
                        made += 1
                        starts.append(at)
                    week += 1
                gone = {instant((params, value), zones, offset)[0]
                        for params, values in event.get("EXDATE", []) for value in values.split(",")}
                starts = [s for s in starts if s not in gone]
            found += [(s, s + length) for s in starts if s < hi and s + length > lo]
        return found

    people = {row["name"]: row for row in csv.DictReader(io.StringIO(people_csv))}
    offset, length = window["offset"], window["minutes"]
    days = [datetime.datetime.strptime(d, "%Y-%m-%d") for d in window["dates"]]
    lo, hi = minutes(days[0], offset) - 2 * 24 * 60, minutes(days[-1], offset) + 3 * 24 * 60
    blocked = [(minutes(datetime.datetime.strptime(f"{d} {a}", "%Y-%m-%d %H:%M"), offset),
                minutes(datetime.datetime.strptime(f"{d} {b}", "%Y-%m-%d %H:%M"), offset))
               for d, a, b in window["room"]]
    hours = []
    for name in names:
        person = people[name]
        text = calendars[person["login"]]
        zone = parse(text)[0][person["timezone"]]
        blocked += busy(text, person["timezone"], lo, hi)
        hours.append((zone, hm(person["work_from"]), hm(person["work_to"])))
    out = []
    for day in days:
        for start in range(hm(window["open"]), hm(window["close"]) - length + 1, 15):
            at = minutes(day, offset) + start
            if any(a < at + length and at < b for a, b in blocked):
                continue
            fits = True
            for zone, work_from, work_to in hours:
                local = epoch + datetime.timedelta(minutes=at + zone)
                since = local.hour * 60 + local.minute
                fits = fits and local.weekday() < 5 and since >= work_from and since + length <= work_to
            if fits:
                out.append((day + datetime.timedelta(minutes=start)).strftime("%Y-%m-%d %H:%M"))
    return out


def program(window: Mapping[str, Any], names: Sequence[str], folder: str, invite: str, room: str) -> str:
    """The oracle's python step: the slots from the calendars and the room's bookings it read off the board, the
    invitation for the earliest one written to ``invite``, and the lines it parses (SLOTS, EARLIEST, LATEST)."""
    source = textwrap.dedent(inspect.getsource(slot_starts))
    main = f"""
import datetime, glob, os
calendars = {{}}
for path in glob.glob({folder + "/*.ics"!r}):
    with open(path) as text:
        calendars[os.path.basename(path)[:-4]] = text.read()
with open({folder + "/people.csv"!r}) as text:
    people_csv = text.read()
window = {dict(window)!r}
names = {list(names)!r}
slots = slot_starts(people_csv, calendars, names, window)
print("SLOTS", len(slots))
if slots:
    print("EARLIEST", slots[0])
    print("LATEST", slots[-1])
    import csv, io
    emails = {{row["name"]: row["email"] for row in csv.DictReader(io.StringIO(people_csv))}}
    start = datetime.datetime.strptime(slots[0], "%Y-%m-%d %H:%M") - datetime.timedelta(minutes=window["offset"])
    end = start + datetime.timedelta(minutes=window["minutes"])
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//oracle//meeting//EN", "BEGIN:VEVENT",
             "UID:" + start.strftime("%Y%m%dT%H%M%SZ") + "-meeting@oracle", "DTSTAMP:20261101T000000Z",
             "DTSTART:" + start.strftime("%Y%m%dT%H%M%SZ"), "DTEND:" + end.strftime("%Y%m%dT%H%M%SZ"),
             "SUMMARY:Team meeting", "LOCATION:" + {room!r}]
    lines += ["ATTENDEE;CN=" + n + ":mailto:" + emails[n] for n in names]
    lines += ["END:VEVENT", "END:VCALENDAR"]
    with open({invite!r}, "w") as out:
        out.write("\\r\\n".join(lines) + "\\r\\n")
"""
    return f"from __future__ import annotations\n{source}\n{main}"


# -- generation -----------------------------------------------------------------------------------------------


def utc_offset(minutes: int) -> str:
    """"+05:30" for 330 (the board's and the instruction's spelling)."""
    return f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _vtimezone(zone: str) -> list[str]:
    offset = utc_offset(ZONES[zone]).replace(":", "")
    return ["BEGIN:VTIMEZONE", f"TZID:{zone}", "BEGIN:STANDARD", "DTSTART:19700101T000000",
            f"TZOFFSETFROM:{offset}", f"TZOFFSETTO:{offset}", f"TZNAME:{offset[:3]}", "END:STANDARD", "END:VTIMEZONE"]


def _fold(line: str) -> list[str]:
    """RFC 5545 folding: at most 75 characters a line, continuations start with a space."""
    parts = [line[:75]]
    rest = line[75:]
    while rest:
        parts.append(" " + rest[:74])
        rest = rest[74:]
    return parts


def _when(name: str, local: dt.datetime, zone: str, own: int) -> str:
    """A DTSTART/DTEND line for a time on the person's wall clock (``own`` offset), written in ``zone`` ("UTC": Z)."""
    if zone == "UTC":
        return f"{name}:{local - dt.timedelta(minutes=own):%Y%m%dT%H%M%S}Z"
    return f"{name};TZID={zone}:{local + dt.timedelta(minutes=ZONES[zone] - own):%Y%m%dT%H%M%S}"


def _series(rng: np.random.Generator, monday: dt.date, work: tuple[int, int], home: str, zone: str) -> list[str]:
    """A weekly recurring event on the person's wall clock, begun weeks before the meeting's week."""
    own = ZONES[home]
    length = int(rng.choice((15, 30, 30, 45, 60, 90)))
    days = sorted(int(d) for d in rng.choice(5, size=int(rng.integers(1, 4)), replace=False))
    if rng.random() < 0.25:
        days, length = [0, 1, 2, 3, 4], 15
    start = work[0] + 15 * int(rng.integers(0, (work[1] - work[0] - length) // 15 + 1))
    if not 0 <= start + ZONES[zone] - own <= 24 * 60 - length:  # written in another zone, it must keep its days
        zone = home
    before = int(rng.integers(2, 10))
    first = dt.datetime.combine(monday - dt.timedelta(weeks=before, days=-days[0]), dt.time()) + dt.timedelta(
        minutes=start)
    interval = 2 if rng.random() < 0.3 else 1
    rule = f"FREQ=WEEKLY;BYDAY={','.join(DAYS[d] for d in days)}" + (f";INTERVAL={interval}" if interval > 1 else "")
    ending = rng.random()
    if ending < 0.3:  # ended days before the week (a series that no longer counts), or ends weeks after it
        days_off = -int(rng.integers(3, 12)) if ending < 0.15 else 7 * int(rng.integers(2, 9))
        rule += f";UNTIL={dt.datetime.combine(monday + dt.timedelta(days=days_off), dt.time()):%Y%m%dT%H%M%S}Z"
    elif ending < 0.5:
        made = len(range(0, before, interval)) * len(days)
        rule += f";COUNT={made + int(rng.integers(0, len(days) + 1))}"
    lines = [_when("DTSTART", first, zone, own), _when("DTEND", first + dt.timedelta(minutes=length), zone, own),
             f"RRULE:{rule}"]
    if rng.random() < 0.4:
        skipped = dt.datetime.combine(monday + dt.timedelta(days=int(rng.choice(days))), dt.time()) + dt.timedelta(
            minutes=start)
        lines.append(_when("EXDATE", skipped, zone, own))
    return lines


def calendar(rng: np.random.Generator, person: Mapping[str, Any], monday: dt.date, organisers: Sequence[str]) -> str:
    """One person's .ics: weekly series, single meetings (in their zone, in UTC, in a colleague's), maybe a day out
    of office, and events that do not count (cancelled, free, other weeks); shuffled, CRLF, folded."""
    own, home = ZONES[person["timezone"]], person["timezone"]
    work = (person["from"], person["to"])
    events: list[list[str]] = []
    for _ in range(int(rng.integers(2, 4))):
        zone = home if rng.random() < 0.75 else str(rng.choice(organisers))
        events.append(_series(rng, monday, work, home, zone))
    for index in range(int(rng.integers(6, 11))):
        length = int(rng.choice((30, 45, 60, 60, 90, 120)))
        start = work[0] - 60 + 15 * int(rng.integers(0, (work[1] - work[0] + 60 - length) // 15 + 1))
        week = monday if index < 6 else monday + dt.timedelta(weeks=int(rng.choice((-1, 1))))
        local = dt.datetime.combine(week + dt.timedelta(days=int(rng.integers(0, 5))), dt.time()) + dt.timedelta(
            minutes=start)
        roll = rng.random()
        zone = home if roll < 0.55 else "UTC" if roll < 0.85 else str(rng.choice(organisers))
        lines = [_when("DTSTART", local, zone, own), _when("DTEND", local + dt.timedelta(minutes=length), zone, own)]
        if index == 4:
            lines.append("STATUS:CANCELLED")
        elif index == 5:
            lines.append("TRANSP:TRANSPARENT")
        events.append(lines)
    if rng.random() < 0.4:
        day = monday + dt.timedelta(days=int(rng.integers(0, 5)))
        events.append([f"DTSTART;VALUE=DATE:{day:%Y%m%d}",
                       f"DTEND;VALUE=DATE:{day + dt.timedelta(days=int(rng.integers(1, 3))):%Y%m%d}",
                       "SUMMARY:Out of office", "TRANSP:OPAQUE"])
    zones = sorted({home} | {line.split("TZID=")[1].split(":")[0] for e in events for line in e if "TZID=" in line})
    out = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//Weave Groupware//Calendar 4.2//EN",
           f"X-WR-CALNAME:{person['name']}", f"X-WR-TIMEZONE:{home}"]
    for zone in zones:
        out += _vtimezone(zone)
    for number, index in enumerate(rng.permutation(len(events))):
        lines = events[int(index)]
        summary = [] if any(x.startswith("SUMMARY") for x in lines) else [
            f"SUMMARY:{TOPICS[int(rng.integers(len(TOPICS)))]} - {DETAILS[int(rng.integers(len(DETAILS)))]}"]
        out += ["BEGIN:VEVENT", f"UID:{person['login']}-{number:03d}@groupware", "DTSTAMP:20261101T080000Z",
                *summary, *lines, "END:VEVENT"]
    out.append("END:VCALENDAR")
    return "\r\n".join(part for line in out for part in _fold(line)) + "\r\n"


def _hm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _book(rng: np.random.Generator, taken: list[list[int]], day: int, start: int, end: int) -> bool:
    """Add a booking [start, end) on ``day`` unless it overlaps one already there."""
    if start >= end or any(d == day and start < b and a < end for d, a, b in taken):
        return False
    taken.append([day, start, end])
    return True


def _random_bookings(rng: np.random.Generator, taken: list[list[int]], hours: tuple[int, int], tries: int) -> None:
    for _ in range(tries):
        length = int(rng.choice((30, 45, 60, 60, 90, 120)))
        start = hours[0] + 15 * int(rng.integers(0, (hours[1] - hours[0] - length) // 15 + 1))
        _book(rng, taken, int(rng.integers(0, 5)), start, start + length)


def _listed(taken: list[list[int]], dates: Sequence[str]) -> list[list[str]]:
    return [[dates[d], _hm(a), _hm(b)] for d, a, b in sorted(taken)]


def answer_of(kind: str, slots: Sequence[str]) -> str | int:
    if kind == "count":
        return len(slots)
    if not slots:
        return ""
    return slots[0] if kind == "earliest" else slots[-1]


def naive_zones(calendars: Mapping[str, str], offset: int) -> dict[str, str]:
    """The calendars as an agent that read every wall-clock time as the room's would take them."""
    same = utc_offset(offset).replace(":", "")
    return {k: re.sub(r"(TZOFFSET(?:FROM|TO)):[+-]\d{4}", rf"\1:{same}", v) for k, v in calendars.items()}


def naive_recurrence(calendars: Mapping[str, str]) -> dict[str, str]:
    """The calendars as an agent that took every series for its first meeting only."""
    return {k: re.sub(r"^RRULE:[^\r\n]*\r\n", "", v, flags=re.M) for k, v in calendars.items()}


def draw_world(rng: np.random.Generator, kind: str) -> dict[str, Any] | None:
    """One candidate team, week and room board, or None when the room, the zones or the series would not each
    change the answer (then the caller draws again)."""
    office = str(rng.choice(OFFICES))
    offset = ZONES[office]
    monday = WEEKS[int(rng.integers(len(WEEKS)))]
    dates = [(monday + dt.timedelta(days=i)).isoformat() for i in range(5)]
    hours = (8 * 60 + 30 * int(rng.integers(0, 3)), 17 * 60 + 30 * int(rng.integers(0, 4)))
    length = int(rng.choice(LENGTHS))
    domain = str(rng.choice(DOMAINS))
    near = [z for z, o in ZONES.items() if abs(o - offset) <= 300]
    firsts, lasts = rng.choice(FIRST, size=7, replace=False), rng.choice(LAST, size=7, replace=False)
    people = []
    for first, last in zip(firsts, lasts, strict=True):
        work_from = 7 * 60 + 30 * int(rng.integers(0, 7))
        people.append({"name": f"{first} {last}", "login": f"{first[0]}{last}".lower(), "email":
                       f"{first}.{last}@{domain}".lower(), "timezone": str(rng.choice(near)), "from": work_from,
                       "to": work_from + 30 * int(rng.integers(15, 20))})
    attendees = [p["name"] for p in people[:int(rng.integers(3, 5))]]
    organisers = sorted({p["timezone"] for p in people} | {office})
    calendars = {p["login"]: calendar(rng, p, monday, organisers) for p in people}
    order = rng.permutation(len(people))
    people_csv = "login,name,email,timezone,work_from,work_to\n" + "".join(
        f"{p['login']},{p['name']},{p['email']},{p['timezone']},{_hm(p['from'])},{_hm(p['to'])}\n"
        for p in (people[int(i)] for i in order))
    window = {"offset": offset, "dates": dates, "open": _hm(hours[0]), "close": _hm(hours[1]), "minutes": length,
              "room": []}
    alone = slot_starts(people_csv, calendars, attendees, window)
    if len(alone) < 3:
        return None
    taken: list[list[int]] = []
    day, at = dates.index(alone[0][:10]), int(alone[0][11:13]) * 60 + int(alone[0][14:])
    start = max(hours[0], at - 15 * int(rng.integers(0, 5)))
    _book(rng, taken, day, start, min(hours[1], max(at + 15, start + 15 * int(rng.integers(3, 9)))))
    day, at = dates.index(alone[-1][:10]), int(alone[-1][11:13]) * 60 + int(alone[-1][14:])
    covered = any(d == day and a < at + length and at < b for d, a, b in taken)
    if not covered and not _book(rng, taken, day, at - 15 * int(rng.integers(0, 3)), min(
            hours[1], at + 15 * int(rng.integers(1, 6)))) and not _book(rng, taken, day, at, at + 15):
        return None
    _random_bookings(rng, taken, hours, int(rng.integers(5, 11)))
    window["room"] = _listed(taken, dates)
    slots = slot_starts(people_csv, calendars, attendees, window)
    answer = answer_of(kind, slots)
    if not slots or answer == answer_of(kind, alone):
        return None
    for naive in (naive_zones(calendars, offset), naive_recurrence(calendars)):
        if answer_of(kind, slot_starts(people_csv, naive, attendees, window)) == answer:
            return None
    rooms = [str(r) for r in rng.choice(ROOMS, size=4, replace=False)]
    index = int(rng.integers(1, 4))
    boards = []
    for number, name in enumerate(rooms):
        other: list[list[int]] = []
        _random_bookings(rng, other, hours, int(rng.integers(6, 14)))
        boards.append({"name": name, "bookings": window["room"] if number == index else _listed(other, dates)})
    return {"office": office, "offset": offset, "dates": dates, "window": window, "minutes": length,
            "attendees": attendees, "emails": sorted(p["email"] for p in people if p["name"] in attendees),
            "people_csv": people_csv, "calendars": calendars, "room": rooms[index], "room_index": index,
            "boards": boards, "slots": slots, "alone": alone, "kind": kind}


def make_world(rng: np.random.Generator, kind: str) -> dict[str, Any]:
    for _attempt in range(200):
        world = draw_world(rng, kind)
        if world is not None:
            return world
    raise TaskError(f"no team calendar world whose {kind} answer needs the room, the zones and the series "
                    "in 200 draws")
