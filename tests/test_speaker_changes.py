"""Weave-Productivity-6 (speaker changes) without a VM: seeds, the messages' rules, the oracle's lookups and
handout run by the real bash, sqlite3 and python3 on the seed's database, the clauses on fake final states
(unit), and the Mail and Badge Desk windows on a real Xvfb, read and typed into (CJK, Cyrillic, RTL) through
the real agent (xvfb)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.productivity import _badge_desk as bd
from weavegym.envs.tasks.productivity import speaker_changes as sc
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(sc.__file__).parent / "fixtures"


def _plan(seed: int) -> dict[str, Any]:
    return bd.plan(np.random.default_rng(seed))


def _truth(seed: int) -> dict[str, Any]:
    p = _plan(seed)
    return {k: p[k] for k in ("changed", "final", "stale", "programme", "messages")}


# ---- seeds and the messages' rules ---------------------------------------------------------------------------

def test_seeds_vary_the_conference_and_its_changes() -> None:
    plans = [_plan(seed) for seed in range(9)]
    assert len({json.dumps(p["final"], sort_keys=True) for p in plans}) == 9
    assert len({tuple(m["talk"] for m in p["messages"]) for p in plans}) == 9
    assert {len(p["messages"]) for p in plans} <= {8, 9}
    assert _plan(4) == _plan(4)


@pytest.mark.parametrize("seed", range(12))
def test_every_message_fits_the_pane_and_every_kind_of_change_comes(seed: int) -> None:
    p = _plan(seed)
    for m in p["messages"]:
        assert len(m["lines"]) <= bd.MAX_LINES and all(len(line) <= bd.LINE_CHARS for line in m["lines"])
        assert all(not pixel_font.unsupported(line) for line in m["lines"])
    assert set(p["changed"].values()) == {bd.SWAP, bd.COSPEAKER, bd.CANCEL, bd.TIME, bd.ROOM}
    assert 1 <= len(p["stale"]) <= 2  # one or two corrections
    assert sum(1 for m in p["messages"] if not m["talk"]) == 1  # one message changes nothing
    for tid in p["stale"]:  # a correction comes after the message it corrects
        about = [i for i, m in enumerate(p["messages"]) if m["talk"] == tid]
        assert len(about) == 2 and p["messages"][about[1]]["lines"][4].startswith(("UPDATE ", "CORRECTION: "))


@pytest.mark.parametrize("seed", range(12))
def test_typed_names_cover_cjk_accents_and_cyrillic_greek_or_rtl(seed: int) -> None:
    p = _plan(seed)
    typed = {f["speaker"] for f in p["final"].values() if f["action"] == bd.BADGE}
    scripts = {x["script"] for x in p["people"] if x["name"] in typed | {f["speaker"] for f in p["stale"].values()}}
    assert bd.CJK in scripts and bd.LATIN in scripts and scripts & {bd.CYRILLIC, bd.RTL, bd.GREEK}
    assert any(ord(c) > 127 for name in typed for c in name)


@pytest.mark.parametrize("seed", range(12))
def test_the_bigger_room_is_the_smallest_free_one_and_capacities_alone_mislead(seed: int) -> None:
    p = _plan(seed)
    tid = next(t for t, k in p["changed"].items() if k == bd.ROOM)
    talk = next(t for t in p["talks"] if t["talk_id"] == tid)
    text = " ".join(next(m for m in p["messages"] if m["talk"] == tid)["lines"][4:])
    need = int(bd.parse_message(["", "", "", "", text])["need"])  # type: ignore[index]
    busy = {t["room"] for t in p["talks"] if t["time"] == talk["time"] and t["talk_id"] != tid}
    fits = sorted((p["capacity"][r], r) for r in p["rooms"] if p["capacity"][r] >= need)
    free = [r for _c, r in fits if r not in busy]
    assert free[0] == p["final"][tid]["room"] != fits[0][1]  # the smallest that seats them is taken
    assert p["capacity"][talk["room"]] < need and len(free) > 1  # a larger free room exists too
    # no other change touches that slot, so the answer does not depend on the order messages are applied in
    others = [t for t in p["talks"] if t["talk_id"] in p["final"] and t["talk_id"] != tid]
    assert all(t["time"] != talk["time"] for t in others)
    assert all(f.get("time") != talk["time"] for k, f in p["final"].items() if k != tid)


@pytest.mark.parametrize("seed", range(12))
def test_a_moved_talk_lands_in_a_free_slot_of_its_room(seed: int) -> None:
    p = _plan(seed)
    for tid, kind in p["changed"].items():
        if kind != bd.TIME:
            continue
        room, time = p["final"][tid]["room"], p["final"][tid]["time"]
        assert not any(t["room"] == room and t["time"] == time for t in p["talks"])
        assert [k for k, f in p["programme"].items() if (f["room"], f["time"]) == (room, time)] == [tid]


# ---- the oracle's shell work on the real database ------------------------------------------------------------

def _home(seed: int, tmp_path: Path) -> Path:
    home = tmp_path / f"home-{seed}"
    (home / "outbox").mkdir(parents=True)
    (home / "registration.db").write_bytes(sc.database(_plan(seed)))
    return home


def _run(home: Path, argv: list[str], stdin: str = "") -> str:
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "LC_ALL": "C"}
    return subprocess.run(argv, input=stdin, check=True, capture_output=True, text=True, encoding="utf-8",
                          env=env).stdout


def _desk(entry: Mapping[str, str], n: int) -> dict[str, Any]:
    """The record the desk prints for an accepted entry (a made-up code)."""
    if "room" not in entry:
        return {"talk": entry["talk"], "action": bd.WITHDRAW, "code": f"W{n:05d}", "n": n}
    return {**entry, "action": bd.BADGE, "code": f"C{n:05d}", "n": n}


def _oracle_offline(seed: int, home: Path, skip: int | None = None) -> list[dict[str, Any]]:
    """The oracle's steps with the messages as the screen shows them, the desk simulated: its records."""
    records: list[dict[str, Any]] = []
    changes: dict[str, dict[str, Any]] = {}
    for index, m in enumerate(_plan(seed)["messages"]):
        change = bd.parse_message(m["lines"])
        assert (change is None) == (not m["talk"]), m["lines"]
        if change is None or index == skip:
            continue
        rows = bd.parse_lookup(_run(home, ["bash", "-c", bd.lookup_command(change)]))
        entry = bd.desk_entry(change, rows)
        assert entry is not None, (m["lines"], rows)
        records.append(_desk(entry, len(records) + 1))
        sc._note(changes, change, entry, rows, records[-1]["code"])
    out = _run(home, [sys.executable, "-"], sc.handout_program(changes))
    assert out.startswith("HANDOUT ")
    return records


def _files(home: Path, records: list[dict[str, Any]]) -> dict[str, bytes]:
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    return {sc.RECORD: lines.encode(), sc.HANDOUT: (home / "outbox" / "programme.txt").read_bytes()}


def _outcomes(files: Mapping[str, bytes], truth: Mapping[str, Any]) -> dict[str, Outcome]:
    probe = FilesProbe(files)
    return {c.name: c.check(probe, truth).outcome for c in sc.TASK.clauses}  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [0, 3, 6, 7])
def test_the_oracles_lookups_and_handout_satisfy_every_clause(seed: int, tmp_path: Path) -> None:
    home = _home(seed, tmp_path)
    records = _oracle_offline(seed, home)
    assert _outcomes(_files(home, records), _truth(seed)) == {c.name: Outcome.SATISFIED for c in sc.TASK.clauses}
    handout = (home / "outbox" / "programme.txt").read_text(encoding="utf-8")
    assert any(ord(c) > 0x2E80 for c in handout)  # CJK as registered, not escaped


def test_a_missed_message_or_a_correction_ignored_fails_the_desk_and_the_handout(tmp_path: Path) -> None:
    seed = 0
    truth = _truth(seed)
    correction = next(i for i, m in enumerate(truth["messages"]) if m["talk"] in truth["stale"]
                      and i == max(j for j, n in enumerate(truth["messages"]) if n["talk"] == m["talk"]))
    home = _home(seed, tmp_path)
    outcomes = _outcomes(_files(home, _oracle_offline(seed, home, skip=correction)), truth)
    assert outcomes["desk_entries"] is Outcome.PARTIAL and outcomes["handout_programme"] is Outcome.PARTIAL


def test_forged_codes_a_lost_record_and_a_stray_entry_fail(tmp_path: Path) -> None:
    seed = 3
    truth = _truth(seed)
    home = _home(seed, tmp_path)
    records = _oracle_offline(seed, home)
    files = _files(home, records)
    forged = dict(files, **{sc.RECORD: files[sc.RECORD].replace(b'"C0000', b'"X0000')})
    assert _outcomes(forged, truth)["handout_codes"] is Outcome.FAILED
    no_desk = {sc.HANDOUT: files[sc.HANDOUT]}
    outcomes = _outcomes(no_desk, truth)
    assert outcomes["desk_entries"] is outcomes["handout_codes"] is Outcome.FAILED
    untouched = next(tid for tid in truth["programme"] if tid not in truth["final"])
    row = truth["programme"][untouched]
    stray = {"talk": untouched, "room": row["room"], "time": row["time"], "speaker": "x", "action": "badge",
             "code": "ZZZZZZ"}
    extra = dict(files, **{sc.RECORD: files[sc.RECORD] + json.dumps(stray).encode() + b"\n"})
    outcomes = _outcomes(extra, truth)
    assert outcomes["desk_only_changes"] is Outcome.FAILED and outcomes["handout_codes"] is Outcome.FAILED


def test_a_name_typed_without_its_accents_or_in_another_encoding_fails(tmp_path: Path) -> None:
    seed = 6
    truth = _truth(seed)
    home = _home(seed, tmp_path)
    records = _oracle_offline(seed, home)
    files = _files(home, records)
    latin = next(r for r in records if r["action"] == bd.BADGE and any(0x7f < ord(c) < 0x250 for c in r["speaker"]))
    plain = latin["speaker"].encode("ascii", "ignore").decode()
    bad = [dict(r, speaker=plain) if r is latin else r for r in records]
    assert _outcomes(_files(home, bad), truth)["desk_entries"] is Outcome.PARTIAL
    utf16 = dict(files, **{sc.HANDOUT: files[sc.HANDOUT].decode().encode("utf-16")})
    assert _outcomes(utf16, truth)["handout_programme"] is Outcome.FAILED
    handout = files[sc.HANDOUT].decode()
    ascii_names = dict(files, **{sc.HANDOUT: handout.replace(latin["speaker"], plain).encode()})
    assert _outcomes(ascii_names, truth)["handout_programme"] is Outcome.PARTIAL


def test_the_oracle_is_denied_what_only_the_mail_shows() -> None:
    truth = {**_truth(0), "count": 9, "mail_at": [0, 0], "desk_at": [650, 0], "targets": {}}
    assert set(sc.TASK.oracle_truth(truth)) == {"count", "mail_at", "desk_at", "targets"}


# ---- the real windows on a real X server, through the real guest agent ----------------------------------------

def _start(tmp_path: Path, xvfb: XvfbDisplay, app: str, content: Mapping[str, Any]) -> subprocess.Popen[bytes]:
    shutil.copy(FIXTURES / app, tmp_path / app)
    shutil.copy(Path(pixel_font.__file__), tmp_path / "pixel_font.py")
    proc = subprocess.Popen([sys.executable, str(tmp_path / app)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env={**os.environ, "DISPLAY": xvfb.display, "LANG": "C.UTF-8"})
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(content, ensure_ascii=False).encode())
    proc.stdin.close()
    return proc


def _origin(client: GuestClient, title: str, heading: str) -> tuple[int, int]:
    window = wait_for(lambda: next((w for w in client.list_windows()[0] if w.title == title), None), 20,
                      what=f"{title} mapped")
    return wait_for(lambda: bd.origin(client.screenshot().image, window.geometry, heading), 20,
                    what=f"{heading} drawn")


@pytest.mark.xvfb
def test_the_mail_shows_each_message_only_after_its_click(xvfb: XvfbDisplay, client: GuestClient,
                                                         tmp_path: Path) -> None:
    p = _plan(3)
    inbox = {"messages": [{k: m[k] for k in ("received", "sender", "lines")} for m in p["messages"]],
             "layout": bd.mail_layout()}
    proc = _start(tmp_path, xvfb, "speaker_mail.py", inbox)
    try:
        at = _origin(client, bd.MAIL_TITLE, bd.MAIL_HEADING)
        assert bd.read_message(client.screenshot().image, at) == []
        for index in (2, 0, len(p["messages"]) - 1):
            box = [bd.LIST_X, bd.LIST_Y + index * bd.LIST_STEP, bd.LIST_W, bd.LIST_H]
            client.click(*bd.centre(at, box))
            wait_for(lambda i=index: bd.read_message(client.screenshot().image, at) == p["messages"][i]["lines"], 20,
                     what=f"message {index + 1} read back exactly")
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.xvfb
def test_the_desk_records_typed_unicode_names_exactly_and_shows_the_code(xvfb: XvfbDisplay, client: GuestClient,
                                                                         tmp_path: Path) -> None:
    p = _plan(0)
    conf = {"talks": [t["talk_id"] for t in p["talks"]], "rooms": p["rooms"], "layout": bd.desk_layout()}
    proc = _start(tmp_path, xvfb, "badge_desk.py", conf)
    talk, withdrawn = p["talks"][0], p["talks"][1]
    try:
        assert proc.stdout is not None
        at = _origin(client, bd.DESK_TITLE, bd.DESK_HEADING)
        field = bd.centre(at, bd.desk_layout()["fields"][0])
        client.click(*field)
        client.type_text(f"{talk['talk_id']}\tNO SUCH ROOM\t10:00\tx\n")
        wait_for(lambda: bd.read_status(client.screenshot().image, at) == "REFUSED: UNKNOWN ROOM", 20,
                 what="the refusal on the status line")
        for n, name in enumerate(("王小明 & 김민준", "Ольга Смирнова", "שרה כהן", "أحمد منصور", "Zoë Lefèvre"), 1):
            client.click(*field)
            client.key("ctrl+slash")  # Tk's select all: the refused entry is still there the first time
            client.type_text(f"{talk['talk_id'].lower()}\t{talk['room'].lower()}\t9:05\t{name}\n")
            record = json.loads(proc.stdout.readline())
            assert record["speaker"] == name and record["talk"] == talk["talk_id"] and record["time"] == "09:05"
            assert record["room"] == talk["room"] and record["action"] == "badge" and record["n"] == n
            wait_for(lambda n=n, r=record: bd.read_status(client.screenshot().image, at) ==
                     f"#{n} BADGE {talk['talk_id']} CODE {r['code']}", 20, what="the code on the status line")
        client.click(*field)
        client.type_text(withdrawn["talk_id"])
        client.click(*bd.centre(at, bd.WITHDRAW_BOX))
        record = json.loads(proc.stdout.readline())
        assert {k: record[k] for k in ("talk", "action", "n")} == {"talk": withdrawn["talk_id"], "action": "withdraw",
                                                                 "n": 6}
        wait_for(lambda: bd.read_status(client.screenshot().image, at) ==
                 f"#6 WITHDRAWN {withdrawn['talk_id']} CODE {record['code']}", 20, what="the withdrawal's code")
    finally:
        proc.kill()
        proc.wait()
