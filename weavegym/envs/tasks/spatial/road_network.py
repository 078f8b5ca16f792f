"""The road network of Weave-Spatial-5 (no TASK here): junctions, segments, structures, one oversize truck, and
today's closures.

Everything a seed decides is made here, guest-free, so that setup and the tests share it. The route search
(``search``, ``blockers``, ``shortest_route``, ``diagnosis``, ``parse_order``) is written once, with the standard
library alone: setup's truth calls it on the host, and the oracle ships these very functions' source to the
guest's python3, so the two cannot drift apart.

How a seed is built, and why:

* a jittered grid of junctions with roads between neighbours and some diagonals; segment lengths follow the
  drawn distance with a detour factor, so the map alone only suggests lengths;
* overpasses (a clearance) and bridges (a weight limit) on about two segments in five, never within a few cm
  or tonnes of the truck's height or weight (no rounding decides legality);
* feasible seeds: the shortest legal route by the database alone is unique and runs over a segment closed
  today (a shell that ignores the closures picks a closed road), and the shortest route avoiding closures but
  ignoring the structures differs from the answer (the map that ignores the database is wrong too); the answer
  is unique by a margin;
* infeasible seeds: the site has exactly two links, one closed today (pixels) and one under a structure too
  low or too weak for the truck (database); lifting either restriction alone would open a route, so the cut
  is nameable and unique.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.core.errors import TaskError
from weavegym.envs.tasks.pixel_font import read_text

COLUMNS, ROWS = 7, 5
DX_KM, DY_KM, JITTER_KM = 2.0, 1.4, (0.2, 0.1)
MARGIN_M = 60  # the answer beats every other route by at least this much
MAX_HOPS = 12  # an answer an agent types in one line
ATTEMPTS = 400
PLACES = ("HALLAM", "NORTHGATE", "KESTREL", "MILLBROOK", "ASHFORD", "REDCLIFF", "WESTFIELD", "ORCHARD", "BRAMLEY",
          "FENWICK", "HOLLOWAY", "LINDEN", "MARSH END", "OAKHILL", "PRIORY", "QUARRY", "RIVERSIDE", "STONEY CROSS",
          "TANNERS", "UPTON", "VALE", "WHARF", "YEW TREE", "ABBEY", "BECK", "CHAPEL", "DOCKSIDE", "ELM GREEN",
          "FOUNDRY", "GRANGE", "HEATH", "IRONGATE", "KILN", "LOCK", "MEADOW", "NETHER", "OLD MILL")
CLOSED_WHY = ("WATER MAIN", "RESURFACING", "GAS LEAK", "CRASH REPAIR", "BRIDGE JOINTS", "MARKET DAY", "FLOODING",
              "TREE FELLING")
HEADROOM_WHY = ("SCAFFOLD", "FALSEWORK", "SIGN GANTRY", "NETTING")
OPEN_WHY = ("LINE MARKING", "KERB WORKS", "SURVEY")
LOADS = ("POWER TRANSFORMER", "WIND TURBINE NACELLE", "PRESS FRAME", "BOILER DRUM", "TUNNEL BORER SHIELD")
SCHEMA = ("CREATE TABLE junctions (id TEXT PRIMARY KEY, name TEXT NOT NULL, x_km REAL NOT NULL, y_km REAL NOT NULL);"
          "CREATE TABLE segments (id TEXT PRIMARY KEY, a TEXT NOT NULL, b TEXT NOT NULL, length_m INTEGER NOT NULL);"
          "CREATE TABLE structures (id TEXT PRIMARY KEY, segment TEXT NOT NULL, kind TEXT NOT NULL, "
          "clearance_cm INTEGER, max_weight_t INTEGER);")

# The window's geometry (pixels inside it): the fixture draws here, the oracle reads and clicks here.
WIDTH, HEIGHT = 900, 620
CANVAS = (10, 50, 880, 420)
TABS = ([10, 10, 110, 30], [130, 10, 130, 30])  # Map, Closures
TITLE_AT, TITLE_SCALE, SCALE = (12, 10), 3, 2
HEAD_Y, FIRST_ROW_Y, ROW_DY, MAX_ROWS, ROW_CHARS = 56, 84, 28, 8, 40
MAP_X0, MAP_Y0, PX_PER_KM = 86, 66, 57
ROUTE_BOX, LENGTH_BOX = [250, 480, 630, 30], [250, 520, 160, 30]
DISPATCH_BOX, CANNOT_BOX = [440, 518, 200, 34], [660, 518, 220, 34]
STATUS_AT = (20, 568)
RING_RGB = (0x10, 0x60, 0xD0)  # the focus ring of the entry that has the keyboard (the fixture's RING)
TITLE_CHARS = 14


def layout() -> dict[str, Any]:
    """Where the window puts everything, independent of the seed (so none of it says anything secret)."""
    return {"width": WIDTH, "height": HEIGHT, "canvas": list(CANVAS), "tabs": [list(t) for t in TABS],
            "title": list(TITLE_AT), "title_scale": TITLE_SCALE, "scale": SCALE, "head_y": HEAD_Y,
            "first_row_y": FIRST_ROW_Y, "row_dy": ROW_DY, "x": 12, "route": ROUTE_BOX, "length": LENGTH_BOX,
            "dispatch": DISPATCH_BOX, "cannot": CANNOT_BOX, "status": list(STATUS_AT)}


# -- the route search: shipped verbatim to the guest's python3 (standard library only) ---------------------------


def parse_order(text: str) -> dict[str, Any]:
    """The truck and its trip from a dispatch order's text: {height_cm, weight_t, depot, site}."""
    height = re.search(r"Loaded height:\s*(\d+)\.(\d{2}) m", text)
    weight = re.search(r"Gross weight:\s*(\d+) t", text)
    depot = re.search(r"Depot:\s*(J\d{2})", text)
    site = re.search(r"Site:\s*(J\d{2})", text)
    if not (height and weight and depot and site):
        raise ValueError("not a dispatch order")
    return {"height_cm": int(height[1]) * 100 + int(height[2]), "weight_t": int(weight[1]), "depot": depot[1],
            "site": site[1]}


def blockers(structures: Sequence[Sequence[Any]], truck: Mapping[str, Any], closed: Sequence[str],
             headroom: Mapping[str, int]) -> dict[str, list[str]]:
    """{segment id: why the truck may not take it today}: closed, or a structure too low or too weak.

    ``structures`` are rows (id, segment, kind, clearance_cm, max_weight_t); ``headroom`` maps a structure to
    today's lowered clearance in cm.
    """
    found = {}
    for sid in closed:
        found.setdefault(sid, []).append("CLOSED")
    for sid, segment, _kind, clearance, weight in structures:
        if sid in headroom:
            clearance = headroom[sid] if clearance is None else min(clearance, headroom[sid])
        if clearance is not None and clearance < truck["height_cm"]:
            found.setdefault(segment, []).append(f"{sid} CLEARANCE {clearance} CM UNDER {truck['height_cm']} CM")
        if weight is not None and weight < truck["weight_t"]:
            found.setdefault(segment, []).append(f"{sid} LIMIT {weight} T UNDER {truck['weight_t']} T")
    return found


def search(segments: Sequence[Sequence[Any]], blocked: Mapping[str, Any], start: str
           ) -> tuple[dict[str, int], dict[str, tuple[str, str]]]:
    """Dijkstra from ``start`` over the segments (id, a, b, length_m) not in ``blocked``, both ways.

    Returns ({junction: metres}, {junction: (previous junction, segment id)}).
    """
    links = {}
    for sid, a, b, length in segments:
        if sid not in blocked:
            links.setdefault(a, []).append((b, sid, length))
            links.setdefault(b, []).append((a, sid, length))
    best, back, queue = {start: 0}, {}, [(0, start)]
    while queue:
        dist, node = heapq.heappop(queue)
        if dist > best[node]:
            continue
        for nxt, sid, length in links.get(node, ()):
            if nxt not in best or dist + length < best[nxt]:
                best[nxt] = dist + length
                back[nxt] = (node, sid)
                heapq.heappush(queue, (dist + length, nxt))
    return best, back


def shortest_route(segments: Sequence[Sequence[Any]], blocked: Mapping[str, Any], start: str, goal: str
                   ) -> tuple[list[str], int] | None:
    """(segment ids from start to goal, total metres) of the shortest route avoiding ``blocked``, or None."""
    best, back = search(segments, blocked, start)
    if goal not in best:
        return None
    route, node = [], goal
    while node != start:
        node, sid = back[node]
        route.append(sid)
    return route[::-1], best[goal]


def diagnosis(segments: Sequence[Sequence[Any]], blocked: Mapping[str, Any], start: str, goal: str) -> list[str]:
    """Why nothing reaches ``goal``: one line per segment at the goal, with what blocks it."""
    best, _back = search(segments, blocked, start)
    lines = []
    for sid, a, b, _length in segments:
        if goal in (a, b):
            far = a if b == goal else b
            why = list(blocked.get(sid, []))
            if far not in best:
                why.append(f"{far} CUT OFF TOO")
            lines.append(f"CUT {sid} " + "; ".join(why))
    return lines


# -- the seed's network --------------------------------------------------------------------------------------------


def _ids(rng: np.random.Generator, prefix: str, low: int, high: int, count: int) -> list[str]:
    numbers = rng.choice(np.arange(low, high), size=count, replace=False)
    return [f"{prefix}{int(n)}" for n in numbers]


def _connected(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> bool:
    seen, todo = {nodes[0]}, [nodes[0]]
    while todo:
        node = todo.pop()
        for a, b in edges:
            for x, y in ((a, b), (b, a)):
                if x == node and y not in seen:
                    seen.add(y)
                    todo.append(y)
    return len(seen) == len(nodes)


def _away(rng: np.random.Generator, low: int, high: int, avoid: int, gap: int) -> int:
    """A value in [low, high) at least ``gap`` away from ``avoid`` (legality is never a matter of rounding)."""
    while True:
        value = int(rng.integers(low, high))
        if abs(value - avoid) >= gap:
            return value


def _network(rng: np.random.Generator, truck: Mapping[str, Any], site_links: int | None) -> dict[str, Any] | None:
    """Junctions, segments and structures; the depot on the west edge and the site on the east edge.

    ``site_links``: trim the site to exactly that many links (None: leave it). None when the draw fails.
    """
    ids = _ids(rng, "J", 10, 100, COLUMNS * ROWS)
    grid = {(c, r): ids[r * COLUMNS + c] for r in range(ROWS) for c in range(COLUMNS)}
    places = [str(p) for p in rng.permutation(PLACES)[:len(ids)]]
    junctions = []
    for (c, r), jid in grid.items():
        x = c * DX_KM + JITTER_KM[0] + float(rng.uniform(-JITTER_KM[0], JITTER_KM[0]))
        y = r * DY_KM + JITTER_KM[1] + float(rng.uniform(-JITTER_KM[1], JITTER_KM[1]))
        junctions.append((jid, places.pop(), round(x, 3), round(y, 3)))
    edges = []
    for (c, r), jid in grid.items():
        if c + 1 < COLUMNS and rng.random() < 0.88:
            edges.append((jid, grid[(c + 1, r)]))
        if r + 1 < ROWS and rng.random() < 0.82:
            edges.append((jid, grid[(c, r + 1)]))
        if c + 1 < COLUMNS and r + 1 < ROWS and rng.random() < 0.3:
            edges.append((jid, grid[(c + 1, r + 1)]) if rng.random() < 0.5 else (grid[(c + 1, r)], grid[(c, r + 1)]))
    depot, site = grid[(0, int(rng.integers(ROWS)))], grid[(COLUMNS - 1, int(rng.integers(ROWS)))]
    if site_links is not None:
        at_site = [e for e in edges if site in e]
        if len(at_site) < site_links:
            return None
        for edge in [at_site[int(i)] for i in rng.permutation(len(at_site))][site_links:]:
            edges.remove(edge)
    if not _connected(ids, edges):
        return None
    where = {j[0]: (j[2], j[3]) for j in junctions}
    names = _ids(rng, "R", 100, 1000, len(edges))
    segments = []
    for sid, (a, b) in zip(names, edges, strict=True):
        km = float(np.hypot(where[a][0] - where[b][0], where[a][1] - where[b][1]))
        segments.append((sid, a, b, int(round(km * 1000 * float(rng.uniform(1.0, 1.35)), -1))))
    bridges = iter(_ids(rng, "BR", 10, 100, 90))
    structures = []
    for sid, *_rest in segments:
        if rng.random() < 0.42:
            if rng.random() < 0.6:
                structures.append((next(bridges), sid, "overpass", _away(rng, 380, 601, truck["height_cm"], 8), None))
            else:
                structures.append((next(bridges), sid, "bridge", None, _away(rng, 30, 181, truck["weight_t"], 4)))
    return {"junctions": junctions, "segments": segments, "structures": structures, "depot": depot, "site": site,
            "spare": list(bridges)}


def margin(segments: Sequence[tuple], blocked: Mapping[str, Any], start: str, goal: str,
           route: Sequence[str]) -> float:
    """How much longer the best route that differs from ``route`` is (inf when there is none).

    Any other route uses a segment off ``route`` in some direction u->v; the best such route costs
    d(start, u) + length + d(v, goal).
    """
    ahead, _ = search(segments, blocked, start)
    behind, _ = search(segments, blocked, goal)
    total = ahead[goal]
    best = float("inf")
    for sid, a, b, length in segments:
        if sid in blocked or sid in route:
            continue
        for u, v in ((a, b), (b, a)):
            if u in ahead and v in behind:
                best = min(best, ahead[u] + length + behind[v] - total)
    return best


def _truck(rng: np.random.Generator) -> dict[str, Any]:
    return {"height_cm": int(rng.integers(430, 491)), "weight_t": int(rng.integers(60, 131))}


def _decoys(rng: np.random.Generator, net: Mapping[str, Any], truck: Mapping[str, Any], keep: Sequence[str],
            taboo: set[str]) -> tuple[list[str], dict[str, int], list[str]]:
    """Closures, headroom lines and lane shifts the answer may or may not feel (``taboo`` segments and ``keep``
    structures are left alone)."""
    free = [s[0] for s in net["segments"] if s[0] not in taboo]
    picks = [free[int(i)] for i in rng.permutation(len(free))]
    closed = picks[:int(rng.integers(1, 3))]
    lanes = picks[3:3 + int(rng.integers(0, 2))]
    overs = [s for s in net["structures"] if s[2] == "overpass" and s[0] not in keep and s[1] not in taboo
             and s[3] > truck["height_cm"] + 20]
    headroom = {}
    for i in rng.permutation(len(overs))[:int(rng.integers(0, 3))]:
        sid, _seg, _kind, clearance, _w = overs[int(i)]
        headroom[sid] = _away(rng, truck["height_cm"] - 40, clearance - 4, truck["height_cm"], 8)
    return closed, headroom, lanes


def _feasible(rng: np.random.Generator, truck: dict[str, Any]) -> dict[str, Any] | None:
    net = _network(rng, truck, 2 if rng.random() < 0.4 else None)
    if net is None:
        return None
    segments, structures, depot, site = net["segments"], net["structures"], net["depot"], net["site"]
    plain = shortest_route(segments, blockers(structures, truck, [], {}), depot, site)
    if plain is None or margin(segments, blockers(structures, truck, [], {}), depot, site, plain[0]) < MARGIN_M:
        return None
    closed = [plain[0][int(rng.integers(len(plain[0])))]]  # the database's own answer runs over a closed road
    headroom: dict[str, int] = {}
    if rng.random() < 0.5:  # today's scaffold under an overpass of the route the closures alone would give
        around = shortest_route(segments, blockers(structures, truck, closed, {}), depot, site)
        overs = [s for s in structures if around and s[1] in around[0] and s[2] == "overpass"]
        if overs:
            chosen = overs[int(rng.integers(len(overs)))]
            headroom[chosen[0]] = truck["height_cm"] - int(rng.integers(8, 41))
    more, decoy_headroom, lanes = _decoys(rng, net, truck, list(headroom), set(closed))
    closed += more
    headroom.update(decoy_headroom)
    blocked = blockers(structures, truck, closed, headroom)
    found = shortest_route(segments, blocked, depot, site)
    if found is None or len(found[0]) > MAX_HOPS or margin(segments, blocked, depot, site, found[0]) < MARGIN_M:
        return None
    on_map = shortest_route(segments, {c: ["CLOSED"] for c in closed}, depot, site)
    if on_map is None or on_map[0] == found[0]:
        return None
    return {**net, "closed": closed, "headroom": headroom, "lanes": lanes, "route": found[0], "total": found[1],
            "plain": plain[0], "on_map": on_map[0], "cut": {}}


def _infeasible(rng: np.random.Generator, truck: dict[str, Any]) -> dict[str, Any] | None:
    net = _network(rng, truck, 2)
    if net is None:
        return None
    segments, depot, site = net["segments"], net["depot"], net["site"]
    links = [s[0] for s in segments if site in (s[1], s[2])]
    shut, low = (links[0], links[1]) if rng.random() < 0.5 else (links[1], links[0])
    structures = [s for s in net["structures"] if s[1] not in (shut, low)]  # the closed link is sound otherwise
    spare = net["spare"]
    if rng.random() < 0.6:  # an overpass too low for the load, or a bridge too weak for it
        cause = (spare[0], low, "overpass", truck["height_cm"] - int(rng.integers(10, 61)), None)
    else:
        cause = (spare[0], low, "bridge", None, truck["weight_t"] - int(rng.integers(5, 41)))
    structures.append(cause)
    structures.sort(key=lambda s: s[0])
    net = {**net, "structures": structures}
    more, headroom, lanes = _decoys(rng, net, truck, [cause[0]], {shut, low})
    closed = [shut, *more]
    if shortest_route(segments, blockers(structures, truck, closed, headroom), depot, site) is not None:
        return None
    if shortest_route(segments, blockers(structures, truck, more, headroom), depot, site) is None:
        return None  # lifting the closure alone must open a route
    if shortest_route(segments, blockers([s for s in structures if s != cause], truck, closed, headroom), depot,
                      site) is None:
        return None  # and so must lifting the structure alone
    return {**net, "closed": closed, "headroom": headroom, "lanes": lanes, "route": [], "total": 0,
            "cut": {"closed": shut, "link": low, "structure": cause[0]}}


def plan(rng: np.random.Generator, feasible: bool) -> dict[str, Any]:
    """Everything a seed decides: the truck, the network, today's restrictions, the answer or the cut."""
    truck = _truck(rng)
    for _ in range(ATTEMPTS):
        world = (_feasible if feasible else _infeasible)(rng, truck)
        if world is not None:
            break
    else:
        raise TaskError(f"no road network after {ATTEMPTS} draws")
    truck = {**truck, "depot": world["depot"], "site": world["site"], "order": str(int(rng.integers(10000, 100000))),
             "load": LOADS[int(rng.integers(len(LOADS)))]}
    names = {j[0]: j[1] for j in world["junctions"]}
    rows = [f"{sid:<5} {'CLOSED':<16} {CLOSED_WHY[int(rng.integers(len(CLOSED_WHY)))]}" for sid in world["closed"]]
    rows += [f"{sid:<5} {f'HEADROOM {cm // 100}.{cm % 100:02d} M':<16} "
             f"{HEADROOM_WHY[int(rng.integers(len(HEADROOM_WHY)))]}" for sid, cm in world["headroom"].items()]
    rows += [f"{sid:<5} {'OPEN, ONE LANE':<16} {OPEN_WHY[int(rng.integers(len(OPEN_WHY)))]}" for sid in world["lanes"]]
    rows = [rows[int(i)] for i in rng.permutation(len(rows))]
    return {**world, "truck": truck, "order_text": order_text(truck, names), "rows": rows,
            "candidates": sorted([s[0] for s in world["segments"]] + [s[0] for s in world["structures"]])}


def order_text(truck: Mapping[str, Any], names: Mapping[str, str]) -> str:
    """The dispatch order as the shell reads it (mixed case: a person's note, not the window's dot matrix)."""
    height = f"{truck['height_cm'] // 100}.{truck['height_cm'] % 100:02d}"
    return (f"DISPATCH ORDER {truck['order']}\n"
            f"Load: {truck['load'].lower()} on a multi-axle lowboy trailer\n"
            f"Loaded height: {height} m\n"
            f"Gross weight: {truck['weight_t']} t\n"
            f"Depot: {truck['depot']} ({names[truck['depot']].title()} yard)\n"
            f"Site: {truck['site']} ({names[truck['site']].title()} works)\n"
            "Escort: one pilot car; move in daylight only\n")


def causes(world: Mapping[str, Any]) -> list[str]:
    """The ids a right ``fail`` names: the closed link, the structure on the other link, that link."""
    cut = world["cut"]
    return [cut["closed"], cut["structure"], cut["link"]] if cut else []


# -- the window's content, and reading it back (the oracle's eyes) -----------------------------------------------


def map_points(junctions: Sequence[tuple]) -> list[list[Any]]:
    """[id, x, y] of each junction on the map canvas (to scale: the database's kilometres)."""
    return [[jid, MAP_X0 + round(x * PX_PER_KM), MAP_Y0 + round(y * PX_PER_KM)] for jid, _n, x, y in junctions]


def screen_targets(window: Sequence[int]) -> dict[str, Any]:
    """Where on the screen the oracle reads and clicks, from the window's position alone."""
    x, y = window[0], window[1]
    cx, cy = x + CANVAS[0], y + CANVAS[1]
    return {"tabs": [_center(x, y, box) for box in TABS], "title": [cx + TITLE_AT[0], cy + TITLE_AT[1]],
            "rows": [[cx + 12, cy + FIRST_ROW_Y + i * ROW_DY] for i in range(MAX_ROWS)],
            "route": _center(x, y, ROUTE_BOX), "length": _center(x, y, LENGTH_BOX),
            "boxes": {"route": [x + ROUTE_BOX[0], y + ROUTE_BOX[1], *ROUTE_BOX[2:]],
                      "length": [x + LENGTH_BOX[0], y + LENGTH_BOX[1], *LENGTH_BOX[2:]]},
            "dispatch": _center(x, y, DISPATCH_BOX), "cannot": _center(x, y, CANNOT_BOX)}


def _center(x: int, y: int, box: Sequence[int]) -> list[int]:
    return [x + box[0] + box[2] // 2, y + box[1] + box[3] // 2]


def focused(image: np.ndarray, targets: Mapping[str, Any], entry: str) -> bool:
    """True when the entry shows the fixture's blue focus ring: the app has handled the click that gave it the
    keyboard, so what is typed next lands there (a click can trail keys while the window manager holds it)."""
    x, y, w, _h = targets["boxes"][entry]
    strip = np.asarray(image)[y + 1, x + 8:x + w - 8, :3].astype(int)
    return strip.size > 0 and bool((np.abs(strip - RING_RGB).sum(axis=1) < 60).mean() > 0.8)


def shown_title(image: np.ndarray, targets: Mapping[str, Any]) -> str:
    return read_text(image, targets["title"][0], targets["title"][1], TITLE_SCALE, TITLE_CHARS)


CLOSED_ROW = re.compile(r"^(R\d{3}) +CLOSED +[A-Z ]+$")
HEADROOM_ROW = re.compile(r"^(BR\d{2}) +HEADROOM (\d)\.(\d{2}) M +[A-Z ]+$")


def read_closures(image: np.ndarray, targets: Mapping[str, Any]) -> tuple[list[str], dict[str, int]]:
    """(closed segment ids, {structure id: today's clearance in cm}) off the Closures tab; rows end at a blank."""
    closed, headroom = [], {}
    for x, y in targets["rows"]:
        text = read_text(image, x, y, SCALE, ROW_CHARS)
        if not text:
            break
        if match := CLOSED_ROW.match(text):
            closed.append(match[1])
        elif match := HEADROOM_ROW.match(text):
            headroom[match[1]] = int(match[2]) * 100 + int(match[3])
    return closed, headroom
