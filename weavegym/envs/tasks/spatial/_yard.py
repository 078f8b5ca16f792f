"""Weave-Spatial-6's yard: what a seed decides, the one copy of the reshuffle search, the windows' geometry and
the readers of their pixels (the task module's setup, checker and oracle and the tests share them).

A bay is a list of stacks, each a list of container ids from the bottom up. A stack is *in loading order* when,
read from the bottom up, it holds first the containers for other ships (any order), then the ship's containers
in decreasing loading sequence, so the crane always finds the next container to load on top and never lifts a
container that stays. ``plan_moves`` finds a shortest reshuffle; it is self-contained (the oracle's shell step
runs its own source in the guest), so the truth's minimum and the plan a shell computes cannot drift apart.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.envs.tasks import pixel_font

BAYS, STACKS, HEIGHT = 3, 4, 4
CONTAINERS = (9, 10)  # per bay, low and high (inclusive)
SHIP_SHARE = (5, 7)  # how many of a bay's containers the ship loads, low and high (inclusive)
MIN_MOVES = (6, 9)  # a shortest reshuffle of every bay takes this many moves (inclusive)
SHIPS = ("NORDIC STAR", "MAERA BAY", "ODER TRADER", "CAPE LINDOS", "BALTIC OWL", "SANTA ILSE", "RIVA GRANDE",
         "TASMAN PIKE", "ELBE EXPRESS", "KORU SPIRIT")
PODS = ("DEHAM", "NLRTM", "BEANR", "GBFXT", "ESALG", "PLGDN", "SEGOT", "FRLEH")
OWNERS = ("MSKU", "TGHU", "CAIU", "TCLU", "GESU", "SEGU", "FCIU", "BMOU", "TRLU", "HLXU", "CMAU", "OOLU")
STAY = 10 ** 6  # the sort key of a container for another ship: below every one the ship loads


# ---- the seed's yard -----------------------------------------------------------------------------------------

def _ids(rng: np.random.Generator, count: int) -> list[str]:
    ids: set[str] = set()
    while len(ids) < count:
        ids.add(f"{OWNERS[int(rng.integers(len(OWNERS)))]}{int(rng.integers(1000, 10000))}")
    return [str(i) for i in rng.permutation(sorted(ids))]


def _bay(rng: np.random.Generator, ids: list[str]) -> list[list[str]]:
    """The ids dealt onto the stacks (none above HEIGHT, at least one stack with room to spare)."""
    stacks: list[list[str]] = [[] for _ in range(STACKS)]
    for container in ids:
        open_ = [i for i, s in enumerate(stacks) if len(s) < HEIGHT]
        stacks[open_[int(rng.integers(len(open_)))]].append(container)
    return stacks


def world(rng: np.random.Generator) -> dict[str, Any]:
    """Everything a seed decides: the ship, the three bays, the loading list's rows and each bay's minimum."""
    ship = SHIPS[int(rng.integers(len(SHIPS)))]
    others = [s for s in SHIPS if s != ship]
    counts = [int(rng.integers(CONTAINERS[0], CONTAINERS[1] + 1)) for _ in range(BAYS)]
    noise = int(rng.integers(150, 260))
    ids = _ids(rng, sum(counts) + noise)
    bays, loads, plans, cursor = [], [], [], 0
    for count in counts:
        mine = ids[cursor:cursor + count]
        cursor += count
        while True:  # deal again until the bay's shortest reshuffle has a length worth planning
            loaded = set(mine[:int(rng.integers(SHIP_SHARE[0], SHIP_SHARE[1] + 1))])
            stacks = _bay(rng, [str(c) for c in rng.permutation(mine)])
            order = [str(c) for c in rng.permutation(sorted(loaded))]
            plan = plan_moves(stacks, {c: i + 1 for i, c in enumerate(order)}, HEIGHT)
            if MIN_MOVES[0] <= len(plan) <= MIN_MOVES[1]:
                break
        bays.append(stacks)
        loads.append(order)
        plans.append(plan)
    # The ship's loading sequence runs over the whole yard: the bays' containers among others from elsewhere.
    elsewhere = ids[cursor:]
    ship_rows = [c for order in loads for c in order]
    extra = elsewhere[:int(rng.integers(20, 40))]
    sequence: list[str] = []
    for container in ship_rows + extra:  # random interleave that keeps each bay's own order
        sequence.insert(int(rng.integers(len(sequence) + 1)), container)
    for order in loads:  # restore each bay's order among the slots its containers took
        slots = sorted(sequence.index(c) for c in order)
        for slot, container in zip(slots, order, strict=True):
            sequence[slot] = container
    seq = {c: i + 1 for i, c in enumerate(sequence)}
    rows = []
    others_seq: dict[str, int] = {}
    for container in ids:
        weight = round(float(rng.uniform(4.0, 30.5)), 1)
        pod = PODS[int(rng.integers(len(PODS)))]
        if container in seq:
            rows.append((container, ship, "0412E", pod, seq[container], weight))
        else:
            other = others[int(rng.integers(len(others)))]
            others_seq[other] = others_seq.get(other, 0) + 1
            rows.append((container, other, f"0{int(rng.integers(100, 999))}W", pod, others_seq[other], weight))
    rows = [rows[int(i)] for i in rng.permutation(len(rows))]
    bay_seq = [{c: seq[c] for c in order} for order in loads]
    return {"ship": ship, "bays": bays, "rows": rows, "seq": bay_seq, "minimum": [len(p) for p in plans],
            "plans": plans}


# ---- the rule and the search (self-contained: the guest runs plan_moves' source) -----------------------------

def in_order(stack: Sequence[str], seq: Mapping[str, int]) -> bool:
    """Bottom up: containers that stay, then the ship's in decreasing sequence (the next one to load on top)."""
    keys = [seq.get(c, STAY) for c in stack]
    return all(a > b or a == b == STAY for a, b in itertools.pairwise(keys))


def plan_moves(stacks: list[list[str]], seq: dict[str, int], height: int) -> list[str]:
    """A shortest list of moves "a>b" (1-based stacks: the top container of a onto b) that puts every stack
    in loading order, by iterative deepening A* (each container above a stack's in-order base must move at
    least once, so their count never overestimates)."""
    stay = 10 ** 6  # STAY, spelt out: the guest runs this function alone
    start = tuple(tuple(seq.get(c, stay) for c in s) for s in stacks)

    def misplaced(state: tuple[tuple[int, ...], ...]) -> int:
        count = 0
        for s in state:
            base = 1
            while base < len(s) and (s[base - 1] > s[base] or s[base - 1] == s[base] == stay):
                base += 1
            count += len(s) - base if s else 0
        return count

    path: list[str] = []

    def search(state: tuple[tuple[int, ...], ...], cost: int, bound: int, last_to: int,
               seen: dict[tuple[tuple[int, ...], ...], int]) -> int:
        h = misplaced(state)
        if h == 0:
            return -1
        if cost + h > bound:
            return cost + h
        best = 10 ** 9
        for a, src in enumerate(state):
            if not src or a == last_to:  # moving the container just moved again is never shorter
                continue
            for b, dst in enumerate(state):
                if b == a or len(dst) >= height:
                    continue
                nxt = list(state)
                nxt[a], nxt[b] = src[:-1], (*dst, src[-1])
                key = tuple(nxt)
                if seen.get(key, 10 ** 9) <= cost + 1:
                    continue
                seen[key] = cost + 1
                path.append(f"{a + 1}>{b + 1}")
                found = search(key, cost + 1, bound, b, seen)
                if found < 0:
                    return -1
                path.pop()
                best = min(best, found)
        return best

    bound = misplaced(start)
    while True:
        found = search(start, 0, bound, -1, {start: 0})
        if found < 0:
            return path
        if found >= 10 ** 9:
            raise ValueError("no reshuffle within the height limit")
        bound = found


def apply_move(stacks: list[list[str]], move: tuple[int, int], height: int) -> str:
    """Move the top of stack a onto stack b (1-based) in place; '' or why the move is refused."""
    a, b = move
    if not (1 <= a <= len(stacks) and 1 <= b <= len(stacks)) or a == b:
        return f"no move from stack {a} to stack {b}"
    if not stacks[a - 1]:
        return f"stack {a} is empty"
    if len(stacks[b - 1]) >= height:
        return f"stack {b} is full"
    stacks[b - 1].append(stacks[a - 1].pop())
    return ""


def stacks_text(stacks: Sequence[Sequence[str]]) -> str:
    """A bay as the shell's planner takes it: stacks separated by '/', ids bottom up separated by ','."""
    return "/".join(",".join(s) for s in stacks)


# ---- the windows' geometry (pixels inside each window; not secret) -------------------------------------------

SCALE, TITLE_SCALE = 2, 3
WIDTH, HEIGHT_PX = 600, 620
MAP_AT, CONSOLE_AT = (10, 40), (660, 40)  # where setup puts the windows (the window manager may not)
MAP_HEADING, CONSOLE_HEADING = "YARD MAP", "CRANE CONSOLE"
HEADING_AT = (16, 12)
BAY_BUTTONS = [(16 + i * 130, 40, 120, 34) for i in range(BAYS)]  # the Yard Map's bay buttons
NEXT_BUTTON = (440, 40, 140, 34)  # the console's
BAY_TITLE_AT = (16, 92)  # "BAY n", both windows
COL_X0, COL_W, BOX_W, BOX_H, TIER_H = 24, 140, 128, 34, 40
GROUND = 300 + HEIGHT * TIER_H  # the stacks' base line, both windows
LABEL_DX, LABEL_DY = 17, 10  # an id's text inside its box
SEALS_AT, SEAL_STEP, SEAL_CHARS = (16, GROUND + 60), 28, 26  # the console's seal lines
CONSOLE_FILL = np.array([0x9a, 0xa5, 0xb1])  # the console's boxes (crane_console.py's BOX_FILL)
ID = re.compile(r"^[A-Z]{3}U\d{4}$")


def layout() -> dict[str, Any]:
    """What both fixtures draw where (boxes are [x, y, width, height] inside the window)."""
    return {"width": WIDTH, "height": HEIGHT_PX, "scale": SCALE, "title_scale": TITLE_SCALE,
            "heading_at": list(HEADING_AT), "bay_buttons": [list(b) for b in BAY_BUTTONS],
            "next_button": list(NEXT_BUTTON), "bay_title_at": list(BAY_TITLE_AT), "col_x0": COL_X0,
            "col_w": COL_W, "box_w": BOX_W, "box_h": BOX_H, "tier_h": TIER_H, "ground": GROUND,
            "label": [LABEL_DX, LABEL_DY], "seals_at": list(SEALS_AT), "seal_step": SEAL_STEP,
            "stacks": STACKS, "tiers": HEIGHT, "map_heading": MAP_HEADING, "console_heading": CONSOLE_HEADING}


def box_at(stack: int, tier: int) -> tuple[int, int]:
    """The top-left (in the window) of the box of stack ``stack`` (0-based) at tier ``tier`` (0 = ground)."""
    return COL_X0 + stack * COL_W, GROUND - (tier + 1) * TIER_H


def centre(at: Sequence[int], box: Sequence[int]) -> tuple[int, int]:
    return at[0] + box[0] + box[2] // 2, at[1] + box[1] + box[3] // 2


# ---- reading the windows (the oracle's eyes; setup's readiness check) ----------------------------------------

def origin(image: np.ndarray, near: Sequence[int], heading: str, reach: int = 40) -> tuple[int, int] | None:
    """The window's top-left, found where its dot-matrix heading reads back near ``near``; None until drawn."""
    return pixel_font.find_drawn(image, heading, near, HEADING_AT, SCALE, reach=reach)


def shown_bay(image: np.ndarray, at: Sequence[int]) -> int | None:
    """The bay number a window's title shows ("BAY 2"), or None."""
    found = re.fullmatch(r"BAY (\d)", pixel_font.read_text(image, at[0] + BAY_TITLE_AT[0], at[1] + BAY_TITLE_AT[1],
                                                           TITLE_SCALE, 5))
    return None if found is None else int(found.group(1))


def read_bay(image: np.ndarray, at: Sequence[int]) -> list[list[str]] | None:
    """The stacks the Yard Map at ``at`` shows, bottom up; None when a label does not read as an id (not drawn
    yet, or covered) or a stack floats."""
    stacks = []
    for stack in range(STACKS):
        ids = []
        for tier in range(HEIGHT):
            x, y = box_at(stack, tier)
            text = pixel_font.read_text(image, at[0] + x + LABEL_DX, at[1] + y + LABEL_DY, SCALE, 8)
            if not text:
                break
            if not ID.match(text):
                return None
            ids.append(text)
        stacks.append(ids)
    return stacks


def console_heights(image: np.ndarray, at: Sequence[int]) -> list[int]:
    """How many boxes each of the console's stacks shows: a tier counts when its box's fill shows near either
    of two opposite corners (the pointer, left where the last drag dropped, can hide one of them)."""
    heights = []
    for stack in range(STACKS):
        count = 0
        for tier in range(HEIGHT):
            x, y = box_at(stack, tier)
            spots = ((x + 6, y + 6), (x + BOX_W - 7, y + BOX_H - 7))
            if not any(int(np.abs(image[at[1] + sy, at[0] + sx, :3].astype(int) - CONSOLE_FILL).sum()) <= 30
                       for sx, sy in spots):
                break
            count += 1
        heights.append(count)
    return heights


def read_seal(image: np.ndarray, at: Sequence[int], bay: int) -> str | None:
    """The seal code the console at ``at`` shows for ``bay``, or None while it shows none."""
    text = pixel_font.read_text(image, at[0] + SEALS_AT[0], at[1] + SEALS_AT[1] + (bay - 1) * SEAL_STEP, SCALE,
                                SEAL_CHARS)
    found = re.fullmatch(rf"BAY {bay} SEALED +CODE ([A-Z0-9]{{6}})", text)
    return None if found is None else found.group(1)
