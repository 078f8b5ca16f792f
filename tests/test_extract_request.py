"""Weave-Data-5 (extract request): seeds, the requester's script, the oracle's query run by the real sqlite3,
the clauses on fake final states (unit), and the targets board on a real Xvfb read and sent through the real
agent (xvfb)."""

from __future__ import annotations

import json
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
from weavegym.envs.tasks.data import extract_request as task_module
from weavegym.envs.tasks.data.extract_request import (
    EXTRACT,
    MARKER,
    QUESTIONS,
    RECORD,
    SCHEMA,
    TASK,
    extract_sql,
    final_request,
    judge_form,
    judge_rows,
    parse_extract,
    parse_extract_lines,
)
from weavegym.envs.tasks.data.extract_request_plan import (
    COLUMNS,
    FIRST_ROW_Y,
    HEAD_Y,
    HEADING_X,
    HEADING_Y,
    NUMBER_CHARS,
    ROW_H,
    SCALE,
    board_layout,
    board_origin,
    expected_rows,
    heading,
    plan,
    read_board,
    user_script,
)
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.xvfb import XvfbDisplay

TRANSCRIPT = "/var/lib/weavegym-sim/transcript.jsonl"


def _plan(seed: int) -> dict:
    return plan(np.random.default_rng(seed))


def _seed_with(change: str) -> int:
    return next(s for s in range(50) if _plan(s)["change"] == change)


def _truth(seed: int) -> dict:
    """The truth setup returns, without the guest's parts (window, targets on screen)."""
    p = _plan(seed)
    script = user_script(p)
    assert script.change_of_mind is not None
    replies = {t.name: t.reply for t in script.topics}
    replies.update(change=script.change_of_mind.message, changed=script.change_of_mind.new_reply)
    return {**{k: v for k, v in p.items() if k != "orders"}, "expected": expected_rows(p), "replies": replies,
            "change_topic": script.change_of_mind.topic}


def _chat(seed: int, messages: list[str], start: float = 1000.0) -> list[Turn]:
    """The transcript the requester's script gives for these agent messages, one second per record."""
    clock = iter(start + i for i in range(1000))
    records: list[dict] = []
    chat = program.Conversation(user_script(_plan(seed)).to_dict(), records.append, clock=lambda: next(clock))
    chat.open()
    for message in messages:
        chat.send(message)
    return [Turn.from_record(r) for r in records]


def _extract_csv(seed: int, tmp_path: Path, board: dict | None = None, **change: object) -> str:
    """What the oracle's one shell command writes, run by the real sqlite3 on the seed's database."""
    p = _plan(seed)
    db = tmp_path / f"sales-{seed}.db"
    db.write_bytes(database_bytes(SCHEMA, {"orders": p["orders"]}))
    regions, quarter, year, metric = final_request(_truth(seed)["replies"], _truth(seed)["change_topic"])
    request = {"regions": regions, "quarter": quarter, "year": year, "metric": metric, **change}
    sql = extract_sql(request["regions"], request["quarter"], request["year"], request["metric"],
                      p["targets"] if board is None else board)
    return subprocess.run(["sqlite3", "-header", "-csv", str(db), sql], check=True, capture_output=True,
                          text=True).stdout


# ---- seeds -------------------------------------------------------------------------------------------------

def test_every_seed_varies_the_data_targets_and_request() -> None:
    plans = [_plan(seed) for seed in range(8)]
    assert len({json.dumps(p["targets"]) for p in plans}) == 8
    assert len({(tuple(p["final_regions"]), p["final_quarter"], p["year"]) for p in plans}) >= 6
    assert {p["change"] for p in plans} == {"region", "period"} and {p["metric"] for p in plans} == {"net", "gross"}
    assert _plan(3) == _plan(3)


@pytest.mark.parametrize("seed", range(20))
def test_each_seed_has_thousands_of_orders_and_every_shortcut_gives_another_answer(seed: int) -> None:
    p = _plan(seed)
    assert len(p["orders"]) > 4000 and {o[1][:4] for o in p["orders"]} == {str(p["year"] - 1), str(p["year"])}
    for region, targets in p["targets"].items():
        assert len(targets) == 4 and all(10_000 <= t < 10 ** NUMBER_CHARS for t in targets)
        assert pixel_font.unsupported(region) == ""
    q = p["final_quarter"] - 1
    for region in p["final_regions"]:
        cell = p["sums"][region]
        figures = [cell[q][i] for i in range(4)] + [cell[other][0] for other in range(4) if other != q]
        assert len({round(v / 100, 2) for v in figures}) == len(figures)  # net, gross, cancelled, other quarters
    if p["change"] == "region":
        assert set(p["first_regions"]) < set(p["final_regions"])
    else:
        assert p["first_quarter"] != p["final_quarter"]


# ---- the requester's script --------------------------------------------------------------------------------

@pytest.mark.parametrize("change", ["region", "period"])
def test_the_oracles_questions_get_each_hidden_answer_and_the_change_of_mind_once(change: str) -> None:
    seed = _seed_with(change)
    turns = _chat(seed, list(QUESTIONS))
    events = [(t.event, t.topics) for t in turns]
    assert events.count(("change_of_mind", (change,))) == 1
    asked = {topic for t in turns if t.event == "question" for topic in t.topics}
    assert asked == {"region", "period", "metric"}
    said = {t.topics[0]: t.text for t in turns if t.event == "answer"}  # the last answer per topic wins
    truth = _truth(seed)
    assert said[change] == truth["replies"]["changed"]
    regions, quarter, year, metric = final_request(truth["replies"], truth["change_topic"])
    assert (regions, quarter, year, metric) == (truth["final_regions"], truth["final_quarter"], truth["year"],
                                                truth["metric"])


def test_the_opening_gives_nothing_away_and_the_change_needs_a_message_after_the_answer() -> None:
    script = user_script(_plan(1))
    assert {t.name for t in script.topics if t.hidden} == {"region", "period", "metric"}
    turns = _chat(1, ["OK, on it!"])
    assert turns[0].text == "Hi! Can you pull the numbers for my review?"
    assert [t.event for t in turns[1:]] == ["question", "fallback"]
    seed = _seed_with("region")
    assert "change_of_mind" not in [t.event for t in _chat(seed, [QUESTIONS[0]])]
    assert "change_of_mind" in [t.event for t in _chat(seed, [QUESTIONS[0], "Thanks!"])]


@pytest.mark.parametrize(("message", "topics"), [
    ("Which area or territory do you cover?", ("region",)),
    ("What time frame should it cover?", ("period",)),
    ("Should I use gross or net figures?", ("metric",)),
    ("Do you want the cancelled orders in?", ("metric",)),
    ("What format do you need, a CSV?", ("format",)),
    ("Where do I find the targets?", ("targets",)),
    ("Thanks!", ()),
])
def test_natural_questions_match_the_intended_topic(message: str, topics: tuple[str, ...]) -> None:
    assert _chat(2, [message])[1].topics == topics


# ---- the oracle's query and the extract's judge ------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 3, 6])
def test_the_oracles_query_writes_an_extract_that_passes(seed: int, tmp_path: Path) -> None:
    text = _extract_csv(seed, tmp_path)
    truth = _truth(seed)
    rows, problems = parse_extract(text)
    assert problems == [] and judge_rows(rows, truth)[0], (text, judge_rows(rows, truth))
    shown = parse_extract_lines(f"old\n{MARKER}\r\n{text}")
    assert [r for r, _v, _t in shown] == sorted(truth["final_regions"])
    assert [t for _r, _v, t in shown] == [truth["expected"][r][1] for r in sorted(truth["final_regions"])]


def test_each_kind_of_wrong_extract_is_named(tmp_path: Path) -> None:
    seed = _seed_with("period")
    truth = _truth(seed)
    ok, why = judge_rows(parse_extract(_extract_csv(seed, tmp_path, quarter=truth["first_quarter"]))[0], truth)
    assert not ok and f"of Q{truth['first_quarter']})" in why
    other = "gross" if truth["metric"] == "net" else "net"
    ok, why = judge_rows(parse_extract(_extract_csv(seed, tmp_path, metric=other))[0], truth)
    assert not ok and f"({other} revenue of Q{truth['final_quarter']})" in why
    blind = {r: [0, 0, 0, 0] for r in truth["targets"]}  # the cli-only replay: the board never showed
    ok, why = judge_rows(parse_extract(_extract_csv(seed, tmp_path, board=blind))[0], truth)
    assert not ok and "target 0" in why
    seed = _seed_with("region")
    truth = _truth(seed)
    ok, why = judge_rows(parse_extract(_extract_csv(seed, tmp_path, regions=truth["first_regions"]))[0], truth)
    assert not ok and why.endswith("(the regions before the change of mind)")


def test_parse_extract_wants_the_header_and_numbers() -> None:
    assert parse_extract("Region,Revenue,Target,Attainment_pct\r\nNorth,10.00,20,50.0\r\n") == (
        {"NORTH": (10.0, 20.0, 50.0)}, [])
    assert parse_extract("region,revenue\nNORTH,1\n")[1] == ["the header is ['region', 'revenue'], not "
                                                             "region,revenue,target,attainment_pct"]
    rows, problems = parse_extract("region,revenue,target,attainment_pct\nNORTH,lots,1,2\nWEST,1,2,50\n")
    assert rows == {"WEST": (1.0, 2.0, 50.0)} and problems[0].startswith("row 2 is not")


def test_judge_form_reads_the_report_as_a_person_would_write_it() -> None:
    truth = _truth(_seed_with("region"))
    total = sum(c for c, _t in truth["expected"].values())
    goal = sum(t for _c, t in truth["expected"].values())
    regions = " and ".join(r.title() for r in truth["final_regions"])
    good = {"regions": regions, "period": f"{truth['year']}-Q{truth['final_quarter']}",
            "total": f"EUR {total / 100:,.2f}", "attainment": f"{total / goal:.1f} %"}
    assert judge_form(good, truth)[0], judge_form(good, truth)
    assert not judge_form({**good, "regions": truth["first_regions"][0]}, truth)[0]
    assert not judge_form({**good, "period": f"Q{truth['final_quarter']}"}, truth)[0]
    assert not judge_form({**good, "total": f"{total / 100 + 1:.2f}"}, truth)[0]
    assert not judge_form({**good, "attainment": f"{total / goal + 0.2:.1f}"}, truth)[0]


def test_the_oracle_is_blind_to_the_withheld_answer() -> None:
    hidden = TASK.oracle_truth({**_truth(0), "window": [0, 0, 1, 1]})
    assert not {"targets", "sums", "expected", "final_regions", "final_quarter", "metric"} & set(hidden)


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

    def stat(self, path: str, follow_symlinks: bool = True) -> SimpleNamespace | None:
        return SimpleNamespace(mtime=self.mtimes[path]) if path in self.files else None


def _state(seed: int, tmp_path: Path, *, chat: list[str], record: bool, made: float) -> FakeProbe:
    truth = _truth(seed)
    text = _extract_csv(seed, tmp_path)
    rows = parse_extract_lines(f"{MARKER}\n{text}")
    total = sum(round(float(v) * 100) for _r, v, _t in rows)
    goal = sum(t for _r, _v, t in rows)
    files = {EXTRACT: text.encode(),
             TRANSCRIPT: "".join(json.dumps(t.to_record()) + "\n" for t in _chat(seed, chat)).encode()}
    if record:
        files[RECORD] = json.dumps({"regions": ", ".join(truth["final_regions"]),
                                    "period": f"Q{truth['final_quarter']} {truth['year']}",
                                    "total": f"{total / 100:.2f}", "attainment": f"{total / goal:.1f}",
                                    "submitted_at": made + 5}).encode() + b"\n"
    return FakeProbe(files, {EXTRACT: made})


def _verdicts(probe: FakeProbe, seed: int) -> dict[str, Outcome]:
    truth = _truth(seed)
    return {c.name: c.check(probe, truth).outcome for c in TASK.clauses}


def test_the_oracles_final_state_satisfies_every_clause(tmp_path: Path) -> None:
    seed = _seed_with("period")
    found = _verdicts(_state(seed, tmp_path, chat=list(QUESTIONS), record=True, made=2000.0), seed)
    assert set(found.values()) == {Outcome.SATISFIED}, found


def test_a_forger_with_the_oracles_bytes_and_no_chat_fails_the_report_and_every_question(tmp_path: Path) -> None:
    seed = _seed_with("region")
    found = _verdicts(_state(seed, tmp_path, chat=[], record=False, made=2000.0), seed)
    assert found["extract_rows"] == Outcome.SATISFIED
    assert {name for name, o in found.items() if o == Outcome.FAILED} == {
        "report_sent", "report_matches_extract", "asked_region", "asked_period", "asked_metric", "heard_change"}


def test_questions_asked_after_the_extract_was_written_do_not_count(tmp_path: Path) -> None:
    seed = _seed_with("region")
    found = _verdicts(_state(seed, tmp_path, chat=list(QUESTIONS), record=True, made=1002.5), seed)
    assert found["asked_region"] == Outcome.SATISFIED  # record 2, at t=1001
    assert found["asked_period"] == found["asked_metric"] == Outcome.FAILED


# ---- reading the board ------------------------------------------------------------------------------------

def _screen(p: dict, origin: tuple[int, int], shown: bool = True) -> np.ndarray:
    image = np.full((720, 1280, 3), 200, dtype=np.uint8)
    x, y = origin
    image[y:y + 520, x:x + 480] = 255
    texts = [(heading(p["year"]), HEADING_X, HEADING_Y)]
    if shown:
        texts += [(h, c, HEAD_Y) for h, c in zip(("REGION", "Q1", "Q2", "Q3", "Q4"), COLUMNS, strict=True)]
        for i, region in enumerate(p["regions"]):
            cells = [region, *map(str, p["targets"][region])]
            texts += [(cell, c, FIRST_ROW_Y + i * ROW_H) for cell, c in zip(cells, COLUMNS, strict=True)]
    for text, tx, ty in texts:
        for x0, y0, x1, y1 in pixel_font.layout_text(text, x + tx, y + ty, SCALE):
            image[y0:y1, x0:x1] = pixel_font.INK
    return image


@pytest.mark.parametrize("shift", [(0, 0), (4, -3), (-9, 11)])
def test_read_board_finds_the_canvas_a_little_off_and_reads_every_target(shift: tuple[int, int]) -> None:
    p = _plan(4)
    image = _screen(p, (8 + shift[0], 30 + shift[1]))
    assert read_board(image, [8, 30, 480, 514], p["year"]) == p["targets"]
    hidden = _screen(p, (8, 30), shown=False)
    assert board_origin(hidden, [8, 30, 480, 514], p["year"]) == (8, 30)
    assert read_board(hidden, [8, 30, 480, 514], p["year"]) is None


# ---- the board on a real X server, read and sent through the real agent ------------------------------------

def test_the_board_shows_targets_only_on_request_and_records_the_report(xvfb: XvfbDisplay, client: GuestClient,
                                                                        tmp_path: Path) -> None:
    p = _plan(2)
    layout = board_layout(20, 20)
    shutil.copy(Path(task_module.__file__).parent / "fixtures" / "extract_request_board.py", tmp_path)
    shutil.copy(Path(pixel_font.__file__), tmp_path)
    rows = [[r, *map(str, p["targets"][r])] for r in p["regions"]]
    record = tmp_path / "record.json"
    with record.open("wb") as out:
        proc = subprocess.Popen([sys.executable, str(tmp_path / "extract_request_board.py")], stdin=subprocess.PIPE,
                                stdout=out, env={**os.environ, "DISPLAY": xvfb.display})
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"heading": heading(p["year"]), "rows": rows, "layout": layout}).encode())
        proc.stdin.close()
    try:
        window = wait_for(lambda: next((w for w in client.list_windows()[0] if w.title == layout["title"]), None),
                          20, what="the board mapped")
        wait_for(lambda: board_origin(client.screenshot(hide_cursor=True).image, window.geometry, p["year"]), 20,
                 what="the heading drawn")
        assert read_board(client.screenshot(hide_cursor=True).image, window.geometry, p["year"]) is None
        x, y = window.x, window.y

        def click(box: list[int]) -> None:
            client.click(x + box[0] + box[2] // 2, y + box[1] + box[3] // 2)

        click(layout["show"])
        board = wait_for(lambda: read_board(client.screenshot(hide_cursor=True).image, window.geometry, p["year"]),
                         20, what="the targets shown")
        assert board == p["targets"]
        click(layout["send"])  # empty fields: refused, the window stays
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1)
        for box, text in zip(layout["fields"], ["North, West", "Q2 2024", "123456.78", "99.1"], strict=True):
            click(box)
            client.type_text(text)
        click(layout["send"])
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    found = json.loads(record.read_text().strip().splitlines()[-1])
    assert {k: found[k] for k in ("regions", "period", "total", "attainment")} == {
        "regions": "North, West", "period": "Q2 2024", "total": "123456.78", "attainment": "99.1"}
    assert isinstance(found["submitted_at"], float)
