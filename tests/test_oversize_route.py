"""Weave-Spatial-5 without a VM: seeds of both kinds, the route maths against an independent search, the cut on
infeasible seeds, the closures read back off a rendered screen and off the real window on Xvfb (which refuses
an empty or garbled form), the oracle's program on the real database, and the clauses on fake probes."""

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
from weavegym.core.trajectory import EpisodeEnd
from weavegym.envs.episode_clauses import episode_clauses
from weavegym.envs.task import CAUSES, FEASIBLE
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.pixel_font import INK, layout_text
from weavegym.envs.tasks.spatial import oversize_route as osr
from weavegym.envs.tasks.spatial import road_network as rn
from weavegym.evaluators.scoring import score_clauses
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.xvfb import XvfbDisplay

ORIGIN = (190, 50)  # where the synthetic screen puts the window
SEEDS = range(30)


def _world(seed: int) -> dict[str, Any]:
    return rn.plan(np.random.default_rng(seed), osr.TASK.feasible(seed))


def _truth(seed: int, home: str = "/home/user", orders: str = osr.ORDER_DIR) -> dict[str, Any]:
    """The truth setup returns, without the guest (window and targets left out)."""
    world = _world(seed)
    order = world["truck"]["order"]
    return {"order": order, "order_file": f"{orders}/order-{order}.txt", "route_file": f"{home}/route-{order}.txt",
            "blocked_file": f"{home}/blocked-{order}.txt", "route": world["route"], "total": world["total"],
            "closed": world["closed"], "headroom": world["headroom"], "truck": world["truck"], "cut": world["cut"],
            "candidates": world["candidates"], FEASIBLE: osr.TASK.feasible(seed), CAUSES: rn.causes(world)}


def _blocked(world: Mapping[str, Any], closed: Any = None, headroom: Any = None,
             structures: Any = None) -> dict[str, list[str]]:
    return rn.blockers(world["structures"] if structures is None else structures, world["truck"],
                       world["closed"] if closed is None else closed,
                       world["headroom"] if headroom is None else headroom)


def _bellman_ford(world: Mapping[str, Any], blocked: Mapping[str, Any]) -> dict[str, float]:
    """Distances from the depot by relaxing every road until nothing changes (no heap, no early exit)."""
    dist = {j[0]: float("inf") for j in world["junctions"]}
    dist[world["depot"]] = 0
    for _ in range(len(dist)):
        for sid, a, b, length in world["segments"]:
            if sid not in blocked:
                dist[b] = min(dist[b], dist[a] + length)
                dist[a] = min(dist[a], dist[b] + length)
    return dist


def _walk(world: Mapping[str, Any], route: list[str]) -> tuple[str, int]:
    """Follow the route from the depot: (where it ends, its length); raises if two segments do not meet."""
    ends = {s[0]: (s[1], s[2], s[3]) for s in world["segments"]}
    here, total = world["depot"], 0
    for sid in route:
        a, b, length = ends[sid]
        assert here in (a, b), (sid, here)
        here, total = (b if here == a else a), total + length
    return here, total


def test_seeds_vary_and_at_least_a_third_cannot_be_done() -> None:
    worlds = {seed: _world(seed) for seed in SEEDS}
    infeasible = [seed for seed in SEEDS if not osr.TASK.feasible(seed)]
    assert len(infeasible) * 3 >= len(SEEDS)
    assert len({w["truck"]["order"] for w in worlds.values()}) == len(SEEDS)
    assert len({(w["truck"]["height_cm"], w["truck"]["weight_t"]) for w in worlds.values()}) >= 25
    assert len({w["total"] for seed, w in worlds.items() if seed not in infeasible}) == len(SEEDS) - len(infeasible)
    assert len({(w["depot"], w["site"]) for w in worlds.values()}) >= 25
    for w in worlds.values():
        assert 45 <= len(w["segments"]) <= 75 and len(w["structures"]) >= 10
        assert 2 <= len(w["rows"]) <= rn.MAX_ROWS
        assert len(set(w["candidates"])) == len(w["candidates"])


@pytest.mark.parametrize("seed", [s for s in SEEDS if osr.TASK.feasible(s)])
def test_a_feasible_route_is_the_unique_shortest_legal_one_and_needs_both_channels(seed: int) -> None:
    world = _world(seed)
    blocked = _blocked(world)
    end, length = _walk(world, world["route"])
    assert end == world["site"] and length == world["total"]
    assert not set(world["route"]) & set(blocked)  # legal today
    assert _bellman_ford(world, blocked)[world["site"]] == world["total"]
    assert rn.margin(world["segments"], blocked, world["depot"], world["site"], world["route"]) >= rn.MARGIN_M
    # The shell alone (no closures) takes a road closed today; the map alone (no structures) takes another route.
    plain = rn.shortest_route(world["segments"], _blocked(world, closed=[], headroom={}), world["depot"],
                              world["site"])
    assert plain is not None and set(plain[0]) & set(world["closed"])
    on_map = rn.shortest_route(world["segments"], {c: [] for c in world["closed"]}, world["depot"], world["site"])
    assert on_map is not None and on_map[0] != world["route"]
    assert len(world["route"]) <= rn.MAX_HOPS


@pytest.mark.parametrize("seed", [s for s in SEEDS if not osr.TASK.feasible(s)])
def test_an_infeasible_site_is_cut_off_by_one_closure_and_one_structure_alone(seed: int) -> None:
    world = _world(seed)
    cut, depot, site, segments = world["cut"], world["depot"], world["site"], world["segments"]
    links = sorted(s[0] for s in segments if site in (s[1], s[2]))
    assert links == sorted([cut["closed"], cut["link"]])
    assert cut["closed"] in world["closed"] and cut["link"] not in world["closed"]
    cause = next(s for s in world["structures"] if s[0] == cut["structure"])
    assert cause[1] == cut["link"] and cause[0] not in world["headroom"]
    assert (cause[3] or 10_000) < world["truck"]["height_cm"] or (cause[4] or 10_000) < world["truck"]["weight_t"]
    assert rn.shortest_route(segments, _blocked(world), depot, site) is None
    assert _bellman_ford(world, _blocked(world))[site] == float("inf")
    reopened = rn.shortest_route(segments, _blocked(world, closed=world["closed"][1:]), depot, site)
    assert reopened is not None and cut["closed"] in reopened[0]  # what the shell alone would dispatch
    unbuilt = rn.shortest_route(segments, _blocked(world, structures=[s for s in world["structures"] if s != cause]),
                                depot, site)
    assert unbuilt is not None and cut["link"] in unbuilt[0]
    lines = rn.diagnosis(segments, _blocked(world), depot, site)
    assert sorted(lines) == sorted([f"CUT {cut['closed']} CLOSED", f"CUT {cut['link']} " + _blocked(world)[
        cut["link"]][0]])
    assert cut["structure"] in lines[0] + lines[1]
    assert set(rn.causes(world)) <= set(world["candidates"]) and len(rn.causes(world)) == 3


def test_the_instruction_gives_no_cause_away_and_the_oracle_is_denied_what_one_channel_shows() -> None:
    for seed in (s for s in SEEDS if not osr.TASK.feasible(s)):
        truth = _truth(seed)
        text = osr.TASK.instruction.format(order=truth["order"], order_file=truth["order_file"],
                                           route_file=truth["route_file"], blocked_file=truth["blocked_file"])
        assert not any(cause.lower() in text.lower() for cause in truth[CAUSES]), seed
    seen = set(osr.TASK.oracle_truth({**_truth(2), "window": [], "targets": {}}))
    assert seen == {"order", "order_file", "route_file", "blocked_file", "window", "targets"}


def test_the_order_reads_back_from_its_text() -> None:
    for seed in (0, 1, 2):
        world = _world(seed)
        truck = rn.parse_order(world["order_text"])
        assert truck == {k: world["truck"][k] for k in ("height_cm", "weight_t", "depot", "site")}
    with pytest.raises(ValueError):
        rn.parse_order("nothing here")


# -- the closures as pixels ----------------------------------------------------------------------------------------


def _screen(title: str, rows: list[str]) -> np.ndarray:
    image = np.zeros((720, 1280, 3), dtype=np.uint8)
    cx, cy = ORIGIN[0] + rn.CANVAS[0], ORIGIN[1] + rn.CANVAS[1]
    image[cy:cy + rn.CANVAS[3], cx:cx + rn.CANVAS[2]] = 255
    texts = [(title, rn.TITLE_AT[0], rn.TITLE_AT[1], rn.TITLE_SCALE)]
    texts += [(row, 12, rn.FIRST_ROW_Y + i * rn.ROW_DY, rn.SCALE) for i, row in enumerate(rows)]
    for text, x, y, scale in texts:
        for x0, y0, x1, y1 in layout_text(text, cx + x, cy + y, scale):
            image[y0:y1, x0:x1] = INK
    return image


@pytest.mark.parametrize("seed", [0, 2, 4, 5, 9])
def test_the_closures_read_back_exactly_from_the_screen(seed: int) -> None:
    world = _world(seed)
    targets = rn.screen_targets([*ORIGIN, rn.WIDTH, rn.HEIGHT])
    image = _screen(osr.CLOSURES_TITLE, world["rows"])
    assert rn.shown_title(image, targets) == osr.CLOSURES_TITLE
    closed, headroom = rn.read_closures(image, targets)
    assert sorted(closed) == sorted(world["closed"]) and headroom == world["headroom"]
    assert rn.read_closures(_screen("ROAD MAP", []), targets) == ([], {})


def test_the_focus_ring_tells_which_entry_has_the_keyboard() -> None:
    targets = rn.screen_targets([*ORIGIN, rn.WIDTH, rn.HEIGHT])
    image = np.full((720, 1280, 3), 0xD9, dtype=np.uint8)
    x, y, w, _h = targets["boxes"]["length"]
    image[y:y + 3, x:x + w] = rn.RING_RGB
    assert rn.focused(image, targets, "length") and not rn.focused(image, targets, "route")


# -- the oracle's program on the real database ---------------------------------------------------------------------


def _guest(seed: int, tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """The seed's database and order in a folder, and the truth pointing there."""
    world = _world(seed)
    db = tmp_path / "network.db"
    db.write_bytes(database_bytes(rn.SCHEMA, {k: world[k] for k in ("junctions", "segments", "structures")}))
    truth = _truth(seed, home=str(tmp_path), orders=str(tmp_path))
    Path(truth["order_file"]).write_text(world["order_text"])
    return truth, db


def _run(truth: Mapping[str, Any], db: Path, closed: list[str], headroom: dict[str, int]) -> str:
    code = osr.program(truth, closed, headroom, db=str(db))
    return subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True, check=True,
                          timeout=60).stdout


class _Probe:
    """The reads the clauses make, from a dict of file texts; the episode's end as given."""

    def __init__(self, files: Mapping[str, str], kind: str = "done", reason: str = "") -> None:
        self.files, self.episode = files, EpisodeEnd(kind=kind, reason=reason)

    def read_text(self, path: str) -> str | None:
        return self.files.get(path)

    def stat(self, path: str, follow_symlinks: bool = True) -> object | None:
        return object() if path in self.files else None


def test_the_oracles_program_finds_the_route_and_a_shell_without_the_closures_does_not(tmp_path: Path) -> None:
    truth, db = _guest(0, tmp_path)
    out = _run(truth, db, truth["closed"], truth["headroom"])
    assert osr.ROUTE_LINE.search(out)[1].split() == truth["route"]
    assert int(osr.TOTAL_LINE.search(out)[1]) == truth["total"]
    files = {truth["route_file"]: Path(truth["route_file"]).read_text()}
    assert osr.check_route_file(_Probe(files), truth).outcome == "satisfied"
    blind = _run(truth, db, [], {})  # the shell alone: the database's answer runs over a road closed today
    files = {truth["route_file"]: Path(truth["route_file"]).read_text()}
    verdict = osr.check_route_file(_Probe(files), truth)
    assert verdict.outcome == "failed" and "closed today" in verdict.evidence
    assert osr.ROUTE_LINE.search(blind)[1].split() != truth["route"]


def test_the_oracles_program_reports_the_cut_on_an_infeasible_seed(tmp_path: Path) -> None:
    truth, db = _guest(2, tmp_path)
    out = _run(truth, db, truth["closed"], truth["headroom"])
    assert osr.ROUTE_LINE.search(out) is None and not Path(truth["route_file"]).exists()
    cut = dict(osr.CUT_LINE.findall(out))
    assert cut[truth["cut"]["closed"]] == "CLOSED" and truth["cut"]["structure"] in cut[truth["cut"]["link"]]
    report = {truth["blocked_file"]: Path(truth["blocked_file"]).read_text()}
    assert osr.check_cut_reported(_Probe(report), truth).outcome == "satisfied"
    _run(truth, db, [], truth["headroom"])  # blind to the closures, the shell makes a route up
    assert Path(truth["route_file"]).exists()


# -- the clauses ---------------------------------------------------------------------------------------------------


def _record(**fields: Any) -> dict[str, str]:
    return {osr.RECORD: json.dumps(fields) + "\n"}


def _route_text(route: list[str], total: int) -> str:
    return "".join(f"{sid}\n" for sid in route) + f"TOTAL {total}\n"


def test_the_route_file_needs_the_route_in_order_and_its_total() -> None:
    truth = _truth(1)
    route, total, path = truth["route"], truth["total"], truth["route_file"]
    assert osr.check_route_file(_Probe({path: _route_text(route, total)}), truth).outcome == "satisfied"
    lenient = f"Route for order {truth['order']}: " + " -> ".join(route) + f"\ntotal: {total} m\n"
    assert osr.check_route_file(_Probe({path: lenient}), truth).outcome == "satisfied"
    assert osr.check_route_total(_Probe({path: lenient}), truth).outcome == "satisfied"
    off = _Probe({path: _route_text(route, total + 10)})
    assert osr.check_route_file(off, truth).outcome == "satisfied"
    assert osr.check_route_total(off, truth).outcome == "failed"
    assert osr.check_route_total(_Probe({path: "\n".join(route)}), truth).outcome == "failed"
    assert osr.check_route_file(_Probe({path: _route_text(route[::-1], total)}), truth).outcome == "failed"
    assert osr.check_route_file(_Probe({path: _route_text(route[:-1], total)}), truth).outcome == "failed"
    assert osr.check_route_file(_Probe({}), truth).outcome == "failed"


def test_the_dispatch_needs_the_route_and_its_length_in_the_window() -> None:
    truth = _truth(3)
    good = _record(action="dispatch", route=truth["route"], length_m=truth["total"])
    assert osr.check_dispatched(_Probe(good), truth).outcome == "satisfied"
    for wrong in (_record(action="dispatch", route=truth["route"], length_m=truth["total"] + 1),
                  _record(action="dispatch", route=truth["route"][1:], length_m=truth["total"]),
                  _record(action="cannot_route", ids=truth["closed"]), {osr.RECORD: "garbage"}, {}):
        assert osr.check_dispatched(_Probe(wrong), truth).outcome == "failed", wrong


def test_the_cut_needs_the_closure_and_the_structure_and_nothing_else() -> None:
    truth = _truth(5)
    cut = truth["cut"]
    other = next(c for c in truth["candidates"] if c not in truth[CAUSES])
    cases = {(cut["closed"], cut["structure"]): "satisfied", (cut["closed"], cut["link"]): "satisfied",
             (cut["closed"], cut["link"], cut["structure"]): "satisfied",
             (cut["closed"], cut["structure"], other): "partial", (cut["closed"],): "failed",
             (cut["structure"], cut["link"]): "failed", (other,): "failed"}
    for ids, outcome in cases.items():
        record = _record(action="cannot_route", ids=list(ids))
        assert osr.check_cut_recorded(_Probe(record), truth).outcome == outcome, ids
        report = {truth["blocked_file"]: "".join(f"{i} blocked\n" for i in ids)}
        assert osr.check_cut_reported(_Probe(report), truth).outcome == outcome, ids
    dispatched = _record(action="dispatch", route=[cut["closed"], cut["structure"]], length_m=100)
    assert osr.check_cut_recorded(_Probe(dispatched), truth).outcome == "failed"


def _score(truth: Mapping[str, Any], probe: _Probe) -> float:
    clauses, _deliverables = episode_clauses(osr.TASK, truth)
    return score_clauses(clauses, probe, truth)[0]


def test_episodes_score_as_intended_on_both_kinds_of_seed() -> None:
    feasible, infeasible = _truth(0), _truth(2)
    cut = infeasible["cut"]
    route_file = {feasible["route_file"]: _route_text(feasible["route"], feasible["total"])}
    dispatched = _record(action="dispatch", route=feasible["route"], length_m=feasible["total"])
    assert _score(feasible, _Probe({**route_file, **dispatched})) == 1.0
    assert _score(feasible, _Probe(route_file)) == 0.5  # the forger: no record in the window
    assert _score(feasible, _Probe({**route_file, **dispatched}, kind="fail", reason="no route")) == 0.0
    shell_only = rn.shortest_route(_world(0)["segments"], _blocked(_world(0), closed=[], headroom={}),
                                   _world(0)["depot"], _world(0)["site"])
    blind = {feasible["route_file"]: _route_text(*shell_only)}
    assert _score(feasible, _Probe(blind)) == 0.0
    reason = f"No legal route: {cut['closed']} is closed and {cut['link']} passes under {cut['structure']}"
    record = _record(action="cannot_route", ids=[cut["closed"], cut["structure"]])
    report = {infeasible["blocked_file"]: f"{cut['closed']} CLOSED\n{cut['link']} {cut['structure']} too low\n"}
    assert _score(infeasible, _Probe({**record, **report}, kind="fail", reason=reason)) == 1.0
    fabricated = {infeasible["route_file"]: "R100\nTOTAL 5000\n"}
    assert _score(infeasible, _Probe({**record, **report, **fabricated}, kind="fail", reason=reason)) == 0.0
    assert _score(infeasible, _Probe({**record, **report}, kind="fail", reason="no route today")) == 0.5
    assert _score(infeasible, _Probe(report, kind="fail", reason=reason)) == 0.5  # the forger
    assert _score(infeasible, _Probe({**record, **report}, kind="done")) == 0.0


# -- the real window on a real X server, read and clicked through the real guest agent ---------------------------


@pytest.mark.xvfb
def test_the_window_shows_the_closures_only_after_its_tab_and_refuses_a_bad_form(
        xvfb: XvfbDisplay, client: GuestClient, tmp_path: Path) -> None:
    world = _world(4)
    shutil.copy(Path(osr.__file__).parent / "fixtures" / "dispatch_map.py", tmp_path / "dispatch_map.py")
    shutil.copy(Path(pixel_font.__file__), tmp_path / "pixel_font.py")
    shown = {"junctions": rn.map_points(world["junctions"]), "segments": [list(s[:3]) for s in world["segments"]],
             "closures": world["rows"], "layout": rn.layout()}
    proc = subprocess.Popen([sys.executable, str(tmp_path / "dispatch_map.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, "DISPLAY": xvfb.display})
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(shown).encode())
        proc.stdin.close()
        window = wait_for(lambda: next((w for w in client.list_windows()[0] if w.title == osr.TITLE), None), 20,
                          what="the Dispatch Map mapped")
        targets = rn.screen_targets(window.geometry)
        wait_for(lambda: rn.shown_title(client.screenshot().image, targets) == "ROAD MAP", 20, what="the map")
        assert rn.read_closures(client.screenshot().image, targets) == ([], {})  # nothing before the tab
        client.click(*targets["tabs"][1])
        wait_for(lambda: rn.shown_title(client.screenshot().image, targets) == osr.CLOSURES_TITLE, 20,
                 what="the closures")
        closed, headroom = rn.read_closures(client.screenshot().image, targets)
        assert sorted(closed) == sorted(world["closed"]) and headroom == world["headroom"]
        client.click(*targets["dispatch"])  # an empty form is refused
        client.click(*targets["cannot"])
        assert not rn.focused(client.screenshot().image, targets, "route")

        def fill(entry: str, text: str) -> None:  # as the oracle does: type once the entry shows its ring
            client.click(*targets[entry])
            wait_for(lambda: rn.focused(client.screenshot().image, targets, entry), 20, what=f"{entry} focused")
            assert not rn.focused(client.screenshot().image, targets, "length" if entry == "route" else "route")
            client.key("End")
            client.key("BackSpace", repeat=50)
            client.type_text(text)

        fill("route", "HELLO WORLD")  # no segment ids
        fill("length", "12k")
        client.click(*targets["dispatch"])
        client.click(*targets["cannot"])
        assert proc.poll() is None
        fill("route", " ".join(world["route"]))
        fill("length", "about 20 km")  # a length that is no whole number of metres
        client.click(*targets["dispatch"])
        assert proc.poll() is None
        fill("length", f"{world['total']} m")
        client.click(*targets["dispatch"])
        record = json.loads(proc.stdout.readline())
        assert record == {"action": "dispatch", "route": world["route"], "length_m": world["total"]}
        assert proc.wait(20) == 0
    finally:
        proc.kill()
        proc.wait()
