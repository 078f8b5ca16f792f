"""Weave-Spatial-8 (ferry links) without a VM: the Bridges model (game ids, the links search, random charts, saved
moves), the oracle's solver, register and plan commands run by the real python3, sqlite3 and bash, the clauses on
right and wrong finals and on a save the real sgt-bridges wrote (unit), and the real Harbour Office on Xvfb through
the real agent (xvfb): the charts read back off the screen, the refusals, the licence and its code."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pixel_apps import pixel_app

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.games.sgt_common import record, solver_command
from weavegym.envs.tasks.spatial import _harbour_common as hc
from weavegym.envs.tasks.spatial import _harbour_oracle as ho
from weavegym.envs.tasks.spatial import ferry_links as fl
from weavegym.envs.tasks.spatial.bridges import (
    berth_cost,
    chart_links,
    decode,
    encode,
    link_islands,
    parse_links,
    replay_bridges,
)
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(fl.__file__).parent / "fixtures"
# tests/data/bridges_chart.sav: sgt-bridges 20230122 saved this chart after its links were dragged on Xvfb.
SAVED = (Path(__file__).parent / "data" / "bridges_chart.sav").read_bytes()


def _chart(ident: str, links: list[list[int]], rate: int, names: tuple[str, ...]) -> dict[str, Any]:
    w, h, islands = decode(ident)
    isles = sorted(islands, key=lambda c: (c[1], c[0]))
    chart = {"id": ident, "w": w, "h": h, "islands": [[x, y, islands[(x, y)]] for x, y in isles], "links": links,
             "names": {f"{chr(65 + x)}{y + 1}": names[i] for i, (x, y) in enumerate(isles)}, "rate": rate}
    chart["cost"] = berth_cost(chart_links(chart), rate)
    return chart


NINE = _chart("9x9m2:b3a5a5a22d1r2g4b43a5q2b4a2e4c4", [
    [2, 0, 4, 0, 1], [2, 0, 2, 5, 2], [4, 0, 6, 0, 2], [4, 0, 4, 8, 2], [6, 0, 8, 0, 1], [6, 0, 6, 3, 2],
    [8, 0, 8, 4, 1], [0, 1, 0, 5, 2], [5, 1, 5, 4, 1], [5, 4, 8, 4, 1], [5, 4, 5, 7, 2], [8, 4, 8, 8, 2],
    [0, 5, 2, 5, 1], [2, 5, 2, 7, 2], [5, 7, 7, 7, 2], [4, 8, 8, 8, 2]], 6, hc.NAMES[:16])
SEVEN = _chart("7x7m2:b2b1o4a7c4i3a1b3b2b3", [
    [2, 0, 5, 0, 1], [2, 0, 2, 3, 1], [0, 3, 2, 3, 2], [0, 3, 0, 6, 2], [2, 3, 6, 3, 2], [2, 3, 2, 5, 2],
    [6, 3, 6, 6, 2], [2, 5, 4, 5, 1], [0, 6, 3, 6, 1], [3, 6, 6, 6, 1]], 8, hc.NAMES[16:26])
EIGHT = _chart("8x8m2:a4e4j3a4a2o1b4b4b4b3b1c4d2a", [
    [1, 0, 7, 0, 2], [1, 0, 1, 5, 2], [7, 0, 7, 5, 2], [2, 2, 4, 2, 1], [2, 2, 2, 6, 2], [4, 2, 6, 2, 1],
    [4, 2, 4, 5, 2], [6, 2, 6, 4, 1], [1, 5, 1, 7, 2], [4, 5, 7, 5, 2], [2, 6, 5, 6, 1], [1, 7, 6, 7, 2]],
    19, hc.NAMES[26:39])
CHARTS = [NINE, SEVEN, EIGHT]
TRUTH = {"charts": CHARTS, "at": list(hc.OFFICE_AT), "corner": [27, 151]}


def save_text(chart: Mapping[str, Any], moves: list[str]) -> str:
    """A Bridges save as the game writes it: the chart, then one MOVE record per drag."""
    size, desc = str(chart["id"]).split(":", 1)
    params = size.replace("m2", "") + "i30e10m2d0"
    head = [("SAVEFILE", "Simon Tatham's Portable Puzzle Collection"), ("VERSION", "1"), ("GAME", "Bridges"),
            ("PARAMS", params), ("CPARAMS", params), ("DESC", desc), ("NSTATES", str(len(moves) + 1)),
            ("STATEPOS", str(len(moves) + 1))]
    return "".join(record(k, v) for k, v in [*head, *(("MOVE", m) for m in moves)])


def drags(chart: Mapping[str, Any]) -> list[str]:
    return [f"L{a},{b},{c},{d},{k}" for a, b, c, d, n in chart["links"] for k in range(1, n + 1)]


def plan(chart: Mapping[str, Any], number: int, licence: str) -> str:
    links = {(tuple(link[:2]), tuple(link[2:4])): link[4] for link in chart["links"]}
    return ho.plan_line(number, licence, chart["cost"], links, chart["names"])  # type: ignore[arg-type]


def _final(licences: tuple[str, ...] = ("ABC234", "XYZ789", "KLM456")) -> dict[str, bytes]:
    """The files of a harbour licensed right: the three saves, the office's record and the plan."""
    saves = [SAVED, save_text(SEVEN, drags(SEVEN)).encode(), save_text(EIGHT, drags(EIGHT)).encode()]
    files = {hc.save_path(n): data for n, data in enumerate(saves, 1)}
    records = [{"chart": n, "cost": c["cost"], "sha256": hashlib.sha256(saves[n - 1]).hexdigest(),
                "licence": licences[n - 1]} for n, c in enumerate(CHARTS, 1)]
    files[hc.RECORD] = "".join(json.dumps(r) + "\n" for r in records).encode()
    files[hc.NETWORK] = "".join(plan(c, n, licences[n - 1]) + "\n" for n, c in enumerate(CHARTS, 1)).encode()
    return files


def _outcomes(files: Mapping[str, bytes]) -> dict[str, Outcome]:
    probe = FilesProbe(files)
    return {c.name: c.check(probe, TRUTH).outcome for c in fl.TASK.clauses}  # type: ignore[arg-type]


ALL_SATISFIED = {c.name: Outcome.SATISFIED for c in fl.TASK.clauses}


def test_the_search_finds_the_one_network_and_tells_none_and_many() -> None:
    for chart in CHARTS:
        assert parse_links(link_islands(chart["id"])) == chart_links(chart)
        w, h, islands = decode(chart["id"])
        assert encode(w, h, islands) == chart["id"]
    # the puzzle the instruction quotes, as sgt-bridges generated it
    assert link_islands("7x7m2:4a5a1e2b4b2d5e5b2k2a3c3").startswith("LINKS A1-C1=2 A1-A4=2 ")
    assert link_islands("3x1:1a1") == "LINKS A1-C1=1" and link_islands("3x1:2a1") == "NONE"
    assert link_islands("3x3:1a1f") == "LINKS A1-C1=1"
    assert link_islands("3x3:1a2c1a1") == "NONE"  # an odd total of bridge ends
    assert link_islands("3x3:2a2c2a2") == "LINKS A1-C1=1 A1-A3=1 C1-C3=1 A3-C3=1"  # two doubles would not connect
    assert link_islands("3x3:3a3c3a3") == "MANY"  # a ring of four 3s: doubles on either pair of opposite sides
    assert link_islands("5x1:1a2a1") == "LINKS A1-C1=1 C1-E1=1"
    assert link_islands("5x5:1a1bi1i1") == "NONE"  # two separate pairs can never join
    with pytest.raises(ValueError):
        decode("7x7m2:4a5a1e2b4b2d5e5b2k2a3c")  # one square short
    with pytest.raises(ValueError):
        link_islands("7x7m2:4a5a1e2b4b2d5e5b2k2a3c3x")


@pytest.mark.parametrize("seed", range(4))
def test_every_seed_draws_three_sizes_each_with_one_network(seed: int) -> None:
    charts = fl.draw_charts(np.random.default_rng(seed))
    assert sorted(c["w"] for c in charts) == [s for s, _n in hc.SIZES]
    for number, chart in enumerate(charts, 1):
        w, h, islands = decode(chart["id"])
        assert len(islands) == dict(hc.SIZES)[w] and parse_links(link_islands(chart["id"])) == chart_links(chart)
        assert not any((x + 1, y) in islands or (x, y + 1) in islands for x, y in islands)  # no joined islands
        assert len(set(chart["names"].values())) == len(islands) and chart["cost"] > 0
        lines = hc.chart_lines(number, chart)
        assert not any(pixel_font.unsupported(line) for line in lines) and len(lines) == h + 2


def test_bridges_moves_replay_and_a_solve_does_not_count() -> None:
    built, problem = replay_bridges(SEVEN["id"], ["L2,0,5,0,1", "L2,0,5,0,2", "M2,0", "L0,3,2,3,1;L0,3,0,6,2",
                                                  "L2,0,5,0,0", "N0,3,2,3"])
    assert problem == "" and built == {((0, 3), (2, 3)): 1, ((0, 3), (0, 6)): 2}
    assert replay_bridges(SEVEN["id"], ["S;L2,0,5,0,1"])[1] == "the saved game used Game > Solve"
    assert "in sight" in replay_bridges(SEVEN["id"], ["L0,3,6,3,1"])[1]  # C4 stands between A4 and G4
    assert "not a Bridges move" in replay_bridges(SEVEN["id"], ["X1,1"])[1]


def test_a_harbour_licensed_right_satisfies_every_clause_with_the_real_apps_save() -> None:
    assert _outcomes(_final()) == ALL_SATISFIED
    files = _final()
    line = plan(SEVEN, 2, "XYZ789").encode()
    links = line.split(b" | ")[3].split(b", ")
    swapped = b", ".join(b"-".join(reversed(item.split(b" ")[0].split(b"-"))).lower() + b" x" + item.split(b" ")[1]
                         for item in reversed(links))
    files[hc.NETWORK] = files[hc.NETWORK].replace(line.split(b" | ")[3], swapped)  # any order, case and direction
    assert _outcomes(files) == ALL_SATISFIED


def test_a_wrong_unbuilt_or_solved_save_fails() -> None:
    for save in (save_text(SEVEN, drags(SEVEN)[:-1]),  # one bridge short
                 save_text(SEVEN, [*drags(SEVEN), "L3,6,6,6,2"]),  # one bridge too many
                 save_text(EIGHT, drags(EIGHT)),  # another chart
                 save_text(SEVEN, ["S;" + ";".join(drags(SEVEN))])):  # Game > Solve
        files = _final()
        files[hc.save_path(2)] = save.encode()
        got = _outcomes(files)
        assert got["networks_built"] == Outcome.PARTIAL and got["licensed"] == Outcome.PARTIAL, save


def test_missing_licences_a_changed_save_and_a_wrong_plan_fail() -> None:
    files = _final()
    files[hc.save_path(1)] += b"\n"
    assert _outcomes(files)["licensed"] == Outcome.PARTIAL
    files = _final()
    del files[hc.RECORD]
    got = _outcomes(files)
    assert got["licensed"] == got["network_plan"] == Outcome.FAILED and got["networks_built"] == Outcome.SATISFIED
    good = _final()[hc.NETWORK]
    first = good.split(b"\n")[0]
    name = NINE["names"]["C1"].encode()
    for text in (first + b"\n",  # charts missing
                 good.replace(b"XYZ789", b"XYZ788"),  # a wrong licence
                 good.replace(f"| {SEVEN['cost']} |".encode(), f"| {SEVEN['cost'] + 8} |".encode()),  # a wrong cost
                 good.replace(first, first.replace(name + b"-", b"Skye-", 1)),  # a wrong island name
                 good.replace(first, first.replace(b" 2,", b" 1,", 1)),  # a wrong number of bridges
                 good.replace(first, first + b", " + first.split(b" | ")[3].split(b", ")[0]),  # a link twice
                 b"N | licence | cost | links\n" + good):  # a header line
        files = _final()
        files[hc.NETWORK] = text
        assert _outcomes(files)["network_plan"] == Outcome.FAILED, text


def test_the_oracles_solver_register_and_plan_run_in_the_real_python_sqlite_and_bash(tmp_path: Path) -> None:
    (tmp_path / "harbour").mkdir()
    (tmp_path / "register").mkdir()
    (tmp_path / "register" / "ferries.db").write_bytes(fl.register_bytes(CHARTS))
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    answer = tmp_path / "harbour" / "answer.txt"
    out = subprocess.run(["bash", "-c", solver_command(link_islands, NINE["id"], answer_file=str(answer),
                                                       label="ANSWER")],
                         check=True, capture_output=True, text=True, env=env, cwd=tmp_path).stdout
    assert parse_links(out.strip().split(" ", 1)[1]) == chart_links(NINE)
    if shutil.which("sqlite3"):
        out = subprocess.run(["bash", "-c", ho.register_command(2)], check=True, capture_output=True, text=True,
                             env=env).stdout
        assert ho.parse_register(out) == (SEVEN["names"], SEVEN["rate"])
    for number, chart in ((1, NINE), (2, SEVEN)):
        subprocess.run(["bash", "-c", ho.plan_command(plan(chart, number, "ABC234"))], check=True,
                       capture_output=True, env=env)
    rows, problem = fl.parse_plan((tmp_path / "harbour" / "network.txt").read_text())
    assert problem == "" and rows[2][:2] == ("ABC234", SEVEN["cost"])
    assert fl.parse_named_links(rows[2][2]) == fl.named_network(SEVEN)


def test_the_oracle_reads_bridges_on_a_drawn_board() -> None:
    """A board drawn as Bridges draws it at 40 px squares: rings of 48 px, bridges of 5 px lines."""
    screen = np.full((720, 1280, 3), 214, np.uint8)
    board = (151, 300)
    islands = decode(SEVEN["id"])[2]
    yy, xx = np.mgrid[0:720, 0:1280]
    for x, y in islands:
        cx, cy = ho.centre(board, (x, y))
        dist = np.hypot(xx - cx, yy - cy)
        screen[(dist >= 19.5) & (dist <= 24)] = 0
    for a, b, c, d, n in SEVEN["links"]:
        (ax, ay), (bx, by) = ho.centre(board, (a, b)), ho.centre(board, (c, d))
        for offset in ((0,) if n == 1 else (-5, 5)):
            if ay == by:
                screen[ay + offset - 2:ay + offset + 3, ax + 24:bx - 24] = 0
            else:
                screen[ay + 24:by - 24, ax + offset - 2:ax + offset + 3] = 0
    assert hc.find_board(screen, islands) == board
    assert hc.find_board(screen, decode(EIGHT["id"])[2]) is None
    shown = ho.board_links(screen, board, SEVEN["id"])
    assert {k: v for k, v in shown.items() if v} == chart_links(SEVEN)


# ---- the real office on a real X server, through the real guest agent ----------------------------------------

@pytest.mark.xvfb
def test_the_office_shows_charts_as_pixels_and_licenses_with_a_code(xvfb: XvfbDisplay, client: GuestClient,
                                                                   tmp_path: Path) -> None:
    ferries = tmp_path / "ferries"
    ferries.mkdir()
    charts = [NINE, SEVEN]
    conf = {"charts": [{"lines": hc.chart_lines(n, c), "desc": str(c["id"]).split(":", 1)[1], "links": c["links"],
                        "cost": c["cost"]} for n, c in enumerate(charts, 1)],
            "ferries": str(ferries), "layout": hc.layout()}

    def shot() -> np.ndarray:
        return client.screenshot().image

    def press(action: Mapping[str, int]) -> None:
        client.click(action["x"], action["y"])

    def confirm(text: str, status: str) -> None:
        press(ho._box_click(at, hc.ENTRY))
        client.type_text(text)
        press(ho._box_click(at, hc.CONFIRM))
        wait_for(lambda: ho.read_status(shot(), at) == status, 20, what=f"the office saying {status}")
        press(ho._box_click(at, hc.ENTRY))
        client.key("ctrl+a")  # Tk: to the start of the line
        client.key("ctrl+k")  # Tk: delete to its end

    with pixel_app(FIXTURES / "harbour_office.py", conf, tmp_path, xvfb.display) as proc:
        at = list(wait_for(lambda: hc.origin(shot()), 20, what="the office drawn"))
        assert ho.read_chart(shot(), at, 1) is None  # nothing shown before a click
        press(ho._box_click(at, hc.CONFIRM))
        wait_for(lambda: ho.read_status(shot(), at) == "SHOW THE CHART FIRST", 20, what="the refusal before a chart")
        press(ho._box_click(at, hc.SHOW))
        assert wait_for(lambda: ho.read_chart(shot(), at, 1), 20, what="chart 1 read back") == NINE["id"]
        cost = str(NINE["cost"])
        confirm(cost, "NO SAVE CHART-1.SAV YET")
        (ferries / "chart-1.sav").write_text(save_text(SEVEN, drags(SEVEN)))
        confirm(cost, "CHART-1.SAV IS NOT THIS CHART")
        (ferries / "chart-1.sav").write_text(save_text(NINE, drags(NINE)[:-1]))
        confirm(cost, "CHART-1.SAV HAS NOT ITS LINKS")
        (ferries / "chart-1.sav").write_bytes(SAVED)
        confirm(str(NINE["cost"] + 1), "THAT COST DOES NOT FIT CHART 1")
        confirm("12 eur \u00e9\u4e2d", "THE COST IS A WHOLE NUMBER")
        confirm("9" * 200, "THAT IS TOO LONG FOR A COST")
        press(ho._box_click(at, hc.ENTRY))
        client.type_text(f" {cost} ")
        press(ho._box_click(at, hc.CONFIRM))
        line = json.loads(proc.stdout.readline())
        assert line["chart"] == 1 and line["sha256"] == hashlib.sha256(SAVED).hexdigest() and len(line["licence"]) == 6
        wait_for(lambda: ho.read_result(shot(), at, 1) == f"CHART 1: LICENCE {line['licence']}", 20,
                 what="the licence code read back off the screen")
        assert ho.read_status(shot(), at) == "CHART 1 LICENSED" and ho.read_chart(shot(), at, 2) is None
        press(ho._box_click(at, hc.SHOW))
        assert wait_for(lambda: ho.read_chart(shot(), at, 2), 20, what="chart 2") == SEVEN["id"]
