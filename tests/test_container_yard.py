"""Weave-Spatial-6 without a VM: seeds, the search against brute force, the shell's planner on a real database, the
clauses on fake records, and both real windows on Xvfb, read, dragged and sealed through the real guest agent."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.spatial import _yard as yd
from weavegym.envs.tasks.spatial import container_yard as cy
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay


def _world(seed: int) -> dict[str, Any]:
    return yd.world(np.random.default_rng(seed))


def _truth(seed: int) -> dict[str, Any]:
    w = _world(seed)
    return {"ship": w["ship"], "bays": w["bays"], "seq": w["seq"], "minimum": w["minimum"]}


def _bfs(stacks: list[list[str]], seq: Mapping[str, int]) -> int:
    """The fewest moves by plain breadth-first search (no heuristic, no pruning)."""
    start = tuple(tuple(s) for s in stacks)
    queue, seen = deque([(start, 0)]), {start}
    while queue:
        state, depth = queue.popleft()
        if all(yd.in_order(s, seq) for s in state):
            return depth
        for a, src in enumerate(state):
            for b, dst in enumerate(state):
                if a != b and src and len(dst) < yd.HEIGHT:
                    nxt = list(state)
                    nxt[a], nxt[b] = src[:-1], (*dst, src[-1])
                    key = tuple(nxt)
                    if key not in seen:
                        seen.add(key)
                        queue.append((key, depth + 1))
    raise AssertionError("unsolvable")


def test_seeds_vary_the_ship_the_bays_and_the_moves() -> None:
    worlds = [_world(seed) for seed in range(12)]
    assert len({w["ship"] for w in worlds}) >= 5
    assert len({json.dumps(w["bays"]) for w in worlds}) == 12
    assert len({tuple(w["minimum"]) for w in worlds}) >= 6
    for w in worlds:
        assert all(yd.MIN_MOVES[0] <= m <= yd.MIN_MOVES[1] for m in w["minimum"])
        ids = [c for bay in w["bays"] for s in bay for c in s]
        assert len(ids) == len(set(ids)) and all(yd.ID.match(c) for c in ids)
        assert all(len(s) <= yd.HEIGHT for bay in w["bays"] for s in bay)
        assert len(w["rows"]) > 150  # the bays' containers among the rest of the yard's


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_search_is_as_short_as_brute_force_and_its_plan_works(seed: int) -> None:
    w = _world(seed)
    for stacks, seq, plan in zip(w["bays"], w["seq"], w["plans"], strict=True):
        assert len(plan) == _bfs(stacks, seq)
        moved = [list(s) for s in stacks]
        for move in plan:
            a, b = map(int, move.split(">"))
            assert yd.apply_move(moved, (a, b), yd.HEIGHT) == ""
        assert all(yd.in_order(s, seq) for s in moved)


def test_the_rule_reads_as_the_instruction_says() -> None:
    seq = {"A": 1, "B": 2, "C": 3}
    assert yd.in_order(["X", "Y", "C", "B", "A"], seq)  # stays below, then the ship's, next to load on top
    assert not yd.in_order(["A", "B"], seq)  # B stands on A, which is loaded before it
    assert not yd.in_order(["A", "X"], seq)  # a container that stays stands on one of the ship's
    assert yd.in_order([], seq) and yd.in_order(["X"], seq)
    stacks = [["A"], [], [], []]
    assert yd.apply_move(stacks, (2, 1), 4) == "stack 2 is empty"
    assert yd.apply_move([["A"], ["B"] * 4, [], []], (1, 2), 4) == "stack 2 is full"


@pytest.mark.parametrize("seed", [0, 5])
def test_the_shells_planner_reads_the_real_database_and_finds_the_truths_plan(seed: int, tmp_path: Path) -> None:
    w = _world(seed)
    db = tmp_path / "loading.db"
    db.write_bytes(database_bytes(cy.SCHEMA, {"loading_list": w["rows"]}))
    for stacks, least in zip(w["bays"], w["minimum"], strict=True):
        command = cy.planner_command(w["ship"], stacks).replace(cy.DB, str(db))
        out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, check=True).stdout
        plan = out.split("PLAN", 1)[1].split()
        assert len(plan) == least
    # the other ships' rows are noise the query must leave out: their sequence numbers overlap the ship's
    assert {r[1] for r in w["rows"]} - {w["ship"]}
    assert any(r[1] != w["ship"] and r[4] == 1 for r in w["rows"])


# ---- the clauses ---------------------------------------------------------------------------------------------

def _played(truth: Mapping[str, Any], plans: list[list[str]], codes: tuple[str, ...] = ("ABC234", "DEF567", "GHJ789")
            ) -> tuple[list[dict[str, Any]], str]:
    """The console's record and the report of the bays played with ``plans``."""
    records, report = [], ["bay,moves,seal"]
    for number, (plan, code) in enumerate(zip(plans, codes, strict=True), 1):
        records += [{"bay": number, "move": list(map(int, m.split(">")))} for m in plan]
        records.append({"bay": number, "sealed": code, "moves": len(plan)})
        report.append(f"{number},{len(plan)},{code}")
    return records, "\n".join(report) + "\n"


def _files(records: list[dict[str, Any]], report: str | None) -> dict[str, bytes]:
    files = {cy.RECORD: "".join(json.dumps(r) + "\n" for r in records).encode()}
    if report is not None:
        files[cy.REPORT] = report.encode()
    return files


def _outcomes(files: Mapping[str, bytes], truth: Mapping[str, Any]) -> tuple[str, str, str]:
    probe = FilesProbe(files)
    return (cy.check_sealed(probe, truth).outcome, cy.check_fewest(probe, truth).outcome,
            cy.check_report(probe, truth).outcome)


def _longer(stacks: list[list[str]], plan: list[str]) -> list[str]:
    """The plan with a wasted move pair in front: a move and its way back, between two stacks with room."""
    a, b = next((a, b) for a in range(1, 5) for b in range(1, 5)
                if a != b and stacks[a - 1] and len(stacks[b - 1]) < yd.HEIGHT)
    return [f"{a}>{b}", f"{b}>{a}", *plan]


def test_a_bay_played_right_satisfies_every_clause() -> None:
    w = _world(2)
    truth = _truth(2)
    records, report = _played(truth, w["plans"])
    assert _outcomes(_files(records, report), truth) == ("satisfied", "satisfied", "satisfied")
    header_less = report.split("\n", 1)[1]
    assert _outcomes(_files(records, header_less), truth)[2] == "satisfied"


def test_more_moves_than_the_fewest_are_caught_and_the_report_must_match_the_console() -> None:
    w = _world(4)
    truth = _truth(4)
    plans = [_longer(w["bays"][0], w["plans"][0]), *w["plans"][1:]]
    records, report = _played(truth, plans)
    assert _outcomes(_files(records, report), truth) == ("satisfied", "partial", "satisfied")
    wrong_code = report.replace("ABC234", "ABC235")
    assert _outcomes(_files(records, wrong_code), truth)[2] == "failed"
    wrong_moves = report.replace(f"1,{len(plans[0])},", f"1,{len(plans[0]) - 2},")
    assert _outcomes(_files(records, wrong_moves), truth)[2] == "failed"


def test_a_forged_report_without_the_consoles_record_fails_everything() -> None:
    w = _world(1)
    truth = _truth(1)
    _records, report = _played(truth, w["plans"])
    assert _outcomes({cy.REPORT: report.encode()}, truth) == ("failed", "failed", "failed")


def test_a_record_that_stops_short_or_breaks_a_rule_is_not_in_order() -> None:
    w = _world(3)
    truth = _truth(3)
    records, report = _played(truth, w["plans"])
    short = [r for r in records if not (r["bay"] == 3 and "sealed" in r)]
    assert _outcomes(_files(short, report), truth)[0] == "partial"
    not_ordered = [r for r in records if not (r["bay"] == 2 and "move" in r)]
    assert "not in loading order" in cy.check_sealed(FilesProbe(_files(not_ordered, report)), truth).evidence


def test_the_oracle_is_denied_the_yard_and_the_minimum() -> None:
    truth = {**_truth(0), "map_at": [0, 0], "console_at": [0, 0]}
    assert set(cy.TASK.oracle_truth(truth)) == {"ship", "seq", "map_at", "console_at"}


def test_the_console_opens_the_next_bay_only_when_the_report_has_the_sealed_bays_line(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(pixel_font.__file__).parent))
    try:
        spec = importlib.util.spec_from_file_location("crane_console", Path(yd.__file__).parent / "fixtures" /
                                                      "crane_console.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(Path(pixel_font.__file__).parent))
    report = tmp_path / "stowage.csv"
    console = SimpleNamespace(conf={"report": str(report)}, moves=6, seals={0: "K7PQ2M"})
    assert not module.Console.reported(console, 0)  # no report yet
    report.write_text("bay,moves,seal\n1,5,K7PQ2M\n")
    assert not module.Console.reported(console, 0)  # the console counted 6
    report.write_text("bay,moves,seal\n1, 6, k7pq2m\n")
    assert module.Console.reported(console, 0)
    assert module.in_order(["X", "B", "A"], {"A": 1, "B": 2}) and not module.in_order(["A", "X"], {"A": 1})


# ---- the real windows on a real X server, read and dragged through the real guest agent ----------------------

def _start(tmp_path: Path, name: str, content: Mapping[str, Any], display: str, out: Any = None) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(tmp_path / f"{name}.py")], stdin=subprocess.PIPE,
                            stdout=out or subprocess.DEVNULL, env={**os.environ, "DISPLAY": display})
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(content).encode())
    proc.stdin.close()
    return proc


@pytest.mark.xvfb
def test_the_windows_show_what_the_oracle_reads_and_the_console_seals_dragged_bays(
        xvfb: XvfbDisplay, client: GuestClient, tmp_path: Path) -> None:
    w = _world(6)
    folder = Path(yd.__file__).parent / "fixtures"
    for name in ("yard_map.py", "crane_console.py"):
        shutil.copy(folder / name, tmp_path / name)
    shutil.copy(Path(pixel_font.__file__), tmp_path / "pixel_font.py")
    report = tmp_path / "stowage.csv"
    record = (tmp_path / "record.jsonl").open("wb")
    lay = yd.layout()
    procs = [_start(tmp_path, "yard_map", {"bays": w["bays"], "layout": lay, "at": list(yd.MAP_AT)}, xvfb.display),
             _start(tmp_path, "crane_console", {"bays": w["bays"], "seq": w["seq"], "height": yd.HEIGHT,
                                                "report": str(report), "layout": lay, "at": list(yd.CONSOLE_AT)},
                    xvfb.display, record)]
    try:
        shot = lambda: client.screenshot().image  # noqa: E731  (with the pointer, as the env's frames)
        map_at = wait_for(lambda: yd.origin(shot(), yd.MAP_AT, yd.MAP_HEADING), 20, what="the Yard Map drawn")
        console = wait_for(lambda: yd.origin(shot(), yd.CONSOLE_AT, yd.CONSOLE_HEADING), 20, what="the console")
        assert yd.read_bay(shot(), map_at) == [[], [], [], []]  # no bay shown before a button is pressed
        lines = ["bay,moves,seal"]
        for number, (stacks, seq) in enumerate(zip(w["bays"], w["seq"], strict=True), 1):
            client.click(*yd.centre(map_at, yd.BAY_BUTTONS[number - 1]))
            read = wait_for(lambda n=number: yd.shown_bay(shot(), map_at) == n and yd.read_bay(shot(), map_at), 20,
                            what=f"bay {number} read back")
            assert read == stacks
            assert yd.console_heights(shot(), console) == [len(s) for s in stacks]
            moved = [list(s) for s in stacks]
            if number == 1:  # refused: the bay is not sealed (Tk handles the events in order: before the drags)
                client.click(*yd.centre(console, yd.NEXT_BUTTON))
            if number == 1:  # a drop on the stack it came from is refused and not counted
                a = next(i for i, s in enumerate(moved) if s)
                box = yd.centre(console, (*yd.box_at(a, len(moved[a]) - 1), yd.BOX_W, yd.BOX_H))
                client.drag(box, (box[0] + 4, box[1] - 30))
            plan = cy.host_plan(read, seq)
            for move in plan:
                a, b = map(int, move.split(">"))
                start = yd.centre(console, (*yd.box_at(a - 1, len(moved[a - 1]) - 1), yd.BOX_W, yd.BOX_H))
                end = yd.centre(console, (*yd.box_at(b - 1, len(moved[b - 1])), yd.BOX_W, yd.BOX_H))
                assert yd.apply_move(moved, (a, b), yd.HEIGHT) == ""
                client.drag(start, end)
                want = [len(s) for s in moved]
                wait_for(lambda h=want: yd.console_heights(shot(), console) == h, 20, what=f"the move {move} shown")
            code = wait_for(lambda n=number: yd.read_seal(shot(), console, n), 20, what=f"bay {number}'s seal")
            lines.append(f"{number},{len(plan)},{code}")
            report.write_text("\n".join(lines) + "\n")
            if number < len(w["bays"]):
                client.click(*yd.centre(console, yd.NEXT_BUTTON))
                wait_for(lambda n=number: yd.shown_bay(shot(), console) == n + 1, 20, what="the next bay opened")
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        record.close()
    truth = _truth(6)
    files = {cy.RECORD: (tmp_path / "record.jsonl").read_bytes(), cy.REPORT: report.read_bytes()}
    assert _outcomes(files, truth) == ("satisfied", "satisfied", "satisfied")
    entries = [json.loads(line) for line in files[cy.RECORD].decode().splitlines()]
    assert sum(1 for e in entries if "move" in e) == sum(truth["minimum"])  # the refused drop was not recorded
    assert [e["bay"] for e in entries if e.get("reported")] == [1, 2]
