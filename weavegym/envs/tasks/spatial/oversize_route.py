"""Weave-Spatial-5: route an oversize load from the depot to its site around today's closures, or say what cuts
the site off.

The truck (loaded height, gross weight, depot, site) is in a dispatch order and the road network (segments
with lengths, overpasses with clearances, bridges with weight limits) is a SQLite database, both in folders
only the workspace account may open: a terminal on the desktop cannot read either. Today's closures and
headroom cuts exist only as pixels: the "Closures" tab of a Tk "Dispatch Map" window (the desktop account's,
fed from a root-only file that setup deletes once it is drawn) lists them in dot-matrix text, and only after
the tab is clicked. The shortest legal route needs both: the database's own answer runs over a road that is
closed today, and the answer that honours the closures but not the structures passes under a bridge too low
or over one too weak.

Feasible seeds: the shell writes the route file (the workspace account's) and the window's form records the
dispatch (route and length) in a root-only file. Infeasible seeds (a third): the site's two roads are one
closed today and one under a structure the load cannot pass; the right outcome is no route file, a report of
the cut from the shell, "Cannot route" in the window with the blocking ids, and a ``fail`` naming them.
"""

from __future__ import annotations

import inspect
import json
import re
import textwrap
from collections.abc import Iterator, Mapping
from typing import Any

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import (
    CANDIDATES,
    CAUSES,
    FEASIBLE,
    Abstention,
    ActionLike,
    Channels,
    OracleContext,
    Prepared,
    Task,
)
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.dialogs import json_record
from weavegym.envs.tasks.spatial import road_network as rn
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

APP_DIR = "/usr/local/share/dispatchmap"
APP = f"{APP_DIR}/dispatch_map.py"
SHOWN_IN = f"{PRIVATE_DIR}/dispatch-map.json"
RECORD = f"{PRIVATE_DIR}/dispatch-record.json"
DB_DIR = "/srv/roads"
DB = f"{DB_DIR}/network.db"
ORDER_DIR = "/srv/dispatch"
TITLE = "Dispatch Map"
CLOSURES_TITLE = "CLOSURES TODAY"
WAIT_TRIES = 20


def setup(ctx: SetupContext) -> Prepared:
    world = rn.plan(ctx.rng, ctx.feasible)
    truck = world["truck"]
    order = truck["order"]
    files = {"order_file": f"{ORDER_DIR}/order-{order}.txt", "route_file": f"{HOME}/route-{order}.txt",
             "blocked_file": f"{HOME}/blocked-{order}.txt"}
    for folder in (DB_DIR, ORDER_DIR):  # the workspace account's alone: a desktop terminal reads neither
        ctx.run(["install", "-d", "-m", "0700", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, folder])
    tables = {"junctions": world["junctions"], "segments": world["segments"], "structures": world["structures"]}
    ctx.write_file(DB, database_bytes(rn.SCHEMA, tables), owner=WORKSPACE_USER, mode=0o600)
    ctx.write_file(files["order_file"], world["order_text"], owner=WORKSPACE_USER, mode=0o600)
    window = _open_map(ctx, world)
    return Prepared(
        params={"order": order, **files},
        truth={"order": order, **files, "window": window, "targets": rn.screen_targets(window),
               "route": world["route"], "total": world["total"], "closed": world["closed"],
               "headroom": world["headroom"], "truck": truck, "cut": world["cut"], CANDIDATES: world["candidates"],
               FEASIBLE: ctx.feasible, CAUSES: rn.causes(world)})


def _open_map(ctx: SetupContext, world: Mapping[str, Any]) -> list[int]:
    """Start the window with the map and the closures on its stdin; once the map is drawn, delete the input."""
    shown = {"junctions": rn.map_points(world["junctions"]), "segments": [list(s[:3]) for s in world["segments"]],
             "closures": world["rows"], "layout": rn.layout()}
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/dispatch_map.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    ctx.write_file(SHOWN_IN, json.dumps(shown), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {SHOWN_IN} > {RECORD}", name="dispatchmap")
    window = ctx.wait_window(f"^{TITLE}$").geometry
    targets = rn.screen_targets(window)
    try:  # mapped is not drawn (TCG); the map is drawn after the input was read from stdin
        wait_for(lambda: rn.shown_title(ctx.client.screenshot().image, targets) == "ROAD MAP", 120,
                 what="the Dispatch Map drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", SHOWN_IN])  # the window has read it: today's closures now live only on screen
    return window


# -- the checker --------------------------------------------------------------------------------------------------

SEGMENT_ID = re.compile(r"(?<![A-Z0-9])R\d{3}(?![0-9])")
ANY_ID = re.compile(r"(?<![A-Z0-9])(?:BR\d{2}|R\d{3})(?![0-9])")
TOTAL = re.compile(r"^\s*TOTAL\D*?(\d+)", re.M | re.I)


def read_route(text: str) -> tuple[list[str], int | None]:
    """The segment ids a route file lists, in order, and its TOTAL line's metres (None without one)."""
    route = [sid for line in text.upper().splitlines() if not line.strip().startswith("TOTAL")
             for sid in SEGMENT_ID.findall(line)]
    total = TOTAL.search(text)
    return route, int(total[1]) if total else None


def _route_evidence(route: list[str], total: Any, truth: Mapping[str, Any]) -> str:
    closed = sorted(set(route) & set(truth["closed"]))
    return (f"{' '.join(route) or 'no segment'} ({total} m); expected {' '.join(truth['route'])} ({truth['total']} m)"
            + (f"; it runs over {closed}, closed today" if closed else ""))


def check_route_file(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(truth["route_file"])
    if text is None:
        return Verdict.failed(f"{truth['route_file']} does not exist")
    route, total = read_route(text)
    evidence = f"{truth['route_file']} lists " + _route_evidence(route, total, truth)
    return Verdict.check(route == truth["route"], evidence)


def check_route_total(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(truth["route_file"])
    if text is None:
        return Verdict.failed(f"{truth['route_file']} does not exist")
    _route, total = read_route(text)
    return Verdict.check(total == truth["total"], f"{truth['route_file']} says TOTAL {total}; the shortest legal "
                                                  f"route is {truth['total']} m")


def check_dispatched(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = json_record(probe, RECORD)
    if found is None:
        return Verdict.failed("nothing was recorded in the Dispatch Map")
    if found.get("action") != "dispatch":
        return Verdict.failed(f"the Dispatch Map recorded {found.get('action')!r}, not a dispatch")
    route = [str(s) for s in found.get("route", [])] if isinstance(found.get("route"), list) else []
    ok = route == truth["route"] and found.get("length_m") == truth["total"]
    return Verdict.check(ok, "the Dispatch Map dispatched " + _route_evidence(route, found.get("length_m"), truth))


def _names_the_cut(named: set[str], truth: Mapping[str, Any], where: str) -> Verdict:
    """Satisfied when ``named`` holds the closed link and the structure (or its link), and nothing else."""
    cut, causes = truth["cut"], set(truth[CAUSES])
    named &= set(truth[CANDIDATES])
    closed, link = cut["closed"] in named, cut["structure"] in named or cut["link"] in named
    extra = sorted(named - causes)
    evidence = (f"{where} names {sorted(named)}; expected {cut['closed']} (closed) and {cut['structure']} or "
                f"{cut['link']} (the road under or over it)" + (f"; {extra} do not cut the site off" if extra else ""))
    if closed and link:
        return Verdict.partial(evidence) if extra else Verdict.satisfied(evidence)
    return Verdict.failed(evidence)


def check_cut_recorded(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = json_record(probe, RECORD)
    if found is None:
        return Verdict.failed("nothing was recorded in the Dispatch Map")
    if found.get("action") != "cannot_route":
        return Verdict.failed(f"the Dispatch Map recorded {found.get('action')!r}, not 'Cannot route'")
    named = {str(i) for i in found.get("ids", [])} if isinstance(found.get("ids"), list) else set()
    return _names_the_cut(named, truth, "the Dispatch Map's 'Cannot route'")


def check_cut_reported(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(truth["blocked_file"])
    if text is None:
        return Verdict.failed(f"{truth['blocked_file']} does not exist")
    return _names_the_cut(set(ANY_ID.findall(text.upper())), truth, truth["blocked_file"])


# -- the oracle ---------------------------------------------------------------------------------------------------

ROUTE_LINE = re.compile(r"^ROUTE ((?:R\d{3} ?)+)\s*$", re.M)
TOTAL_LINE = re.compile(r"^TOTAL (\d+)\s*$", re.M)
CUT_LINE = re.compile(r"^CUT (R\d{3}) (.+?)\s*$", re.M)


def program(truth: Mapping[str, Any], closed: list[str], headroom: dict[str, int], db: str = DB) -> str:
    """The oracle's python step: the database and the order as the shell reads them, the closures as read off
    the window, and the route search of road_network (its own source, so truth and oracle cannot drift)."""
    source = "\n".join(textwrap.dedent(inspect.getsource(f)) for f in (rn.parse_order, rn.blockers, rn.search,
                                                                         rn.shortest_route, rn.diagnosis))
    main = f"""
con = sqlite3.connect("file:{db}?mode=ro", uri=True)
segments = con.execute("SELECT id, a, b, length_m FROM segments").fetchall()
structures = con.execute("SELECT id, segment, kind, clearance_cm, max_weight_t FROM structures").fetchall()
with open({truth['order_file']!r}) as order:
    truck = parse_order(order.read())
blocked = blockers(structures, truck, {closed!r}, {headroom!r})
found = shortest_route(segments, blocked, truck["depot"], truck["site"])
if found:
    route, total = found
    with open({truth['route_file']!r}, "w") as out:
        out.write("".join(sid + "\\n" for sid in route) + "TOTAL %d\\n" % total)
    print("ROUTE " + " ".join(route))
    print("TOTAL %d" % total)
else:
    lines = diagnosis(segments, blocked, truck["depot"], truck["site"])
    with open({truth['blocked_file']!r}, "w") as out:
        out.write("".join(line[4:] + "\\n" for line in lines))
    print("\\n".join(lines))
"""
    head = ("from __future__ import annotations\nimport heapq\nimport re\nimport sqlite3\n"
            "from collections.abc import Mapping, Sequence\nfrom typing import Any\n")
    return head + source + main


def _await_exit() -> ActionLike:
    # The window writes its record as it exits; pgrep sees every account's processes ([p]: not this sh itself).
    return {"kind": "shell", "command": "timeout 60 sh -c 'while pgrep -f \"dispatch_ma[p]\" >/dev/null; do "
                                        "sleep 0.2; done'", "timeout": 90}


def _fill(ctx: OracleContext, entry: str, text: str) -> Iterator[ActionLike]:
    """Click an entry, wait until its focus ring shows (keys are not held back while the window manager
    passes the click on, so typing at once can land in the entry that had the keyboard before), then type."""
    point = ctx.truth["targets"][entry]
    yield {"kind": "click", "x": point[0], "y": point[1]}
    for _ in range(WAIT_TRIES):
        if rn.focused(ctx.obs["screen"], ctx.truth["targets"], entry):
            break
        yield {"kind": "wait", "seconds": 0.5}
    yield {"kind": "type", "text": text}


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Closures off the window (GUI), the route or the cut from the database (CLI), then dispatch or give up."""
    targets = ctx.truth["targets"]
    tab = targets["tabs"][1]
    yield {"kind": "click", "x": tab[0], "y": tab[1]}
    for _ in range(WAIT_TRIES):  # the tab's redraw may trail the click under TCG
        if rn.shown_title(ctx.obs["screen"], targets) == CLOSURES_TITLE:
            break
        yield {"kind": "wait", "seconds": 1}
    closed, headroom = rn.read_closures(ctx.obs["screen"], targets)
    yield {"kind": "python", "code": program(ctx.truth, closed, headroom), "timeout": 120}
    terminal = (ctx.obs or {}).get("terminal", "").replace("\r", "")
    route, total, cut = ROUTE_LINE.search(terminal), TOTAL_LINE.search(terminal), CUT_LINE.findall(terminal)
    if route and total:
        yield from _fill(ctx, "route", route[1].strip())
        yield from _fill(ctx, "length", total[1])
        yield {"kind": "click", "x": targets["dispatch"][0], "y": targets["dispatch"][1]}
        yield _await_exit()
        yield {"kind": "done"}
        return
    ids = [i for sid, why in cut for i in (sid, *re.findall(r"\bBR\d{2}\b", why))]
    if not ids:
        yield {"kind": "fail", "reason": "the road network or the dispatch order could not be read"}
        return
    yield from _fill(ctx, "route", " ".join(ids))
    yield {"kind": "click", "x": targets["cannot"][0], "y": targets["cannot"][1]}
    yield _await_exit()
    yield {"kind": "fail", "reason": "No legal route reaches the site today: " + "; ".join(
        f"road {sid} is {why.lower() if why == 'CLOSED' else 'blocked by ' + why}" for sid, why in cut)}


TASK = Task(
    id="Weave-Spatial-5",
    title="Route an oversize load around today's closures (a third of the seeds cannot be done)",
    instruction=(
        "Dispatch order {order} moves an oversize load. The order, {order_file}, gives the truck's loaded height "
        "and gross weight, the depot it leaves from and the site it must reach (junction ids). The road network is "
        "the SQLite database /srv/roads/network.db: table junctions (id, name, x_km, y_km), table segments (id, a, "
        "b, length_m: a road between junctions a and b, usable both ways) and table structures (id, segment, kind, "
        "clearance_cm, max_weight_t: an overpass over a segment limits the height that may pass under it, a bridge "
        "carrying a segment limits the weight on it). The truck may take a segment only if every structure on it "
        "clears its loaded height and bears its gross weight. The open 'Dispatch Map' window shows the road map; "
        "its Closures tab lists today's restrictions: a CLOSED segment cannot be used today, a HEADROOM line gives "
        "a structure's clearance for today, and an OPEN line restricts nothing. 1) Find the shortest legal route "
        "from the depot to the site for today and write {route_file}: its segment ids in order from the depot, one "
        "per line, then a last line TOTAL with its length in metres (for example TOTAL 12340). 2) In the Dispatch "
        "Map, type the route's segment ids in order (separated by spaces) under Route and its total length in "
        "metres, press Dispatch, then finish with done. If no legal route reaches the site today, write no route "
        "file; instead write {blocked_file} with one line per road into the site: its segment id and what blocks "
        "it (the closure, or the id of the structure), type those ids under Route in the Dispatch Map and press "
        "'Cannot route', then give up with fail, naming them in the reason."),
    channels=Channels(
        gui="read today's closures and headroom cuts off the Dispatch Map's Closures tab, and record the dispatch "
            "or the cut in its form",
        cli="read the dispatch order and the road database, search the shortest legal route, write the route file "
            "or the report of the cut",
        why_both="today's closures exist only as pixels behind a tab and the dispatch only in the window's form, "
                 "while the truck, the lengths, clearances and weight limits are in files only the shell's account "
                 "can read; the database's own shortest route runs over a road closed today"),
    setup=setup,
    clauses=(
        Clause("route_file", "the route file lists the segments of the shortest legal route, in order",
               check_route_file, weight=2.0, critical=True, cap=0.5),
        Clause("route_total", "the route file's TOTAL line is that route's length in metres", check_route_total),
        Clause("dispatch_recorded", "the Dispatch Map dispatched that route with its length", check_dispatched,
               weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the Dispatch Map's record (captured by setup)"),
        Deliverable("{route_file}", "cli", description="~/route-<order>.txt"),
    ),
    abstention=Abstention(
        infeasible=lambda seed: seed % 3 == 2,
        candidates=True,  # the cut is two or three of the map's ~80 segment and structure ids
        fabrications=("{route_file}",),
        clauses=(
            Clause("cut_recorded", "the Dispatch Map recorded 'Cannot route' with the closed road and the structure",
                   check_cut_recorded, weight=2.0, critical=True, cap=0.5),
            Clause("cut_reported", "the shell's report names the closed road and the structure, and nothing else",
                   check_cut_reported),
        ),
        deliverables=(
            Deliverable(RECORD, "gui", owner="root", description="the Dispatch Map's record (captured by setup)"),
            Deliverable("{blocked_file}", "cli", description="~/blocked-<order>.txt"),
        ),
    ),
    withheld=("route", "total", "closed", "headroom", "truck", "cut"),  # and the causes and candidates
    oracle=oracle,
    apps=("python3-tk", "python3", "sqlite3"),
    max_steps=80,  # the oracle takes 9-10 steps, and at most 3 x WAIT_TRIES waits for a redraw or a focus ring
    time_budget_s=900.0,
)
