"""Simon Tatham's Bridges as a model (no TASK): game ids, the links search, random charts, saved moves.

A chart is a grid of islands, each with the number of bridges it takes. Bridges run straight across the water,
horizontally or vertically, between two islands in sight of each other (no island between them); two islands share
at most two bridges, no two bridges cross, every island takes exactly its number, and all islands end connected.
Bridges writes such a chart as its game id ``WxHm2:desc``: the squares in reading order, an island as its number
(``1``-``9``, then ``A``-``G`` for 10-16) and a run of open water as one letter for its length (``a`` one square ...
``z`` 26). A save's MOVE records set a link's bridges: ``Lx1,y1,x2,y2,n`` (``n`` the new number, ``;``-joined in one
move); ``N...`` and ``M...`` only mark the board, a move starting with ``S`` is Game > Solve.

``link_islands`` is the one copy of the search: the host calls it (setup's uniqueness check, the gui-only ablation)
and the oracle's shell step runs its source in the guest (``sgt_common.solver_command``), so it is self-contained.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
Square = tuple[int, int]
Link = tuple[Square, Square]


def link_islands(ident: str) -> str:
    """'LINKS A1-C1=2 A1-A4=1 ...' (every link of the only solution: its two islands' grid references, columns
    letters from A at the left, rows numbers from 1 at the top, and its number of bridges), 'NONE' or 'MANY'."""
    import re

    found_size = re.fullmatch(r"(\d+)x(\d+)(?:[a-z]\d+)*", ident.strip().split(":", 1)[0])
    if found_size is None or ":" not in ident:
        raise ValueError("not a Bridges game id")
    w, h = int(found_size.group(1)), int(found_size.group(2))
    found_max = re.search(r"m(\d)", ident.split(":", 1)[0])
    maxb = int(found_max.group(1)) if found_max else 2
    need: dict[tuple[int, int], int] = {}
    pos = 0
    for ch in ident.strip().split(":", 1)[1]:
        if "1" <= ch <= "9" or "A" <= ch <= "G":
            need[(pos % w, pos // w)] = int(ch) if ch.isdigit() else ord(ch) - ord("A") + 10
            pos += 1
        elif "a" <= ch <= "z":
            pos += ord(ch) - ord("a") + 1
        else:
            raise ValueError(f"not a Bridges chart: {ch!r}")
    if pos != w * h or len(need) < 2:
        raise ValueError("the chart's squares do not fill its size")
    isles = sorted(need, key=lambda c: (c[1], c[0]))
    edges: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for x, y in isles:
        for dx, dy in ((1, 0), (0, 1)):
            a, b = x + dx, y + dy
            while a < w and b < h and (a, b) not in need:
                a, b = a + dx, b + dy
            if a < w and b < h:
                edges.append(((x, y), (a, b)))

    def crosses(e: tuple, f: tuple) -> bool:
        (ax, ay), (bx, by) = e
        (cx, cy), (dx, dy) = f
        if ay == by and cx == dx:
            return ax < cx < bx and cy < ay < dy
        if ax == bx and cy == dy:
            return cx < ax < dx and ay < cy < by
        return False

    clash = [[j for j, f in enumerate(edges) if crosses(e, f)] for e in edges]
    touching: dict[tuple[int, int], list[int]] = {c: [] for c in isles}
    for i, (a, b) in enumerate(edges):
        touching[a].append(i)
        touching[b].append(i)
    value: list[int | None] = [None] * len(edges)
    solutions: list[list[int]] = []

    def room(i: int) -> int:
        return 0 if any(value[j] for j in clash[i]) else maxb

    def fits(c: tuple[int, int]) -> bool:
        have = sum(value[i] or 0 for i in touching[c])
        free = sum(room(i) for i in touching[c] if value[i] is None)
        return have <= need[c] <= have + free

    def parts() -> list[set[tuple[int, int]]]:
        seen: set[tuple[int, int]] = set()
        out = []
        for start in isles:
            if start in seen:
                continue
            group, stack = {start}, [start]
            while stack:
                c = stack.pop()
                for i in touching[c]:
                    if value[i] is None or value[i]:
                        other = edges[i][1] if edges[i][0] == c else edges[i][0]
                        if other not in group:
                            group.add(other)
                            stack.append(other)
            seen |= group
            out.append(group)
        return out

    def search() -> None:
        if len(solutions) > 1:
            return
        if len(parts()) > 1:  # counting undecided links as possible: some islands can never be reached
            return
        open_edges = [i for i, v in enumerate(value) if v is None]
        if not open_edges:
            solutions.append([v or 0 for v in value])
            return

        def slack(i: int) -> int:
            return min(sum(room(j) for j in touching[c] if value[j] is None) - need[c]
                       + sum(value[j] or 0 for j in touching[c]) for c in edges[i])

        i = min(open_edges, key=slack)
        for v in range(room(i), -1, -1):
            value[i] = v
            if fits(edges[i][0]) and fits(edges[i][1]) and all(fits(c) for j in clash[i] for c in edges[j]):
                search()
            value[i] = None

    search()
    if not solutions:
        return "NONE"
    if len(solutions) > 1:
        return "MANY"

    def ref(c: tuple[int, int]) -> str:
        return f"{chr(ord('A') + c[0])}{c[1] + 1}"

    return "LINKS " + " ".join(f"{ref(a)}-{ref(b)}={v}" for (a, b), v in zip(edges, solutions[0], strict=True) if v)


def ref(square: Square) -> str:
    return f"{LETTERS[square[0]]}{square[1] + 1}"


def square(text: str) -> Square:
    found = re.fullmatch(r"([A-Za-z])(\d{1,2})", text.strip())
    if found is None:
        raise ValueError(f"not a grid reference: {text!r}")
    return LETTERS.index(found.group(1).upper()), int(found.group(2)) - 1


def parse_links(answer: str) -> dict[Link, int]:
    """{(island, island): bridges} of link_islands' 'LINKS A1-C1=2 ...' (each pair in reading order)."""
    links = {}
    for item in answer.split()[1:]:
        found = re.fullmatch(r"([A-Z]\d+)-([A-Z]\d+)=(\d)", item)
        if found is None:
            raise ValueError(f"not a link: {item!r}")
        a, b = sorted((square(found.group(1)), square(found.group(2))), key=lambda c: (c[1], c[0]))
        links[(a, b)] = int(found.group(3))
    return links


def encode(w: int, h: int, islands: Mapping[Square, int]) -> str:
    """The Bridges game id of the islands (their counts)."""
    out, run = "", 0
    for y in range(h):
        for x in range(w):
            if (x, y) in islands:
                if run:
                    out += chr(ord("a") + run - 1)
                    run = 0
                n = islands[(x, y)]
                out += str(n) if n < 10 else chr(ord("A") + n - 10)
            else:
                if run == 26:
                    out += "z"
                    run = 0
                run += 1
    if run:
        out += chr(ord("a") + run - 1)
    return f"{w}x{h}m2:{out}"


def decode(ident: str) -> tuple[int, int, dict[Square, int]]:
    """(w, h, {island: its number}) of a game id; raises ValueError."""
    size, desc = ident.strip().split(":", 1)
    found = re.match(r"(\d+)x(\d+)", size)
    if found is None:
        raise ValueError("not a Bridges game id")
    w, h = int(found.group(1)), int(found.group(2))
    islands, pos = {}, 0
    for ch in desc:
        if (ch.isdigit() and ch != "0") or "A" <= ch <= "G":
            islands[(pos % w, pos // w)] = int(ch) if ch.isdigit() else ord(ch) - ord("A") + 10
            pos += 1
        elif "a" <= ch <= "z":
            pos += ord(ch) - ord("a") + 1
        else:
            raise ValueError(f"not a Bridges chart: {ch!r}")
    if pos != w * h:
        raise ValueError("the chart's squares do not fill its size")
    return w, h, islands


def sight(islands: Iterable[Square], w: int, h: int) -> list[Link]:
    """Every pair of islands in sight of each other (the first island right of and below each), reading order."""
    isles = set(islands)
    pairs = []
    for x, y in sorted(isles, key=lambda c: (c[1], c[0])):
        for dx, dy in ((1, 0), (0, 1)):
            a, b = x + dx, y + dy
            while a < w and b < h and (a, b) not in isles:
                a, b = a + dx, b + dy
            if a < w and b < h:
                pairs.append(((x, y), (a, b)))
    return pairs


def _between(link: Link) -> list[Square]:
    (ax, ay), (bx, by) = link
    if ay == by:
        return [(x, ay) for x in range(ax + 1, bx)]
    return [(ax, y) for y in range(ay + 1, by)]


def draw_chart(rng: np.random.Generator, w: int, h: int, count: int, tries: int = 400) -> dict[str, Any]:
    """A random chart of ``w`` x ``h`` with ``count`` islands and exactly one solution:
    {"id", "w", "h", "islands": [[x, y, n]...], "links": [[x1, y1, x2, y2, n]...]} (links in reading order)."""
    for _try in range(tries):
        start = (int(rng.integers(w)), int(rng.integers(h)))
        isles = {start}
        links: dict[Link, int] = {}
        water: set[Square] = set()  # squares a bridge crosses
        for _grow in range(count * 30):
            if len(isles) == count:
                break
            x, y = sorted(isles)[int(rng.integers(len(isles)))]
            dx, dy = ((1, 0), (-1, 0), (0, 1), (0, -1))[int(rng.integers(4))]
            far = 2 + int(rng.integers(max(w, h) - 2))
            a, b = x + dx * far, y + dy * far
            if not (0 <= a < w and 0 <= b < h) or (a, b) in water:
                continue
            if any((a + ex, b + ey) in isles for ex, ey in ((1, 0), (-1, 0), (0, 1), (0, -1))):
                continue  # islands never touch (Bridges refuses joined islands)
            link = tuple(sorted(((x, y), (a, b)), key=lambda c: (c[1], c[0])))
            path = _between(link)  # type: ignore[arg-type]
            if any(c in isles or c in water for c in path):
                continue
            isles.add((a, b))
            links[link] = 1 + int(rng.integers(2))  # type: ignore[index]
            water |= set(path)
        if len(isles) != count or any(c in water for c in isles):
            continue
        for link in sight(isles, w, h):  # a few more links between islands already in sight
            if link not in links and rng.random() < 0.3 and not any(c in water for c in _between(link)):
                links[link] = 1 + int(rng.integers(2))
                water |= set(_between(link))
        numbers = dict.fromkeys(isles, 0)
        for (a, b), n in links.items():
            numbers[a] += n
            numbers[b] += n
        ident = encode(w, h, numbers)
        if link_islands(ident) != "LINKS " + " ".join(f"{ref(a)}-{ref(b)}={links[(a, b)]}"
                                                        for a, b in sight(isles, w, h) if (a, b) in links):
            continue
        return {"id": ident, "w": w, "h": h,
                "islands": [[x, y, numbers[(x, y)]] for x, y in sorted(isles, key=lambda c: (c[1], c[0]))],
                "links": [[a[0], a[1], b[0], b[1], links[(a, b)]] for a, b in sight(isles, w, h) if (a, b) in links]}
    raise RuntimeError(f"no chart of {w}x{h} with {count} islands and one solution in {tries} tries")


def chart_links(chart: Mapping[str, Any]) -> dict[Link, int]:
    return {((a, b), (c, d)): n for a, b, c, d, n in chart["links"]}


def span(link: Link) -> int:
    (ax, ay), (bx, by) = link
    return abs(bx - ax) + abs(by - ay)


def berth_cost(links: Mapping[Link, int], rate: int) -> int:
    """The register's cost of a network: ``rate`` per square spanned, for every bridge."""
    return rate * sum(n * span(link) for link, n in links.items())


def replay_bridges(ident: str, moves: list[str]) -> tuple[dict[Link, int] | None, str]:
    """({link: bridges} after the saved moves, '') or (None, what is wrong). A move starting with 'S' (Game >
    Solve) does not count as building the links; marks (N, M) change no bridge."""
    w, h, islands = decode(ident)
    pairs = set(sight(islands, w, h))
    links: dict[Link, int] = {}
    for move in moves:
        if move.startswith("S"):
            return None, "the saved game used Game > Solve"
        for step in move.split(";"):
            if re.fullmatch(r"[NM][\d,]*", step):
                continue
            found = re.fullmatch(r"L(\d+),(\d+),(\d+),(\d+),(\d)", step)
            if found is None:
                return None, f"{step[:20]!r} is not a Bridges move"
            x1, y1, x2, y2, n = (int(g) for g in found.groups())
            link = tuple(sorted(((x1, y1), (x2, y2)), key=lambda c: (c[1], c[0])))
            if link not in pairs or n > 2:
                return None, f"{step!r} does not join two islands in sight"
            links[link] = n  # type: ignore[index]
    return {k: v for k, v in links.items() if v}, ""
