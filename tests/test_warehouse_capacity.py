"""Weave-Spatial-4 without a VM: seeds, the plan read back off a rendered screen and off the real viewer on Xvfb,
the query on the real database, the clauses."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.core.trajectory import EpisodeEnd
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.pixel_font import INK, layout_text
from weavegym.envs.tasks.spatial import warehouse_capacity as wc
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.xvfb import XvfbDisplay

ORIGIN = (100, 60)  # where the synthetic screen puts the viewer's window


def _world(seed: int) -> dict[str, Any]:
    return wc.plan(np.random.default_rng(seed))


def _targets() -> dict[str, Any]:
    cx, cy = ORIGIN[0] + wc.CANVAS[0], ORIGIN[1] + wc.CANVAS[1]
    bays = wc.layout()["bays"]
    return {"title": [cx + wc.TITLE_AT[0], cy + wc.TITLE_AT[1]], "labels": [[cx + x, cy + y] for x, y in bays],
            "samples": [[cx + x + wc.SAMPLE[0], cy + y + wc.ROOM_DY + wc.SAMPLE[1], wc.SAMPLE[2], wc.SAMPLE[3]]
                        for x, y in bays]}


def _fill(image: np.ndarray, box: tuple[int, int, int, int], colour: Any) -> None:
    x0, y0, x1, y1 = box
    image[y0:y1, x0:x1] = colour


def _screen(rooms: list[Mapping[str, Any]], floor: int) -> np.ndarray:
    """The viewer's canvas as the fixture draws it (labels, fills, hazard hatch, outlines) on a 1280x720 frame."""
    image = np.zeros((720, 1280, 3), dtype=np.uint8)
    cx, cy = ORIGIN[0] + wc.CANVAS[0], ORIGIN[1] + wc.CANVAS[1]
    _fill(image, (cx, cy, cx + wc.CANVAS[2], cy + wc.CANVAS[3]), 255)
    for box in layout_text(f"FLOOR {floor}", cx + wc.TITLE_AT[0], cy + wc.TITLE_AT[1], wc.TITLE_SCALE):
        _fill(image, box, INK)
    for room, (bx, by) in zip(rooms, wc.layout()["bays"], strict=False):
        x, y = cx + bx, cy + by
        for box in layout_text(f"{room['id']} {room['w']:.1f}X{room['d']:.1f}", x, y, wc.LABEL_SCALE):
            _fill(image, box, INK)
        x0, y0 = x, y + wc.ROOM_DY
        x1, y1 = x0 + round(room["w"] * wc.PX_PER_M), y0 + round(room["d"] * wc.PX_PER_M)
        fill, hatch = wc.PALETTE[room["type"]]
        _fill(image, (x0, y0, x1, y1), wc._hex(fill))
        if hatch:  # diagonals two pixels wide, as the Tk lines are
            for yy in range(y0, y1):
                for xx in range(x0, x1):
                    if (xx - x0 + yy - y0) % 14 in (0, 1):
                        image[yy, xx] = wc._hex(hatch)
        image[y0:y0 + 2, x0:x1] = image[y1 - 2:y1, x0:x1] = 32
        image[y0:y1, x0:x0 + 2] = image[y0:y1, x1 - 2:x1] = 32
    return image


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_the_plan_reads_back_exactly_from_the_screen(seed: int) -> None:
    world = _world(seed)
    for number, rooms in enumerate(world["floors"], start=1):
        image = _screen(rooms, number)
        assert wc.shown_floor(image, _targets()["title"]) == number
        read = wc.read_plan(image, _targets())
        assert [{k: r[k] for k in ("id", "w", "d", "type")} for r in read] == [
            {k: r[k] for k in ("id", "w", "d", "type")} for r in rooms]
        assert [r["bay"] for r in read] == list(range(len(rooms)))


def test_an_empty_or_covered_bay_reads_as_no_room() -> None:
    assert wc.parse_label("") is None and wc.parse_label("K4? 12.5X8.0") is None
    assert wc.parse_label("K42 12.5X8.0") == ("K42", 12.5, 8.0)
    assert wc.room_kind(np.zeros((40, 40, 3), dtype=np.uint8), [5, 5, 12, 12]) is None


def test_seeds_vary_the_question_the_building_and_the_answer() -> None:
    worlds = [_world(seed) for seed in range(12)]
    assert len({(w["floor"], w["kind"], w["pallet"]) for w in worlds}) >= 8
    assert {w["floor"] for w in worlds} == {2, 3}  # never the floor the viewer opens on
    assert len({round(wc.free_percent(w["table"]), 3) for w in worlds}) == 12
    for w in worlds:
        assert 2 <= len(w["table"]) <= 4
        assert len(w["rows"]) > 1500


def test_the_fullest_room_leads_by_more_than_one_pallet_could_shift() -> None:
    for seed in range(40):
        table = _world(seed)["table"]
        shares = sorted((row["stored_m2"] / row["area_m2"] for row in table), reverse=True)
        assert shares[0] - shares[1] > 0.03, seed


def test_the_ids_are_unique_across_the_building_and_say_nothing_about_the_floor() -> None:
    for seed in range(10):
        ids = [r["id"] for rooms in _world(seed)["floors"] for r in rooms]
        assert len(ids) == len(set(ids))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_oracles_query_on_the_real_database_gives_the_truth(seed: int, tmp_path: Any) -> None:
    world = _world(seed)
    path = tmp_path / "inventory.db"
    path.write_bytes(database_bytes(wc.SCHEMA, {"pallets": world["rows"]}))
    rooms = [r for r in world["floors"][world["floor"] - 1] if r["type"] == world["kind"]]
    con = sqlite3.connect(path)
    rows = con.execute(wc.capacity_sql(rooms, world["pallet"])).fetchall()
    terminal = "room,area_m2,stored_m2,free_m2,pallets\r\n" + "".join(",".join(map(str, r)) + "\r\n" for r in rows)
    parsed = wc.parse_capacity(terminal)
    assert [r["room"] for r in parsed] == [r["room"] for r in world["table"]]
    for got, want in zip(parsed, world["table"], strict=True):
        assert got["pallets"] == want["pallets"]
        assert all(abs(got[k] - want[k]) < 1e-9 for k in ("area_m2", "stored_m2", "free_m2"))
    assert abs(wc.free_percent(parsed) - wc.free_percent(world["table"])) < 1e-9
    assert wc.fullest(parsed) == wc.fullest(world["table"])
    # the dispatched pallets and the dock are noise: counting them changes the answer
    everything = sum(r[3] * r[4] for r in world["rows"] if r[2] == rooms[0]["id"])
    assert everything > world["stored"][rooms[0]["id"]]


class _Probe:
    """The two reads the clauses make, from a dict of file texts; the episode's end as given."""

    def __init__(self, files: Mapping[str, str], answer: str = "") -> None:
        self.files, self.episode = files, EpisodeEnd(kind="done", answer=answer)

    def read_text(self, path: str) -> str | None:
        return self.files.get(path)


def _truth(seed: int = 0) -> dict[str, Any]:
    world = _world(seed)
    return {"floor": world["floor"], "csv": f"/home/user/floor-{world['floor']}-capacity.csv", "table": world["table"],
            "answer": round(wc.free_percent(world["table"]), 4), "fullest": wc.fullest(world["table"])}


def test_the_answer_needs_the_number_within_tolerance_and_a_percent() -> None:
    truth = _truth()
    value = truth["answer"]
    ok = [f"{value:.1f} %", f"<answer>{value:.1f}%</answer>", f"{value:.2f} percent", f"{value:.1f}"]
    for answer in ok:
        assert wc.check_answer(_Probe({}, answer), truth).outcome == "satisfied", answer
    for answer in (f"{value + 0.2:.1f} %", f"{value:.1f} s", "about half", f"{100 - value:.1f} %"):
        assert wc.check_answer(_Probe({}, answer), truth).outcome == "failed", answer


def _csv(table: list[Mapping[str, Any]]) -> str:
    lines = ["room,area_m2,stored_m2,free_m2,pallets"]
    lines += [f"{r['room']},{r['area_m2']:.2f},{r['stored_m2']:.2f},{r['free_m2']:.2f},{r['pallets']}" for r in table]
    return "\n".join(lines) + "\n"


def test_the_capacity_table_needs_every_room_right_and_no_other() -> None:
    truth = _truth(1)
    table = truth["table"]
    assert wc.check_table(_Probe({truth["csv"]: _csv(table)}), truth).outcome == "satisfied"
    off = [dict(table[0], pallets=table[0]["pallets"] + 1), *table[1:]]
    assert wc.check_table(_Probe({truth["csv"]: _csv(off)}), truth).outcome == "partial"
    extra = [*table, {"room": "Q11", "area_m2": 1.0, "stored_m2": 0.0, "free_m2": 1.0, "pallets": 1}]
    assert wc.check_table(_Probe({truth["csv"]: _csv(extra)}), truth).outcome == "partial"
    assert wc.check_table(_Probe({truth["csv"]: "room,area_m2\n"}), truth).outcome == "failed"
    assert wc.check_table(_Probe({}), truth).outcome == "failed"


def test_the_flag_must_name_the_asked_floor_and_its_fullest_room() -> None:
    truth = _truth(2)
    record = f'{{"floor": {truth["floor"]}, "room": "{truth["fullest"]}"}}\n'
    assert wc.check_flag(_Probe({wc.RECORD: record}), truth).outcome == "satisfied"
    wrong_floor = f'{{"floor": 1, "room": "{truth["fullest"]}"}}\n'
    assert wc.check_flag(_Probe({wc.RECORD: wrong_floor}), truth).outcome == "failed"
    assert wc.check_flag(_Probe({wc.RECORD: "garbage"}), truth).outcome == "failed"
    assert wc.check_flag(_Probe({}), truth).outcome == "failed"


def test_the_oracle_is_denied_everything_only_one_channel_shows() -> None:
    truth = {"floors": [], "table": [], "answer": 1.0, "fullest": "A10", "floor": 2, "targets": {}}
    assert set(wc.TASK.oracle_truth(truth)) == {"floor", "targets"}


# -- the real viewer on a real X server, read and clicked through the real guest agent --------------------


def _rooms(read: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{k: r[k] for k in ("id", "w", "d", "type")} for r in read]


@pytest.mark.xvfb
def test_the_viewer_draws_what_the_oracle_reads_and_records_the_flag(xvfb: XvfbDisplay, client: GuestClient,
                                                                     tmp_path: Path) -> None:
    world = _world(3)
    shutil.copy(Path(wc.__file__).parent / "fixtures" / "floor_plan.py", tmp_path / "floor_plan.py")
    shutil.copy(Path(pixel_font.__file__), tmp_path / "pixel_font.py")
    shown = {"floors": [_rooms(rooms) for rooms in world["floors"]], "layout": wc.layout(),
             "palette": {k: list(v) for k, v in wc.PALETTE.items()}, "names": wc.NAMES}
    proc = subprocess.Popen([sys.executable, str(tmp_path / "floor_plan.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, "DISPLAY": xvfb.display})
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(shown).encode())
        proc.stdin.close()
        window = wait_for(lambda: next((w for w in client.list_windows()[0] if w.title == wc.TITLE), None), 20,
                          what="the Floor Plan mapped")
        targets = wc.screen_targets(window.geometry)
        floor = world["floor"]

        def reads(number: int) -> bool:
            image = client.screenshot().image
            return (wc.shown_floor(image, targets["title"]) == number
                    and _rooms(wc.read_plan(image, targets)) == _rooms(world["floors"][number - 1]))

        wait_for(lambda: reads(1), 20, what="Floor 1 read back exactly")
        client.click(*targets["tabs"][floor - 1])
        wait_for(lambda: reads(floor), 20, what=f"Floor {floor} read back exactly after its button")
        fullest = wc.fullest(world["table"])
        bay = next(i for i, r in enumerate(world["floors"][floor - 1]) if r["id"] == fullest)
        client.click(*targets["rooms"][bay])
        client.click(*targets["flag"])
        assert json.loads(proc.stdout.readline()) == {"floor": floor, "room": fullest}
        assert proc.wait(20) == 0
    finally:
        proc.kill()
        proc.wait()
