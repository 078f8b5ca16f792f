"""Weave-Productivity-5 without a VM: the slots by hand (zones, series, exceptions, absences), the seeds' worlds,
the board read back off a rendered screen and off the real board on Xvfb, the oracle's own program on the real
files, and the clauses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.productivity import _calendars as cal
from weavegym.envs.tasks.productivity import meeting_slot as ms
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURE = Path(ms.__file__).parent / "fixtures" / "booking_board.py"
WINDOW = [150, 80, ms.WIDTH, ms.HEIGHT]


def _ics(home: str, *events: list[str]) -> str:
    zones = sorted({home} | {line.split("TZID=")[1].split(":")[0] for e in events for line in e if "TZID=" in line})
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", f"X-WR-TIMEZONE:{home}"]
    for zone in zones:
        lines += cal._vtimezone(zone)
    for number, event in enumerate(events):
        lines += ["BEGIN:VEVENT", f"UID:{number}", "SUMMARY:a long summary that the writer folds over more than one "
                  "line because it is longer than seventy-five characters", *event, "END:VEVENT"]
    lines.append("END:VCALENDAR")
    return "\r\n".join(part for line in lines for part in cal._fold(line)) + "\r\n"


PEOPLE = ("login,name,email,timezone,work_from,work_to\naamir,Ana Amir,ana@x.example,Asia/Dubai,09:00,17:00\n"
          "bbell,Bo Bell,bo@x.example,Africa/Lagos,08:00,16:00\ncnoise,Cy Noise,cy@x.example,Asia/Tokyo,09:00,17:00\n")
# Room time is UTC+3 (Nairobi): Ana (UTC+4) works 08:00-16:00 and Bo (UTC+1) 10:00-18:00 of room time, so with
# the room open 09:00-12:00 an hour can start at 10:00-11:00 on each day.
CALENDARS = {
    "aamir": _ics(
        "Asia/Dubai",
        # Mondays and Tuesdays 11:00-11:30 Dubai = 10:00-10:30 room time, but not on Tuesday 8 December.
        ["DTSTART;TZID=Asia/Dubai:20261102T110000", "DTEND;TZID=Asia/Dubai:20261102T113000",
         "RRULE:FREQ=WEEKLY;BYDAY=MO,TU", "EXDATE;TZID=Asia/Dubai:20261208T110000"],
        # Two Tuesdays only (24 Nov, 1 Dec): over before the week.
        ["DTSTART;TZID=Asia/Dubai:20261124T120000", "DTEND;TZID=Asia/Dubai:20261124T123000",
         "RRULE:FREQ=WEEKLY;BYDAY=TU;COUNT=2"],
        # Every other Monday from 30 Nov at 12:00 Dubai: the 7th is skipped.
        ["DTSTART;TZID=Asia/Dubai:20261130T120000", "DTEND;TZID=Asia/Dubai:20261130T130000",
         "RRULE:FREQ=WEEKLY;BYDAY=MO;INTERVAL=2"],
        # Out of office on Wednesday 9 December, a Dubai day (room time: Tuesday 23:00 to Wednesday 23:00).
        ["DTSTART;VALUE=DATE:20261209", "DTEND;VALUE=DATE:20261210"]),
    "bbell": _ics(
        "Africa/Lagos",
        ["DTSTART:20261207T080000Z", "DTEND:20261207T081500Z"],  # 11:00-11:15 room time on Monday
        ["DTSTART;TZID=Africa/Lagos:20261208T080000", "DTEND;TZID=Africa/Lagos:20261208T100000", "STATUS:CANCELLED"],
        ["DTSTART;TZID=Asia/Tokyo:20261208T150000", "DTEND;TZID=Asia/Tokyo:20261208T170000", "TRANSP:TRANSPARENT"]),
    "cnoise": _ics("Asia/Tokyo", ["DTSTART:20261208T070000Z", "DTEND:20261208T100000Z"]),  # not invited
}
WINDOW_BY_HAND = {"offset": 180, "dates": ["2026-12-07", "2026-12-08", "2026-12-09"], "open": "09:00",
                  "close": "12:00", "minutes": 60, "room": [["2026-12-08", "10:00", "10:30"]]}


def test_the_slots_by_hand() -> None:
    names = ["Ana Amir", "Bo Bell"]
    slots = cal.slot_starts(PEOPLE, CALENDARS, names, WINDOW_BY_HAND)
    # Monday: Ana's series takes 10:00-10:30, Bo's UTC call 11:00-11:15. Tuesday: the series is excepted, the
    # COUNT series is over, the cancelled and the free events do not count; the room has 10:00-10:30.
    # Wednesday: Ana is out of office all her day.
    assert slots == ["2026-12-08 10:30", "2026-12-08 10:45", "2026-12-08 11:00"]
    free_room = cal.slot_starts(PEOPLE, CALENDARS, names, {**WINDOW_BY_HAND, "room": []})
    assert free_room[0] == "2026-12-08 10:00"
    # Each rule matters: read as room time, Ana's 09:00-17:00 would start at 09:00 and Bo's would end at 16:00.
    naive = cal.slot_starts(PEOPLE, cal.naive_zones(CALENDARS, 180), names, WINDOW_BY_HAND)
    assert naive != slots
    without_series = cal.slot_starts(PEOPLE, cal.naive_recurrence(CALENDARS), names, WINDOW_BY_HAND)
    assert "2026-12-07 10:00" in without_series and "2026-12-07 10:00" not in slots
    # Cy's call on Tuesday would take everything: only the named people count.
    assert cal.slot_starts(PEOPLE, CALENDARS, [*names, "Cy Noise"], WINDOW_BY_HAND) == []


def _world(seed: int) -> dict[str, Any]:
    return cal.make_world(np.random.default_rng(seed), cal.kind_of(seed))


@pytest.mark.parametrize("seed", range(6))
def test_every_seed_needs_the_room_the_zones_and_the_series(seed: int) -> None:
    world = _world(seed)
    kind, window = world["kind"], world["window"]
    answer = cal.answer_of(kind, world["slots"])
    assert world["slots"] and answer != cal.answer_of(kind, world["alone"])
    assert world["alone"][0] not in world["slots"] and world["alone"][-1] not in world["slots"]
    for naive in (cal.naive_zones(world["calendars"], world["offset"]), cal.naive_recurrence(world["calendars"])):
        assert cal.answer_of(kind, cal.slot_starts(world["people_csv"], naive, world["attendees"], window)) != answer
    assert world["boards"][world["room_index"]]["bookings"] == window["room"] and world["room_index"] != 0
    assert len(world["calendars"]) == 7 and 3 <= len(world["attendees"]) <= 4
    texts = "".join(world["calendars"].values())
    for feature in ("RRULE:FREQ=WEEKLY", "EXDATE", "STATUS:CANCELLED", "TRANSP:TRANSPARENT", "Z\r\n", "\r\n "):
        assert feature in texts, feature
    assert len({row.split(",")[3] for row in world["people_csv"].splitlines()[1:]}) >= 2


def test_seeds_vary_the_team_the_room_the_week_and_the_question() -> None:
    worlds = [_world(seed) for seed in range(9)]
    assert len({w["room"] for w in worlds}) >= 5 and len({w["office"] for w in worlds}) >= 3
    assert len({w["dates"][0] for w in worlds}) >= 3 and len({w["minutes"] for w in worlds}) >= 3
    assert len({tuple(w["attendees"]) for w in worlds}) == 9
    assert {cal.kind_of(s) for s in (0, 3, 6)} == set(cal.KINDS)


def _screen(board: Mapping[str, Any], dates: list[str], status: str) -> np.ndarray:
    """The board as the fixture draws it: white canvases, pixel_font's lit cells, on a grey window."""
    image = np.full((720, 1280, 3), 214, dtype=np.uint8)
    x, y = WINDOW[0] + ms.CANVAS[0], WINDOW[1] + ms.CANVAS[1]
    image[y:y + ms.CANVAS[3], x:x + ms.CANVAS[2]] = 255
    sx, sy = WINDOW[0] + ms.STATUS[0], WINDOW[1] + ms.STATUS[1]
    image[sy:sy + ms.STATUS[3], sx:sx + ms.STATUS[2]] = 255
    texts = [(f"ROOM {board['name']}", x + ms.TITLE_AT[0], y + ms.TITLE_AT[1], ms.TITLE_SCALE),
             (status, sx + ms.STATUS_AT[0], sy + ms.STATUS_AT[1], ms.SCALE)]
    for index, date in enumerate(dates):
        column = x + ms.layout()["columns"][index]
        mine = sorted((a, b) for d, a, b in board["bookings"] if d == date)
        texts += [(f"{a}-{b}", column, y + ms.FIRST_LINE_Y + row * ms.LINE_H, ms.SCALE)
                  for row, (a, b) in enumerate(mine)]
    for text, tx, ty, scale in texts:
        for x0, y0, x1, y1 in pixel_font.layout_text(text, tx, ty, scale):
            image[y0:y1, x0:x1] = pixel_font.INK
    return image


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_bookings_read_back_exactly_from_the_screen(seed: int) -> None:
    world = _world(seed)
    targets = ms.screen_targets(WINDOW)
    for board in world["boards"]:
        image = _screen(board, world["dates"], f"SHOWING ROOM {board['name']}")
        assert ms.shown_room(image, targets) == board["name"]
        assert ms.read_bookings(image, targets, world["dates"]) == sorted(board["bookings"])
        assert ms._drawn(image, targets, board["name"])
        per_day = max(sum(d == date for d, _a, _b in board["bookings"]) for date in world["dates"])
        assert per_day <= ms.LINES


def _truth(world: Mapping[str, Any]) -> dict[str, Any]:
    slots = world["slots"]
    return {"kind": world["kind"], "offset": world["offset"], "room": world["room"], "minutes": world["minutes"],
            "emails": world["emails"], "earliest": slots[0], "answer": cal.answer_of(world["kind"], slots)}


@pytest.mark.parametrize("seed", [0, 3, 6])
def test_the_oracles_program_on_the_real_files_gives_the_truth(tmp_path: Path, seed: int) -> None:
    world = _world(seed)
    folder = tmp_path / "calendars"
    folder.mkdir()
    for login, text in world["calendars"].items():
        (folder / f"{login}.ics").write_bytes(text.encode())
    (folder / "people.csv").write_text(world["people_csv"])
    invite, truth = tmp_path / "invite.ics", _truth(world)

    def run(room: list[list[str]]) -> tuple[str, str]:
        code = cal.program({**world["window"], "room": room}, world["attendees"], str(folder), str(invite),
                           world["room"])
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        return ms.spoken(world["kind"], ms.parse_output(done.stdout.replace("\n", "\r\n"))), invite.read_text()

    answer, written = run(world["window"]["room"])
    assert ms.check_answer(FilesProbe.answered(answer), truth).outcome == "satisfied"
    assert ms.check_invite(FilesProbe.answered("", {ms.INVITE: written}), truth).outcome == "satisfied"
    # Without the room's bookings (a shell-only agent): the answer and the invitation are wrong.
    alone, written = run([])
    assert ms.check_answer(FilesProbe.answered(alone), truth).outcome == "failed"
    assert ms.check_invite(FilesProbe.answered("", {ms.INVITE: written}), truth).outcome == "failed"


@pytest.mark.parametrize(("kind", "expected", "right", "wrong"), [
    ("earliest", "2026-12-08 14:30", ["2026-12-08 14:30", "<answer>2026-12-08T14:30</answer>",
                                      "2026-12-08 14:30-15:15 (UTC+03:00)", "2026-12-08T11:30Z",
                                      "2026-12-08 14:30:00+03:00", "2026-12-08 11:30 UTC"],
     ["2026-12-08 14:45", "2026-12-08 14:30 UTC", "14:30 on Tuesday", "2026-12-08 14:30 or 2026-12-09 09:00", ""]),
    ("count", 23, ["23", "<answer>23</answer>", "23 start times"], ["22", "twenty-three", ""]),
])
def test_answers_are_normalised_and_wrong_ones_fail(kind: str, expected: Any, right: list[str],
                                                    wrong: list[str]) -> None:
    truth = {"kind": kind, "answer": expected, "offset": 180}
    assert all(ms.check_answer(FilesProbe.answered(a), truth).outcome == "satisfied" for a in right)
    assert all(ms.check_answer(FilesProbe.answered(a), truth).outcome == "failed" for a in wrong)


def test_the_answer_that_ignores_the_room_fails_on_every_kind() -> None:
    for seed in (0, 1, 2):
        world = _world(seed)
        alone = cal.answer_of(world["kind"], world["alone"])
        assert ms.check_answer(FilesProbe.answered(str(alone)), _truth(world)).outcome == "failed"


INVITE = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nDTSTART:20261208T113000Z\r\n{end}\r\n"
          "LOCATION:Room CEDAR\r\nATTENDEE;CN=Ana:mailto:Ana@x.example\r\nATTENDEE:mailto:bo@x.example\r\n"
          "END:VEVENT\r\nEND:VCALENDAR\r\n")


def test_the_invitation_needs_the_start_the_length_the_room_and_the_attendees() -> None:
    truth = {"earliest": "2026-12-08 14:30", "offset": 180, "minutes": 45, "room": "CEDAR",
             "emails": ["ana@x.example", "bo@x.example"]}

    def outcome(text: str | None) -> str:
        return ms.check_invite(FilesProbe.answered("", {} if text is None else {ms.INVITE: text}), truth).outcome

    assert outcome(INVITE.format(end="DTEND:20261208T121500Z")) == "satisfied"
    assert outcome(INVITE.format(end="DURATION:PT45M")) == "satisfied"
    zoned = INVITE.replace("DTSTART:20261208T113000Z", "DTSTART;TZID=Africa/Nairobi:20261208T143000")
    assert outcome(zoned.format(end="DURATION:PT45M")) == "satisfied"
    assert outcome(INVITE.format(end="DTEND:20261208T123000Z")) == "partial"
    assert outcome(INVITE.format(end="DURATION:PT45M").replace("ATTENDEE:mailto:bo@x.example\r\n", "")) == "partial"
    assert outcome(INVITE.format(end="DURATION:PT45M").replace("T113000Z", "T143000")) == "failed"  # floating
    assert outcome(INVITE.format(end="DURATION:PT45M").replace("T113000Z", "T114500Z")) == "failed"
    two = INVITE.format(end="DURATION:PT45M").replace("END:VCALENDAR", "BEGIN:VEVENT\r\nEND:VEVENT\r\nEND:VCALENDAR")
    assert outcome(two) == "failed" and outcome(None) == "failed"


def test_the_hold_must_be_the_earliest_slot_in_the_room_for_the_length() -> None:
    truth = {"room": "CEDAR", "earliest": "2026-12-08 14:30", "minutes": 45}
    good = {"room": "CEDAR", "date": "2026-12-08", "start": "14:30", "minutes": 45}

    def outcome(*records: Mapping[str, Any]) -> str:
        text = "".join(json.dumps(r) + "\n" for r in records)
        return ms.check_hold(FilesProbe.answered("", {ms.RECORD: text} if records else {}), truth).outcome

    assert outcome(good) == "satisfied"
    assert outcome({**good, "start": "14:45"}, good) == "satisfied"  # the last hold counts
    assert outcome(good, {**good, "start": "14:45"}) == "failed"
    assert outcome({**good, "room": "LOTUS"}) == "failed" and outcome({**good, "minutes": 60}) == "failed"
    assert outcome() == "failed"  # the forger's case: it cannot write the board's root-only record


def test_the_oracle_is_denied_everything_only_one_channel_shows() -> None:
    truth = {"kind": "count", "board": WINDOW, "targets": {}, "room": "CEDAR", "room_index": 2, "dates": [],
             "offset": 180, "open": "09:00", "close": "17:00", "minutes": 45, "attendees": [], "bookings": [],
             "emails": [], "slots": [], "earliest": "", "answer": 1}
    assert set(ms.TASK.oracle_truth(truth)) == {"kind", "board", "targets", "room", "room_index", "dates", "offset",
                                                "open", "close", "minutes", "attendees"}


# -- the real board on a real X server, screenshotted and clicked through the real guest agent ------------------


@pytest.mark.xvfb
def test_the_real_board_shows_the_room_after_its_tab_refuses_bad_holds_and_records_a_good_one(
        xvfb: XvfbDisplay, client: GuestClient, tmp_path: Path) -> None:
    world = _world(4)
    for name, data in (("booking_board.py", FIXTURE.read_bytes()),
                       ("pixel_font.py", Path(pixel_font.__file__).read_bytes())):
        (tmp_path / name).write_bytes(data)
    board = {"rooms": world["boards"], "dates": world["dates"], "zone": f"UTC{cal.utc_offset(world['offset'])}",
             "open": world["window"]["open"], "close": world["window"]["close"], "layout": ms.layout()}
    proc = subprocess.Popen([sys.executable, str(tmp_path / "booking_board.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "DISPLAY": xvfb.display})
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(board))
    proc.stdin.close()
    try:
        window = wait_for(lambda: next((w.geometry for w in client.list_windows()[0] if w.title == ms.TITLE), None),
                          20, what="the board mapped")
        targets = ms.screen_targets(window)
        first, room = world["boards"][0], world["boards"][world["room_index"]]
        wait_for(lambda: ms._drawn(client.screenshot().image, targets, first["name"]), 20, what="the first room")
        assert ms.read_bookings(client.screenshot().image, targets, world["dates"]) == sorted(first["bookings"])
        client.click(*targets["tabs"][world["room_index"]])
        wait_for(lambda: ms.shown_room(client.screenshot().image, targets) == room["name"], 20, what="the room")
        assert ms.read_bookings(client.screenshot().image, targets, world["dates"]) == world["window"]["room"]

        def hold(date: str, start: str, length: str) -> str:
            for key, text in (("date", date), ("start", start), ("length", length)):
                client.click(*targets[key])
                client.key("ctrl+slash")  # what the oracle does: select the field whole, so typing replaces it
                if not text:
                    client.key("BackSpace")
                if text:
                    client.type_text(text)
            before = ms.read_status(client.screenshot().image, targets)
            client.click(*targets["hold"])
            return wait_for(lambda: (s := ms.read_status(client.screenshot().image, targets)) != before and s, 20,
                            what="the board's verdict")

        booked = world["window"]["room"][0]
        assert hold("", "", "").startswith("REFUSED: DATE")
        assert hold(world["dates"][0], "9.30", "45").startswith("REFUSED: START")
        assert hold(world["dates"][0], "10:00", "forty").startswith("REFUSED: LENGTH")
        assert hold(world["dates"][0], "10:10", "45").startswith("REFUSED: START")
        assert hold("2031-01-01", "10:00", "45").startswith("REFUSED: DATE")
        assert hold(world["dates"][0], "06:00", "45").startswith("REFUSED: OUTSIDE")
        assert hold(booked[0], booked[1], "15") == f"REFUSED: CONFLICTS WITH {booked[1]}-{booked[2]}"
        earliest = world["slots"][0]
        length = str(world["minutes"])
        assert hold(earliest[:10], earliest[11:], length).startswith(f"HELD {room['name']} {earliest}")
        record = json.loads(proc.stdout.readline())
        assert record == {"room": room["name"], "date": earliest[:10], "start": earliest[11:],
                          "minutes": world["minutes"]}
        assert proc.poll() is None  # the board stays open: another hold would replace this one
    finally:
        proc.kill()
        proc.wait()
