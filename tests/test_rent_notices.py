"""Weave-Docs-5 (rent notices): seeds, the rent maths and exclusions, the requester's script, the oracle's
mail merge run by the real bash and sqlite3, the clauses on fake final states (unit), and the Rent Board on a
real Xvfb read, refused and approved through the real agent (xvfb)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.envs import sim_user_program as program
from weavegym.envs.simulated_user import Turn
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.docs import rent_notices as task_module
from weavegym.envs.tasks.docs.rent_notices import (
    FORM_AMOUNT,
    MARKER,
    NOTICE_DIR,
    QUESTIONS,
    RECORD,
    SCHEMA,
    TASK,
    final_request,
    judge_notices,
    judge_sign_off,
    notices_command,
    parse_amount,
    parse_total,
)
from weavegym.envs.tasks.docs.rent_notices_plan import (
    CAP_X,
    FIRST_ROW_Y,
    HEADING,
    HEADING_X,
    HEADING_Y,
    NAME_X,
    NOTICES,
    PCT_X,
    ROW_H,
    SCALE,
    SIGN,
    board_layout,
    board_origin,
    eligible,
    expected_notices,
    new_rent,
    plan,
    read_decision,
    user_script,
)
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.xvfb import XvfbDisplay

TRANSCRIPT = "/var/lib/weavegym-sim/transcript.jsonl"


def _plan(seed: int) -> dict:
    return plan(np.random.default_rng(seed), seed)


def _seed_with(change: str) -> int:
    return next(s for s in range(50) if _plan(s)["change"] == change)


def _truth(seed: int) -> dict:
    """The truth setup returns, without the guest's parts (window, clicks)."""
    p = _plan(seed)
    script = user_script(p)
    assert script.change_of_mind is not None
    replies = {t.name: t.reply for t in script.topics}
    replies[p["change"]] = script.change_of_mind.new_reply
    final = expected_notices(p, p["final_building"], p["final_date"])
    return {**{k: v for k, v in p.items() if k != "tenants"}, "expected": final,
            "stale": expected_notices(p, p["first_building"], p["first_date"]),
            "files": [f"{u}.txt" for u in sorted(final)], "replies": replies}


def _chat(seed: int, messages: list[str], start: float = 1000.0) -> list[Turn]:
    """The transcript the requester's script gives for these agent messages, one second per record."""
    clock = iter(start + i for i in range(1000))
    records: list[dict] = []
    chat = program.Conversation(user_script(_plan(seed)).to_dict(), records.append, clock=lambda: next(clock))
    chat.open()
    for message in messages:
        chat.send(message)
    return [Turn.from_record(r) for r in records]


def _merge(seed: int, tmp_path: Path, decision: tuple[int, int] | None = None, **change: str
           ) -> tuple[dict[str, bytes], str]:
    """({name: bytes} of ~/notices, terminal output) after the oracle's shell line on the seed's roll, run by
    the real bash and sqlite3 in a home of its own."""
    p, truth = _plan(seed), _truth(seed)
    home = tmp_path / f"home-{seed}-{len(list(tmp_path.iterdir()))}"
    (home / "notices").mkdir(parents=True)
    (home / "rentroll.db").write_bytes(database_bytes(SCHEMA, {"tenants": p["tenants"]}))
    building, effective, style = final_request(truth["replies"], truth["buildings"])
    request = {"building": building, "effective": effective, "style": style, **change}
    mark = p["sign"] if request["style"] == SIGN else p["code"] + " "
    command = notices_command(request["building"], request["effective"], mark,
                              p["decisions"][request["building"]] if decision is None else decision)
    out = subprocess.run(["bash", "-c", command], check=True, capture_output=True, text=True,
                         env={"HOME": str(home), "PATH": os.environ["PATH"], "LC_ALL": "C"}).stdout
    return {f.name: f.read_bytes() for f in (home / "notices").iterdir()}, out


# ---- seeds and the rent maths ------------------------------------------------------------------------------

def test_every_seed_varies_the_roll_the_decision_and_the_request() -> None:
    plans = [_plan(seed) for seed in range(9)]
    assert len({json.dumps(p["decisions"]) for p in plans}) == 9
    assert len({(p["final_building"], p["final_date"]) for p in plans}) >= 7
    assert [p["change"] for p in plans[::3]] == ["date", "building", "date"]  # the validated seeds 0, 3, 6
    assert {p["style"] for p in plans} == {"sign", "code"} and {p["code"] for p in plans} == {"EUR", "GBP"}
    assert _plan(3) == _plan(3)


def test_new_rent_is_capped_and_rounded_down_to_a_whole_unit() -> None:
    assert new_rent(124000, 35, 60) == 128300  # 1240 + 43.40 = 1283.40, down to 1283
    assert new_rent(90250, 41, 69) == 93900  # 902.50 + 37.0025 = 939.5025: down, not to 940
    assert new_rent(200000, 50, 60) == 206000  # a rise of 100 capped at 60
    assert new_rent(180050, 50, 60) == 186000  # 1800.50 + 60 = 1860.50, down to 1860


def test_a_lease_that_ends_before_the_effective_date_gets_no_notice() -> None:
    roll = [("1A", "X", "a", 1, "2026-03-31"), ("1B", "X", "b", 1, "2026-04-01"), ("2A", "X", "c", 1, "2027-01-31"),
            ("1C", "Y", "d", 1, "2027-01-31")]
    assert [t[0] for t in eligible(roll, "X", "2026-04-01")] == ["1B", "2A"]
    assert [t[0] for t in eligible(roll, "X", "2026-05-01")] == ["2A"]


@pytest.mark.parametrize("seed", range(16))
def test_each_seed_has_six_notices_and_every_shortcut_gives_another_set(seed: int) -> None:
    p, truth = _plan(seed), _truth(seed)
    final = truth["expected"]
    assert len(final) == NOTICES and sum(any(ord(c) > 127 for c in n["tenant"]) for n in final.values()) >= 3
    assert final != truth["stale"]  # the pre-change value gives other notices
    if p["change"] == "date":
        assert set(final) < set(truth["stale"]) and p["first_date"] < p["final_date"]
    else:
        assert p["first_building"] != p["final_building"]
    pct, cap = p["decisions"][p["final_building"]]
    rents = [(n["rent"], n["new"]) for n in final.values()]
    capped = sum(rent * pct / 1000 > cap * 100 for rent, _new in rents)
    assert 2 <= capped <= NOTICES - 2
    nearest = [math.floor((rent + min(rent * pct / 1000, cap * 100)) / 100 + 0.5) * 100 for rent, _new in rents]
    assert nearest != [new for _rent, new in rents]  # rounding to the nearest unit gives another rent
    others = [d for b, d in p["decisions"].items() if b != p["final_building"]]
    assert all(d[0] != pct for d in others)
    for building in p["buildings"]:
        assert pixel_font.unsupported(building.upper()) == ""


# ---- the requester's script --------------------------------------------------------------------------------

@pytest.mark.parametrize("change", ["date", "building"])
def test_the_oracles_questions_get_each_hidden_answer_and_the_change_of_mind_once(change: str) -> None:
    seed = _seed_with(change)
    turns = _chat(seed, list(QUESTIONS))
    assert [(t.event, t.topics) for t in turns].count(("change_of_mind", (change,))) == 1
    assert {topic for t in turns if t.event == "question" for topic in t.topics} == {"building", "date", "format"}
    said = {t.topics[0]: t.text for t in turns if t.event == "answer"}  # the last answer per topic wins
    truth = _truth(seed)
    assert said == {k: truth["replies"][k] for k in ("building", "date", "format")}
    assert final_request(said, truth["buildings"]) == (truth["final_building"], truth["final_date"], truth["style"])


def test_the_opening_gives_nothing_away_and_the_change_needs_a_message_after_the_answer() -> None:
    script = user_script(_plan(1))
    assert {t.name for t in script.topics if t.hidden} == {"building", "date", "format"}
    turns = _chat(1, ["OK, on it!"])
    assert turns[0].text == "Hi! Could you get the rent notices out for me?"
    assert [t.event for t in turns[1:]] == ["question", "fallback"]
    seed = _seed_with("building")
    assert "change_of_mind" not in [t.event for t in _chat(seed, [QUESTIONS[0]])]
    assert "change_of_mind" in [t.event for t in _chat(seed, [QUESTIONS[0], "Thanks!"])]
    seed = _seed_with("date")
    assert "change_of_mind" not in [t.event for t in _chat(seed, [QUESTIONS[0], "Thanks!"])]


@pytest.mark.parametrize(("message", "topics"), [
    ("Which property is it?", ("building",)),
    ("When should the new rents take effect?", ("date",)),
    ("Should amounts show the € symbol or EUR?", ("format",)),
    ("How big is the allowed increase?", ("decision",)),
    ("Do tenants whose lease ends soon get one?", ("tenants",)),
    ("Thanks!", ()),
])
def test_natural_questions_match_the_intended_topic(message: str, topics: tuple[str, ...]) -> None:
    assert _chat(2, [message])[1].topics == topics


# ---- the oracle's mail merge and the notices' judge --------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 3, 6])
def test_the_oracles_merge_writes_utf8_notices_that_pass(seed: int, tmp_path: Path) -> None:
    files, out = _merge(seed, tmp_path)
    truth = _truth(seed)
    assert judge_notices(files, truth)[0], judge_notices(files, truth)
    total = sum(n["new"] for n in truth["expected"].values())
    assert parse_total(f"old TOTAL|9|1.00\n{MARKER}\n{out.split(MARKER)[1]}") == (str(NOTICES), f"{total / 100:.2f}")
    some = next(n for n in truth["expected"].values() if any(ord(c) > 127 for c in n["tenant"]))
    assert any(some["tenant"].encode() in data for data in files.values())


def test_each_kind_of_wrong_notice_set_is_named(tmp_path: Path) -> None:
    seed = _seed_with("date")
    truth = _truth(seed)
    ok, why = judge_notices(_merge(seed, tmp_path, effective=truth["first_date"])[0], truth)
    assert not ok and why.endswith("(the tenants before the change of mind)")
    ok, why = judge_notices(_merge(seed, tmp_path, decision=(0, 0))[0], truth)  # the cli-only replay: no pixels
    assert not ok and "new rent" in why
    other = "code" if truth["style"] == SIGN else SIGN
    ok, why = judge_notices(_merge(seed, tmp_path, style=other)[0], truth)
    assert not ok and "not written as asked" in why
    seed = _seed_with("building")
    truth = _truth(seed)
    ok, why = judge_notices(_merge(seed, tmp_path, building=truth["first_building"])[0], truth)
    assert not ok
    files = _merge(seed, tmp_path)[0]
    name = next(n for n in sorted(files) if any(ord(c) > 127 for c in truth["expected"][n[:-4]]["tenant"]))
    latin = {**files, name: files[name].decode().encode("latin-1", "replace")}
    ok, why = judge_notices(latin, truth)
    assert not ok and ("UTF-8" in why or "tenant" in why), why
    stale = {**files, name: files[name].replace(truth["final_date"].encode(), b"2020-01-01")}
    assert not judge_notices(stale, truth)[0]


def test_parse_amount_tells_the_sign_from_the_code() -> None:
    assert parse_amount("€1283.00") == (128300, "sign", "€")
    assert parse_amount("£ 1,283.50") == (128350, "sign", "£")
    assert parse_amount("EUR 1283.00") == (128300, "code", "EUR")
    assert parse_amount("1283.00") == (128300, "", "")
    assert parse_amount("lots") is None and parse_amount("€1283") is None  # a notice's amount has 2 decimals
    assert parse_amount("€1283", FORM_AMOUNT) == (128300, "sign", "€")


def test_judge_sign_off_reads_the_form_as_a_person_would_fill_it() -> None:
    truth = _truth(_seed_with("date"))
    total = sum(n["new"] for n in truth["expected"].values())
    good = {"building": truth["final_building"].upper(), "effective": truth["final_date"], "count": str(NOTICES),
            "total": f"{truth['code']} {total / 100:,.2f}"}
    assert judge_sign_off(good, truth)[0], judge_sign_off(good, truth)
    assert judge_sign_off({**good, "total": f"{total // 100}"}, truth)[0]  # the form takes a whole amount
    assert not judge_sign_off({**good, "effective": truth["first_date"]}, truth)[0]
    assert not judge_sign_off({**good, "count": str(NOTICES + 1)}, truth)[0]
    assert not judge_sign_off({**good, "total": f"{total / 100 + 1:.2f}"}, truth)[0]
    assert not judge_sign_off({**good, "building": "Somewhere Else"}, truth)[0]


def test_the_oracle_is_blind_to_the_withheld_answer() -> None:
    hidden = TASK.oracle_truth({**_truth(0), "window": [0, 0, 1, 1]})
    assert not {"decisions", "expected", "stale", "files", "final_building", "final_date", "style"} & set(hidden)
    assert [d.resolve(_truth(0)) for d in TASK.deliverables[1:]] == [f"{NOTICE_DIR}/{f}" for f in _truth(0)["files"]]


# ---- the clauses on fake final states ----------------------------------------------------------------------

class FakeProbe:
    """The few probe reads the clauses make, over a dict of files and their mtimes."""

    def __init__(self, files: dict[str, bytes], mtimes: dict[str, float]) -> None:
        self.files, self.mtimes = files, mtimes

    def read_bytes(self, path: str, max_bytes: int = 0) -> bytes | None:
        return self.files.get(path)

    def read_text(self, path: str) -> str | None:
        data = self.files.get(path)
        return None if data is None else data.decode()

    def list_dir(self, path: str) -> list[str] | None:
        return sorted(p.rsplit("/", 1)[1] for p in self.files if p.rsplit("/", 1)[0] == path)

    def stat(self, path: str, follow_symlinks: bool = True) -> SimpleNamespace | None:
        return SimpleNamespace(mtime=self.mtimes.get(path, 0.0)) if path in self.files else None


def _state(seed: int, tmp_path: Path, *, chat: list[str], record: bool, made: float) -> FakeProbe:
    truth = _truth(seed)
    notices, out = _merge(seed, tmp_path)
    count, total = parse_total(out)
    files = {f"{NOTICE_DIR}/{name}": data for name, data in notices.items()}
    files[TRANSCRIPT] = "".join(json.dumps(t.to_record()) + "\n" for t in _chat(seed, chat)).encode()
    if record:
        files[RECORD] = json.dumps({"building": truth["final_building"], "effective": truth["final_date"],
                                    "count": count, "total": total, "submitted_at": made + 5}).encode() + b"\n"
    return FakeProbe(files, {f"{NOTICE_DIR}/{name}": made + i for i, name in enumerate(sorted(notices))})


def _verdicts(probe: FakeProbe, seed: int) -> dict[str, Outcome]:
    truth = _truth(seed)
    return {c.name: c.check(probe, truth).outcome for c in TASK.clauses}


def test_the_oracles_final_state_satisfies_every_clause(tmp_path: Path) -> None:
    seed = _seed_with("building")
    found = _verdicts(_state(seed, tmp_path, chat=list(QUESTIONS), record=True, made=2000.0), seed)
    assert set(found.values()) == {Outcome.SATISFIED}, found


def test_a_forger_with_the_oracles_bytes_and_no_chat_fails_the_sign_off_and_every_question(tmp_path: Path) -> None:
    seed = _seed_with("date")
    found = _verdicts(_state(seed, tmp_path, chat=[], record=False, made=2000.0), seed)
    assert found["notices"] == Outcome.SATISFIED
    assert {name for name, o in found.items() if o == Outcome.FAILED} == {
        "sign_off", "sign_off_matches_notices", "asked_building", "asked_date", "asked_format", "heard_change"}


def test_notices_delivered_before_asking_do_not_count(tmp_path: Path) -> None:
    seed = _seed_with("date")
    found = _verdicts(_state(seed, tmp_path, chat=list(QUESTIONS), record=True, made=1002.5), seed)
    assert found["asked_building"] == Outcome.SATISFIED  # record 2, at t=1001
    assert found["asked_date"] == found["asked_format"] == Outcome.FAILED


# ---- reading the decision ----------------------------------------------------------------------------------

def _rows(p: dict) -> list[list[str]]:
    return [[b, f"{p['decisions'][b][0] / 10:.1f}%", f"{p['code']} {p['decisions'][b][1]}.00"] for b in p["buildings"]]


def _screen(p: dict, origin: tuple[int, int], shown: bool = True) -> np.ndarray:
    image = np.full((720, 1280, 3), 200, dtype=np.uint8)
    x, y = origin
    image[y:y + 520, x:x + 520] = 255
    texts = [(HEADING, HEADING_X, HEADING_Y)]
    if shown:
        image[y + 76:y + 282, x + 12:x + 508] = (246, 242, 228)  # the page's cream
        for i, row in enumerate(_rows(p)):
            texts += [(cell.upper(), cx, FIRST_ROW_Y + i * ROW_H) for cell, cx in zip(row, (NAME_X, PCT_X, CAP_X),
                                                                                      strict=True)]
    for text, tx, ty in texts:
        for x0, y0, x1, y1 in pixel_font.layout_text(text, x + tx, y + ty, SCALE):
            image[y0:y1, x0:x1] = pixel_font.INK
    return image


@pytest.mark.parametrize("shift", [(0, 0), (4, -3), (-9, 11)])
def test_read_decision_finds_the_page_a_little_off_and_reads_every_row(shift: tuple[int, int]) -> None:
    p = _plan(4)
    want = {b.upper(): d for b, d in p["decisions"].items()}
    image = _screen(p, (20 + shift[0], 30 + shift[1]))
    assert read_decision(image, [20, 30, 520, 526], len(p["buildings"])) == want
    hidden = _screen(p, (20, 30), shown=False)
    assert board_origin(hidden, [20, 30, 520, 526]) == (20, 30)
    assert read_decision(hidden, [20, 30, 520, 526], len(p["buildings"])) is None


# ---- the board on a real X server, read, refused and approved through the real agent -----------------------

def test_the_board_shows_the_decision_only_on_request_and_refuses_bad_sign_offs(xvfb: XvfbDisplay,
                                                                               client: GuestClient,
                                                                               tmp_path: Path) -> None:
    p = _plan(6)
    layout = board_layout(20, 20, len(p["buildings"]))
    shutil.copy(Path(task_module.__file__).parent / "fixtures" / "rent_board.py", tmp_path)
    shutil.copy(Path(pixel_font.__file__), tmp_path)
    record = tmp_path / "record.json"
    shown = {"title": "RESOLUTION 2026/07 - RENT RISES", "rows": _rows(p), "signatory": p["signatory"],
             "layout": layout}
    with record.open("wb") as out:
        proc = subprocess.Popen([sys.executable, str(tmp_path / "rent_board.py")], stdin=subprocess.PIPE,
                                stdout=out, env={**os.environ, "DISPLAY": xvfb.display})
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(shown).encode())
        proc.stdin.close()
    try:
        window = wait_for(lambda: next((w for w in client.list_windows()[0] if w.title == layout["title"]), None),
                          20, what="the board mapped")
        wait_for(lambda: board_origin(client.screenshot(hide_cursor=True).image, window.geometry), 20,
                 what="the heading drawn")
        rows = len(p["buildings"])
        assert read_decision(client.screenshot(hide_cursor=True).image, window.geometry, rows) is None
        x, y = window.x, window.y

        def click(box: list[int]) -> None:
            client.click(x + box[0] + box[2] // 2, y + box[1] + box[3] // 2)

        click(layout["open"])
        decision = wait_for(lambda: read_decision(client.screenshot(hide_cursor=True).image, window.geometry, rows),
                            20, what="the decision shown")
        assert decision == {b.upper(): d for b, d in p["decisions"].items()}
        good = ["Maple House", "2026-10-01", "6", "GBP 8,123.00"]
        for bad in (["", *good[1:]], [good[0], "1 October 2026", *good[2:]], [*good[:1], "2026-02-30", *good[2:]],
                    [*good[:2], "six", good[3]], [*good[:3], "lots"]):
            for box, text in zip(layout["fields"], bad, strict=True):
                click(box)
                client.key("ctrl+slash")  # Tk's entry: select all, then delete it
                client.key("BackSpace")
                if text:
                    client.type_text(text)
            click(layout["approve"])
            with pytest.raises(subprocess.TimeoutExpired):  # refused: the window stays, nothing is recorded
                proc.wait(timeout=1)
            assert record.read_bytes() == b""
        for box, text in zip(layout["fields"], good, strict=True):
            click(box)
            client.key("ctrl+slash")
            client.key("BackSpace")
            client.type_text(text)
        click(layout["approve"])
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    found = json.loads(record.read_text(encoding="utf-8").strip().splitlines()[-1])
    assert {k: found[k] for k in ("building", "effective", "count", "total")} == dict(
        zip(("building", "effective", "count", "total"), good, strict=True))
    assert isinstance(found["submitted_at"], float)
