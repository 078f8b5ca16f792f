"""Weave-Spatial-4: how much of one floor's cold (dry, hazard) store area is still free, from a drawn floor plan
and a pallet inventory.

The building's rooms exist only as pixels: a Tk "Floor Plan" window (the desktop account's, fed from a
root-only file that setup deletes once it is drawn) shows one floor at a time, each room to scale with a
dot-matrix label (``pixel_font``: its id and inside size in metres) and its kind as a fill colour. It opens on
Floor 1; the floor asked about is 2 or 3, so only an agent that clicks the floor's button sees its rooms. The
pallets exist only for the shell: a SQLite inventory of thousands of rows (room id, footprint in cm, status),
readable by the workspace account alone, with no table of rooms, floors or kinds. The answer (free share of the
kind's floor area on that floor, in percent) needs the rooms' areas from the plan and the stored pallets'
footprints from a query; the per-room table goes to a CSV the shell writes (CLI), and the fullest of those rooms
is flagged in the viewer, whose record lands in a root-only file (GUI).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.dialogs import json_record
from weavegym.envs.tasks.pixel_font import read_text
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.answers import check_number
from weavegym.evaluators.provenance import Deliverable

APP_DIR = "/usr/local/share/floorplan"
APP = f"{APP_DIR}/floor_plan.py"
PLAN_IN = f"{PRIVATE_DIR}/floor-plan.json"
RECORD = f"{PRIVATE_DIR}/floor-plan-flag.json"
DB_DIR = "/srv/warehouse"
DB = f"{DB_DIR}/inventory.db"
TITLE = "Floor Plan"
SCHEMA = ("CREATE TABLE pallets (id INTEGER PRIMARY KEY, tag TEXT NOT NULL, room TEXT NOT NULL, "
          "length_cm INTEGER NOT NULL, width_cm INTEGER NOT NULL, status TEXT NOT NULL, received TEXT NOT NULL);")

FLOORS = 3
KINDS = ("cold", "dry", "hazard")
NAMES = {"cold": "cold store", "dry": "dry store", "hazard": "hazard store"}
# fill, hatch: what the plan and its legend draw for each kind (public: the legend shows it)
PALETTE = {"cold": ("#8ec5f2", ""), "dry": ("#e3c98f", ""), "hazard": ("#f5e04a", "#c0392b")}
FOOTPRINTS = ((120, 80), (120, 100), (100, 100), (80, 60), (114, 76), (60, 40))  # pallets in the store (cm)
ASKED_PALLETS = ((120, 80), (120, 100), (100, 100), (110, 110), (80, 60))
SHARES = tuple(round(0.2 + 0.06 * i, 2) for i in range(12))  # distinct per floor: the fullest room is clear
LETTERS = "ABCDEFGHJKLMNPRSTUVWYZ"
TOLERANCE = 0.06  # percent: a right answer rounded to one decimal is within 0.05 of the truth

# The viewer's geometry (pixels inside its window): the fixture draws here, the oracle reads and clicks here.
WIDTH, HEIGHT = 840, 590
CANVAS = (10, 50, 820, 440)  # x, y, width, height in the window
PX_PER_M, LABEL_SCALE, TITLE_SCALE = 8, 2, 3
BAY_W, BAY_H, BAY_X0, BAY_Y0, COLUMNS, ROWS = 202, 132, 8, 40, 4, 3
ROOM_DY = 20  # the room's top edge below its label's
TITLE_AT = (8, 8)
LABEL_CHARS = 14
SAMPLE = (5, 5, 12, 12)  # a patch inside every room (rooms are at least 64x40 px): x, y, w, h from its corner
WAIT_TRIES = 15


def layout() -> dict[str, Any]:
    """Where the viewer puts everything, independent of the seed (so none of it says anything secret)."""
    bays = [[BAY_X0 + c * BAY_W, BAY_Y0 + r * BAY_H] for r in range(ROWS) for c in range(COLUMNS)]
    below = CANVAS[1] + CANVAS[3]
    return {"width": WIDTH, "height": HEIGHT, "canvas": list(CANVAS), "px_per_m": PX_PER_M,
            "label_scale": LABEL_SCALE, "title_scale": TITLE_SCALE, "title": list(TITLE_AT), "room_dy": ROOM_DY,
            "hatch_step": 14, "bays": bays, "tabs": [[10 + i * 110, 10, 100, 30] for i in range(FLOORS)],
            "legend": [20, below + 14], "status": [20, below + 56], "flag": [WIDTH - 230, below + 48, 210, 34]}


# -- the building -------------------------------------------------------------------------------------------


def _room_ids(rng: np.random.Generator, count: int) -> list[str]:
    """Ids that say nothing about the floor or the kind (so the inventory's room column cannot either)."""
    ids: set[str] = set()
    while len(ids) < count:
        ids.add(f"{LETTERS[int(rng.integers(len(LETTERS)))]}{int(rng.integers(10, 100))}")
    return [str(i) for i in rng.permutation(sorted(ids))]


def building(rng: np.random.Generator, floor: int, kind: str) -> list[list[dict[str, Any]]]:
    """Floors of rooms {id, w, d, type, share}; the asked floor has two to four rooms of the asked kind."""
    counts = [int(rng.integers(7, COLUMNS * ROWS - 1)) for _ in range(FLOORS)]
    ids = iter(_room_ids(rng, sum(counts)))
    floors = []
    for number, count in enumerate(counts, start=1):
        kinds = [KINDS[int(rng.integers(len(KINDS)))] for _ in range(count)]
        if number == floor:
            asked = int(rng.integers(2, 5))
            others = [k for k in KINDS if k != kind]
            kinds = [kind] * asked + [others[int(rng.integers(2))] for _ in range(count - asked)]
            kinds = [str(k) for k in rng.permutation(kinds)]
        shares = rng.choice(SHARES, size=count, replace=False)
        floors.append([{"id": next(ids), "w": float(rng.integers(16, 41)) / 2, "d": float(rng.integers(10, 25)) / 2,
                        "type": k, "share": float(s)} for k, s in zip(kinds, shares, strict=True)])
    return floors


def _area_cm2(room: Mapping[str, Any]) -> int:
    return round(room["w"] * 100) * round(room["d"] * 100)


def inventory(rng: np.random.Generator, floors: list[list[dict[str, Any]]]) -> tuple[list[tuple], dict[str, int]]:
    """The pallet rows (shuffled) and, per room, the area its stored pallets cover (cm²).

    Each room is filled with stored pallets to its share of the floor; dispatched pallets (still listed, no
    longer there) and the receiving dock's pallets are noise a query has to leave out.
    """
    rows: list[tuple[str, int, int, str]] = []
    stored: dict[str, int] = {}
    for room in (r for rooms in floors for r in rooms):
        used, goal = 0, room["share"] * _area_cm2(room)
        while used < goal:
            length, width = FOOTPRINTS[int(rng.integers(len(FOOTPRINTS)))]
            rows.append((room["id"], length, width, "stored"))
            used += length * width
        stored[room["id"]] = used
        for _ in range(int(rng.integers(10, 40))):
            length, width = FOOTPRINTS[int(rng.integers(len(FOOTPRINTS)))]
            rows.append((room["id"], length, width, "dispatched"))
    for _ in range(int(rng.integers(60, 120))):
        length, width = FOOTPRINTS[int(rng.integers(len(FOOTPRINTS)))]
        rows.append(("DOCK", length, width, "stored"))
    order = rng.permutation(len(rows))
    tags = rng.choice(np.arange(100000, 1000000), size=len(rows), replace=False)
    out = []
    for number, index in enumerate(order, start=1):
        room, length, width, status = rows[int(index)]
        day = f"2026-{int(rng.integers(6, 12)):02d}-{int(rng.integers(1, 29)):02d}"
        out.append((number, f"PL-{int(tags[number - 1])}", room, length, width, status, day))
    return out, stored


def capacity(rooms: Sequence[Mapping[str, Any]], stored: Mapping[str, int], pallet: tuple[int, int]
             ) -> list[dict[str, Any]]:
    """The per-room table the CSV must hold, in exact cm² arithmetic (areas as m² with two decimals)."""
    table = []
    for room in sorted(rooms, key=lambda r: r["id"]):
        area, used = _area_cm2(room), stored[room["id"]]
        table.append({"room": room["id"], "area_m2": area / 1e4, "stored_m2": used / 1e4,
                      "free_m2": (area - used) / 1e4, "pallets": (area - used) // (pallet[0] * pallet[1])})
    return table


def free_percent(table: Sequence[Mapping[str, Any]]) -> float:
    area = sum(row["area_m2"] for row in table)
    return 100.0 * sum(row["free_m2"] for row in table) / area


def fullest(table: Sequence[Mapping[str, Any]]) -> str:
    return max(table, key=lambda row: row["stored_m2"] / row["area_m2"])["room"]


# -- setup --------------------------------------------------------------------------------------------------


def plan(rng: np.random.Generator) -> dict[str, Any]:
    """Everything a seed decides, guest-free (setup and the tests share it): the question, the building, the
    inventory's rows and the truth's table for the asked rooms."""
    floor = int(rng.integers(2, FLOORS + 1))
    kind = KINDS[int(rng.integers(len(KINDS)))]
    pallet = ASKED_PALLETS[int(rng.integers(len(ASKED_PALLETS)))]
    floors = building(rng, floor, kind)
    rows, stored = inventory(rng, floors)
    asked = [r for r in floors[floor - 1] if r["type"] == kind]
    for room in asked:  # a free area of exactly n pallets would leave float division a coin toss at n
        if (_area_cm2(room) - stored[room["id"]]) % (pallet[0] * pallet[1]) == 0:
            rows.append((len(rows) + 1, f"PL-{int(rng.integers(100000, 1000000))}", room["id"], 60, 40, "stored",
                         "2026-11-30"))
            stored[room["id"]] += 60 * 40
    table = capacity(asked, stored, pallet)
    return {"floor": floor, "kind": kind, "pallet": pallet, "floors": floors, "rows": rows, "stored": stored,
            "table": table}


def setup(ctx: SetupContext) -> Prepared:
    world = plan(ctx.rng)
    floor, kind, pallet, floors, table = (world[k] for k in ("floor", "kind", "pallet", "floors", "table"))
    ctx.run(["install", "-d", "-m", "0700", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, DB_DIR])
    # The workspace account's alone: a desktop terminal cannot read a single pallet.
    ctx.write_file(DB, database_bytes(SCHEMA, {"pallets": world["rows"]}), owner=WORKSPACE_USER, mode=0o600)
    window = _open_viewer(ctx, floors)
    targets = screen_targets(window)
    csv_path = f"{HOME}/floor-{floor}-capacity.csv"
    return Prepared(
        params={"floor": floor, "kind": NAMES[kind], "pallet": f"{pallet[0]}x{pallet[1]}", "csv": csv_path},
        truth={"floor": floor, "kind": kind, "pallet": list(pallet), "csv": csv_path, "window": window,
               "targets": targets, "floors": floors, "table": table, "answer": round(free_percent(table), 4),
               "fullest": fullest(table)})


def screen_targets(window: Sequence[int]) -> dict[str, Any]:
    """Where on the screen the oracle reads and clicks, from the viewer window's position alone."""
    x, y = window[0], window[1]
    lay = layout()
    cx, cy = x + CANVAS[0], y + CANVAS[1]
    return {"tabs": [_center(x, y, box) for box in lay["tabs"]], "flag": _center(x, y, lay["flag"]),
            "title": [cx + TITLE_AT[0], cy + TITLE_AT[1]],
            "labels": [[cx + bx, cy + by] for bx, by in lay["bays"]],
            "samples": [[cx + bx + SAMPLE[0], cy + by + ROOM_DY + SAMPLE[1], SAMPLE[2], SAMPLE[3]]
                        for bx, by in lay["bays"]],
            "rooms": [[cx + bx + 30, cy + by + ROOM_DY + 20] for bx, by in lay["bays"]]}


def _center(x: int, y: int, box: Sequence[int]) -> list[int]:
    return [x + box[0] + box[2] // 2, y + box[1] + box[3] // 2]


def _open_viewer(ctx: SetupContext, floors: list[list[dict[str, Any]]]) -> list[int]:
    """Start the viewer with the building on its stdin, wait until Floor 1 is drawn, then delete the input."""
    lay = layout()
    shown = {"floors": [[{k: r[k] for k in ("id", "w", "d", "type")} for r in rooms] for rooms in floors],
             "layout": lay, "palette": {k: list(v) for k, v in PALETTE.items()}, "names": NAMES}
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/floor_plan.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    ctx.write_file(PLAN_IN, json.dumps(shown), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {PLAN_IN} > {RECORD}", name="floorplan")
    window = ctx.wait_window(f"^{TITLE}$").geometry
    targets = screen_targets(window)
    title, label = targets["title"], targets["labels"][len(floors[0]) - 1]
    try:  # mapped is not drawn (TCG): wait for the title and the last room's label to read back
        wait_for(lambda: _drawn(ctx.client.screenshot().image, title, label), 120, what="the Floor Plan drawn",
                 max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", PLAN_IN])  # the viewer has read it: the rooms now live only on screen
    return window


def _drawn(image: np.ndarray, title: Sequence[int], label: Sequence[int]) -> bool:
    return (shown_floor(image, title) == 1
            and parse_label(read_text(image, label[0], label[1], LABEL_SCALE, LABEL_CHARS)) is not None)


# -- reading the plan (the oracle's eyes) -------------------------------------------------------------------

LABEL = re.compile(r"^([A-Z]\d{2}) (\d{1,2}\.\d)X(\d{1,2}\.\d)$")


def parse_label(text: str) -> tuple[str, float, float] | None:
    """(id, width, depth) of a room label such as "K42 12.5X8.0"; None for anything else (an empty bay)."""
    match = LABEL.match(text.strip())
    return None if match is None else (match[1], float(match[2]), float(match[3]))


def shown_floor(image: np.ndarray, title: Sequence[int]) -> int | None:
    match = re.fullmatch(r"FLOOR (\d)", read_text(image, title[0], title[1], TITLE_SCALE, 8))
    return None if match is None else int(match[1])


def _hex(colour: str) -> np.ndarray:
    return np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=int)


def room_kind(image: np.ndarray, box: Sequence[int]) -> str | None:
    """The kind whose fill colour covers most of the patch (a hazard room's hatch lines are outvoted)."""
    x, y, w, h = box
    patch = image[y:y + h, x:x + w, :3].astype(int).reshape(-1, 3)
    if patch.size == 0:
        return None
    votes = {kind: int((np.abs(patch - _hex(fill)).sum(axis=1) < 40).sum()) for kind, (fill, _h) in PALETTE.items()}
    best = max(votes, key=lambda k: votes[k])
    return best if votes[best] * 2 > len(patch) else None


def read_plan(image: np.ndarray, targets: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every room the shown floor's plan labels: {id, w, d, type, bay}."""
    rooms = []
    for bay, (label, sample) in enumerate(zip(targets["labels"], targets["samples"], strict=True)):
        parsed = parse_label(read_text(image, label[0], label[1], LABEL_SCALE, LABEL_CHARS))
        if parsed is None:
            continue
        rooms.append({"id": parsed[0], "w": parsed[1], "d": parsed[2], "type": room_kind(image, sample), "bay": bay})
    return rooms


# -- the checker --------------------------------------------------------------------------------------------


def check_answer(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    return check_number(probe.episode.answer, truth["answer"], abs_tol=TOLERANCE, unit="%")


COLUMNS_CSV = ("room", "area_m2", "stored_m2", "free_m2", "pallets")


def parse_table(text: str) -> dict[str, list[str]]:
    """{room: its other fields} of the CSV's rows that start with a room id (a header line is skipped)."""
    found = {}
    for row in csv.reader(io.StringIO(text)):
        cells = [c.strip() for c in row]
        if cells and re.fullmatch(r"[A-Z]\d{2}", cells[0]):
            found[cells[0]] = cells[1:]
    return found


def _row_ok(cells: list[str], want: Mapping[str, Any]) -> bool:
    try:
        numbers = [float(c) for c in cells[:4]]
    except ValueError:
        return False
    if len(numbers) < 4:
        return False
    close = all(abs(n - want[k]) <= 0.011 for n, k in zip(numbers[:3], COLUMNS_CSV[1:4], strict=True))
    return close and numbers[3] == want["pallets"]


def check_table(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(truth["csv"])
    if text is None:
        return Verdict.failed(f"{truth['csv']} does not exist")
    found, want = parse_table(text), {row["room"]: row for row in truth["table"]}
    right = sorted(room for room, row in want.items() if room in found and _row_ok(found[room], row))
    wrong, extra = sorted(set(want) - set(right)), sorted(set(found) - set(want))
    evidence = (f"{truth['csv']} has right rows for {right}; missing or wrong: {wrong}; rooms that do not belong: "
                f"{extra}")
    if not wrong and not extra:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if right else Verdict.failed(evidence)


def flag_record(probe: Probe) -> dict[str, Any] | None:
    return json_record(probe, RECORD)


def check_flag(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = flag_record(probe)
    if found is None:
        return Verdict.failed("no room was flagged in the Floor Plan")
    ok = found.get("floor") == truth["floor"] and found.get("room") == truth["fullest"]
    return Verdict.check(ok, f"the Floor Plan flagged floor {found.get('floor')!r} room {found.get('room')!r}; "
                             f"expected floor {truth['floor']} room {truth['fullest']}")


# -- the oracle ---------------------------------------------------------------------------------------------


def capacity_sql(rooms: Sequence[Mapping[str, Any]], pallet: Sequence[int]) -> str:
    """The query the shell runs: the rooms read off the plan as a VALUES list, joined with the stored pallets."""
    values = ", ".join(f"('{r['id']}', {round(r['w'] * 100) * round(r['d'] * 100)})" for r in rooms)
    used = "IFNULL(SUM(p.length_cm * p.width_cm), 0)"
    return (f"WITH rooms(room, area) AS (VALUES {values}) "
            f"SELECT r.room, printf('%.4f', r.area / 1e4) AS area_m2, printf('%.4f', {used} / 1e4) AS stored_m2, "
            f"printf('%.4f', (r.area - {used}) / 1e4) AS free_m2, (r.area - {used}) / {pallet[0] * pallet[1]} "
            "AS pallets FROM rooms r LEFT JOIN pallets p ON p.room = r.room AND p.status = 'stored' "
            "GROUP BY r.room ORDER BY r.room;")


ROW = re.compile(r"^([A-Z]\d{2}),(\d+\.\d+),(\d+\.\d+),(-?\d+\.\d+),(-?\d+)\s*$", re.M)


def parse_capacity(terminal: str) -> list[dict[str, Any]]:
    """The rows of the capacity query's CSV as the terminal shows them."""
    return [{"room": m[1], "area_m2": float(m[2]), "stored_m2": float(m[3]), "free_m2": float(m[4]),
             "pallets": int(m[5])} for m in ROW.finditer(terminal.replace("\r", ""))]


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Floor button (GUI), read the plan off the screen, query the inventory (CLI), flag the fullest (GUI)."""
    floor, kind, targets = ctx.truth["floor"], ctx.truth["kind"], ctx.truth["targets"]
    tab = targets["tabs"][floor - 1]
    yield {"kind": "click", "x": tab[0], "y": tab[1]}
    for _ in range(WAIT_TRIES):  # the click's redraw may trail the observation under TCG
        if shown_floor(ctx.obs["screen"], targets["title"]) == floor:
            break
        yield {"kind": "wait", "seconds": 1}
    rooms = [r for r in read_plan(ctx.obs["screen"], targets) if r["type"] == kind]
    csv_path = ctx.truth["csv"]
    header = ",".join(COLUMNS_CSV)
    query = capacity_sql(rooms, ctx.truth["pallet"]) if rooms else "SELECT 1 WHERE 0;"
    yield {"kind": "shell", "command": f"{{ echo {header}; sqlite3 -csv {DB} \"{query}\"; }} | tee {csv_path}"}
    table = parse_capacity(ctx.obs.get("terminal", ""))
    if table:
        room = next(r for r in rooms if r["id"] == fullest(table))
        point = targets["rooms"][room["bay"]]
        yield {"kind": "click", "x": point[0], "y": point[1]}
        yield {"kind": "click", "x": targets["flag"][0], "y": targets["flag"][1]}
        # The viewer writes its record as it exits; pgrep sees every account's processes ([t]: not this sh).
        yield {"kind": "shell", "command": "timeout 60 sh -c 'while pgrep -f \"floor_pla[n]\" >/dev/null; do "
                                           "sleep 0.2; done'", "timeout": 90}
        yield {"kind": "done", "answer": f"{free_percent(table):.1f} %"}
    else:
        yield {"kind": "done", "answer": "no stored pallets found"}


TASK = Task(
    id="Weave-Spatial-4",
    title="Free store area on one floor of a warehouse, from its floor plan and its pallet inventory",
    instruction=(
        "The open 'Floor Plan' window shows the warehouse one floor at a time: every room is drawn to scale, "
        "labelled with its id and its inside width X depth in metres, and coloured by its kind (the legend says "
        "which colour is which). The pallet inventory is the SQLite database /srv/warehouse/inventory.db: table "
        "pallets has one row per pallet with its room and its footprint (length_cm, width_cm); only pallets with "
        "status 'stored' take up floor space. Consider the {kind} rooms on Floor {floor}. 1) Write {csv} with the "
        "header room,area_m2,stored_m2,free_m2,pallets and one line per such room: its floor area, the area its "
        "stored pallets cover, the rest (all in square metres), and how many {pallet} cm pallets that free area "
        "would hold (free area divided by that pallet's footprint, rounded down). 2) In the Floor Plan, on Floor "
        "{floor}, click the fullest of these rooms (the largest share of its floor area covered by stored "
        "pallets) and press 'Flag fullest room'. 3) Finish with done, answering what percentage of these rooms' "
        "total floor area is still free, to one decimal (for example: 42.7 %)."),
    channels=Channels(
        gui="switch the Floor Plan to the floor, read the rooms' ids, sizes and kinds off it, and flag the fullest",
        cli="sum the stored pallets' footprints per room in the inventory and write the capacity table",
        why_both="the rooms, their sizes and kinds exist only as pixels of the plan (the asked floor only after a "
                 "click), while the pallets are in a database only the shell's account can read"),
    setup=setup,
    clauses=(
        Clause("free_share_answered", "the answer is the free share of the rooms' floor area, in percent",
               check_answer, weight=2.0, critical=True),
        Clause("capacity_table", "the CSV has the right row for every room of the kind on the floor", check_table),
        Clause("fullest_flagged", "the Floor Plan flagged the fullest of those rooms", check_flag, weight=2.0,
               critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the Floor Plan's flag record (captured by setup)"),
        Deliverable("{csv}", "cli", description="~/floor-<N>-capacity.csv"),
    ),
    withheld=("floors", "table", "answer", "fullest"),
    oracle=oracle,
    apps=("python3-tk", "sqlite3"),
    max_steps=40,
    time_budget_s=900.0,
)
