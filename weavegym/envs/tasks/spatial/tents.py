"""Simon Tatham's Tents as a model (no TASK): game ids, the placement search, random fields, saved moves.

A field is a grid of trees with a count of tents for every column and row. Each tree gets one tent on an
orthogonally adjacent square (a one-to-one pairing), no two tents touch (not even diagonally), and every column
and row holds its count. Tents writes such a field as its game id ``WxH:trees,c1,..,cW,r1,..,rH``: the trees in
reading order, each as a letter for the empty squares before it (``_`` none, ``a`` one ... ``y`` 25; ``z`` is 25
empty squares with no tree after them), one last letter (or ``_``) for the empty squares after the last tree.

``pitch_tents`` is the one copy of the search: the host calls it (setup's uniqueness check, the gui-only ablation)
and the oracle's shell step runs its source in the guest (``sgt_common.solver_command``), so it is self-contained.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def pitch_tents(ident: str) -> str:
    """'PITCHES A1 C2 ...' (the grid references of the only placement, in reading order), 'NONE' or 'MANY'.

    Columns are letters from A (left), rows numbers from 1 (top).
    """
    import itertools

    size, rest = ident.strip().split(":", 1)
    w, h = (int(n) for n in size.lower().split("x"))
    parts = rest.split(",")
    trees, pos = set(), 0
    for ch in parts[0]:
        if ch == "_":
            trees.add(pos)
            pos += 1
        elif "a" <= ch <= "y":
            pos += ord(ch) - ord("a") + 1
            trees.add(pos)
            pos += 1
        elif ch == "z":
            pos += 25
        else:
            raise ValueError(f"not a Tents field: {ch!r}")
    trees.discard(w * h)  # the last letter counts the squares after the last tree
    if pos != w * h + 1 or len(parts) != 1 + w + h:
        raise ValueError("the field's size does not match its squares or counts")
    cols, rows = [int(n) for n in parts[1:1 + w]], [int(n) for n in parts[1 + w:]]
    tree_at = {(p % w, p // w) for p in trees}

    def near(x: int, y: int) -> list[tuple[int, int]]:
        return [(a, b) for a, b in ((x - 1, y), (x + 1, y), (x, y - 1), (x, y + 1)) if 0 <= a < w and 0 <= b < h]

    spots = {c for t in tree_at for c in near(*t) if c not in tree_at}

    def paired(tents: list[tuple[int, int]]) -> bool:
        """Whether every tree gets its own adjacent tent (augmenting paths)."""
        owner: dict[tuple[int, int], tuple[int, int]] = {}

        def grab(tree: tuple[int, int], seen: set[tuple[int, int]]) -> bool:
            for tent in near(*tree):
                if tent in tent_set and tent not in seen:
                    seen.add(tent)
                    if tent not in owner or grab(owner[tent], seen):
                        owner[tent] = tree
                        return True
            return False

        tent_set = set(tents)
        return len(tents) == len(tree_at) and all(grab(t, set()) for t in sorted(tree_at))

    found: list[list[tuple[int, int]]] = []
    if sum(cols) != len(tree_at) or sum(rows) != len(tree_at):
        return "NONE"

    def search(y: int, placed: list[tuple[int, int]], used: list[int]) -> None:
        if len(found) > 1:
            return
        if y == h:
            if used == cols and paired(placed):
                found.append(list(placed))
            return
        above = {x for x, b in placed if b == y - 1}
        options = [x for x in range(w) if (x, y) in spots and used[x] < cols[x]
                   and not above & {x - 1, x, x + 1}]
        for pick in itertools.combinations(options, rows[y]):
            if any(b - a == 1 for a, b in itertools.pairwise(pick)):
                continue
            row = [(x, y) for x in pick]
            now = placed + row
            # every tree of the row above has its tent by now (its neighbours are in rows y-2..y)
            if y >= 1 and any(not any(c in now for c in near(tx, ty)) for tx, ty in tree_at if ty == y - 1):
                continue
            for x in pick:
                used[x] += 1
            if all(cols[x] - used[x] <= (h - y) // 2 for x in range(w)):  # at most every other row left
                search(y + 1, now, used)
            for x in pick:
                used[x] -= 1

    search(0, [], [0] * w)
    if not found:
        return "NONE"
    if len(found) > 1:
        return "MANY"
    return "PITCHES " + " ".join(f"{chr(ord('A') + x)}{y + 1}" for x, y in sorted(found[0], key=lambda c: (c[1], c[0])))


def encode(w: int, h: int, trees: Iterable[tuple[int, int]], tents: Iterable[tuple[int, int]]) -> str:
    """The Tents game id of trees with the counts of ``tents``."""
    tree_set, tent_list = set(trees), list(tents)
    cols = [sum(1 for x, _y in tent_list if x == c) for c in range(w)]
    rows = [sum(1 for _x, y in tent_list if y == r) for r in range(h)]
    return game_id(w, h, tree_set, cols, rows)


def game_id(w: int, h: int, trees: Iterable[tuple[int, int]], cols: list[int], rows: list[int]) -> str:
    """The Tents game id of a field: its trees and its columns' and rows' tent counts."""
    tree_set = set(trees)
    letters, run = "", 0
    for pos in range(w * h + 1):
        if pos == w * h or (pos % w, pos // w) in tree_set:
            letters += "_" if run == 0 else chr(ord("a") + run - 1)
            run = 0
        else:
            run += 1
            while run > 25:
                letters += "z"
                run -= 25
    return f"{w}x{h}:{letters}," + ",".join(str(n) for n in [*cols, *rows])


def decode(ident: str) -> tuple[int, int, list[tuple[int, int]], list[int], list[int]]:
    """(w, h, trees in reading order, column counts, row counts) of a game id; raises ValueError."""
    size, rest = ident.strip().split(":", 1)
    w, h = (int(n) for n in size.lower().split("x"))
    parts = rest.split(",")
    trees, pos = [], 0
    for ch in parts[0]:
        if ch == "_" or "a" <= ch <= "y":
            pos += 0 if ch == "_" else ord(ch) - ord("a") + 1
            trees.append((pos % w, pos // w))
            pos += 1
        elif ch == "z":
            pos += 25
        else:
            raise ValueError(f"not a Tents field: {ch!r}")
    if pos != w * h + 1 or len(parts) != 1 + w + h:
        raise ValueError("the field's size does not match its squares or counts")
    return w, h, trees[:-1], [int(n) for n in parts[1:1 + w]], [int(n) for n in parts[1 + w:]]


def draw_field(rng: np.random.Generator, w: int, h: int, tries: int = 400) -> dict[str, object]:
    """A random field of ``w`` x ``h`` with exactly one placement: {"id", "w", "h", "trees", "pitches"}."""
    count = round(w * h / 5)
    for _try in range(tries):
        tents: list[tuple[int, int]] = []
        cells = [(int(p) % w, int(p) // w) for p in rng.permutation(w * h)]
        for x, y in cells:
            if len(tents) == count:
                break
            if all(max(abs(x - a), abs(y - b)) > 1 for a, b in tents):
                tents.append((x, y))
        trees: list[tuple[int, int]] = []
        for x, y in tents:
            free = [(a, b) for a, b in ((x - 1, y), (x + 1, y), (x, y - 1), (x, y + 1))
                    if 0 <= a < w and 0 <= b < h and (a, b) not in tents and (a, b) not in trees]
            if not free:
                break
            trees.append(free[int(rng.integers(len(free)))])
        if len(trees) != len(tents) or len(tents) != count:
            continue
        ident = encode(w, h, trees, tents)
        answer = pitch_tents(ident)
        if answer.startswith("PITCHES"):
            return {"id": ident, "w": w, "h": h, "trees": sorted(trees, key=lambda c: (c[1], c[0])),
                    "pitches": answer.split()[1:]}
    raise RuntimeError(f"no field of {w}x{h} with one placement in {tries} tries")


def parse_refs(text: str, w: int, h: int) -> set[tuple[int, int]] | None:
    """The squares of grid references such as 'A1 c3, H8'; None when one is not a square of the field."""
    import re

    found = set()
    for ref in re.split(r"[\s,;]+", text.strip()):
        if not ref:
            continue
        match = re.fullmatch(r"([A-Za-z])(\d{1,2})", ref)
        if match is None:
            return None
        x, y = LETTERS.index(match.group(1).upper()), int(match.group(2)) - 1
        if not (x < w and 0 <= y < h):
            return None
        found.add((x, y))
    return found


def replay_tents(ident: str, moves: list[str]) -> tuple[set[tuple[int, int]] | None, str]:
    """(the squares holding a tent after the saved moves, '') or (None, what is wrong).

    A move is ';'-joined steps ``T x,y`` (tent), ``N x,y`` (no tent) or ``B x,y`` (blank); a move
    starting with 'S' is Game > Solve, which does not count as pitching the tents.
    """
    import re

    w, h, trees, _cols, _rows = decode(ident)
    tents: set[tuple[int, int]] = set()
    for move in moves:
        if move.startswith("S"):
            return None, "the saved game used Game > Solve"
        for step in move.split(";"):
            match = re.fullmatch(r"([TNB])(\d+),(\d+)", step)
            if match is None:
                return None, f"{step[:20]!r} is not a Tents move"
            x, y = int(match.group(2)), int(match.group(3))
            if not (0 <= x < w and 0 <= y < h) or (x, y) in trees:
                return None, f"{step!r} is off the field or on a tree"
            if match.group(1) == "T":
                tents.add((x, y))
            else:
                tents.discard((x, y))
    return tents, ""
