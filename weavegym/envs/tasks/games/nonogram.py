"""Nonograms as sgt-pattern knows them (no TASK here): clues, game ids, a solution counter and a save replayer.

Why a module of its own: Weave-Games-6's setup draws its submissions with these functions, its oracle's shell
step runs ``judge_puzzle``'s own source in the guest (``sgt_common.solver_command``), and its checker replays
the saved games with ``replay_pattern``, so the three cannot drift apart.

A Pattern game id is ``WxH:`` then the clues of the columns left to right and of the rows top to bottom, all
separated by "/", the numbers of one clue by "." (``6x6:2.1/3/.../1.1.1``). A grid here is a tuple of row
strings of "#" (filled) and "." (empty).
"""

from __future__ import annotations

from typing import Any

import numpy as np

SIZE = 6
Grid = tuple[str, ...]


def runs(line: str) -> list[int]:
    """The clue of one row or column: the lengths of its runs of "#"."""
    return [len(part) for part in line.split(".") if part]


def clues(grid: Grid) -> tuple[list[list[int]], list[list[int]]]:
    """(column clues left to right, row clues top to bottom) of a grid."""
    columns = ["".join(row[x] for row in grid) for x in range(len(grid[0]))]
    return [runs(c) for c in columns], [runs(r) for r in grid]


def game_id(columns: list[list[int]], rows: list[list[int]]) -> str:
    """The id the agent types into Game > Specific... for these clues."""
    body = "/".join(".".join(map(str, clue)) for clue in (*columns, *rows))
    return f"{len(columns)}x{len(rows)}:{body}"


def judge_puzzle(puzzle: str) -> str:
    """SOUND and the solution's rows ("/"-joined), AMBIGUOUS (two or more solutions) or BROKEN (none).

    ``puzzle`` is the Pattern game id as the agent types it, e.g. 6x6:2.1/3/... This is also the oracle's CLI
    step: ``solver_command`` runs this function's source in the guest, so it stays self-contained. A depth-first
    search over the rows' possible fillings, pruned by what the columns still allow, that stops at a second
    solution.
    """
    size, body = puzzle.strip().split(":", 1)
    width, height = (int(n) for n in size.lower().split("x"))
    specs = [[int(n) for n in part.split(".") if n] for part in body.split("/")]
    if len(specs) != width + height:
        raise ValueError(f"{len(specs)} clues, a {width}x{height} puzzle has {width + height}")
    columns, rows = specs[:width], specs[width:]

    def fillings(clue: list[int], length: int) -> list[str]:
        if not clue:
            return ["." * length]
        first, rest = clue[0], clue[1:]
        found = []
        need = sum(rest) + len(rest)
        for start in range(length - need - first + 1):
            head = "." * start + "#" * first
            if rest:
                found += [head + "." + tail for tail in fillings(rest, length - len(head) - 1)]
            else:
                found.append(head + "." * (length - len(head)))
        return found

    def column_ok(x: int, cells: str, final: bool) -> bool:
        parts = [len(p) for p in cells.split(".") if p]
        clue = columns[x]
        if final:
            return parts == clue
        if not parts:
            return True
        done = parts[:-1] if cells.endswith("#") else parts
        if len(done) > len(clue) or done != clue[:len(done)]:
            return False
        if cells.endswith("#"):
            index = len(parts) - 1
            return index < len(clue) and parts[-1] <= clue[index]
        return True

    options = [fillings(clue, width) for clue in rows]
    solutions: list[list[str]] = []

    def search(chosen: list[str]) -> None:
        if len(solutions) > 1:
            return
        y = len(chosen)
        if y == height:
            solutions.append(list(chosen))
            return
        for line in options[y]:
            grid = [*chosen, line]
            if all(column_ok(x, "".join(r[x] for r in grid), y + 1 == height) for x in range(width)):
                search(grid)

    search([])
    if not solutions:
        return "BROKEN"
    return "AMBIGUOUS" if len(solutions) > 1 else "SOUND " + "/".join(solutions[0])


# ---- setup: drawing the submissions --------------------------------------------------------------------------

def _random_grid(rng: np.random.Generator, size: int) -> Grid:
    """A grid with a filled and an empty cell in every row and column (no line is trivially blank or full)."""
    while True:
        cells = rng.random((size, size)) < rng.uniform(0.45, 0.62)
        if all(0 < cells[i].sum() < size and 0 < cells[:, i].sum() < size for i in range(size)):
            return tuple("".join("#" if c else "." for c in row) for row in cells)


def draw_puzzle(rng: np.random.Generator, kind: str, size: int = SIZE) -> dict[str, Any]:
    """A submission of ``kind`` (sound, ambiguous or broken): its clues, game id and (if sound) solution.

    A broken one is a grid's clues with one row's clue swapped for another of the same cell count (so the
    rows and the columns still fill as many cells), chosen so that nothing fits.
    """
    while True:
        grid = _random_grid(rng, size)
        columns, rows = clues(grid)
        if kind == "broken":
            y = int(rng.integers(size))
            others = sorted({tuple(runs(line)) for line in _lines(size) if line.count("#") == grid[y].count("#")}
                            - {tuple(rows[y])})
            if not others:
                continue
            rows = [*rows[:y], list(others[int(rng.integers(len(others)))]), *rows[y + 1:]]
        ident = game_id(columns, rows)
        verdict = judge_puzzle(ident)
        if verdict.split()[0].lower() == kind:
            return {"kind": kind, "id": ident, "columns": columns, "rows": rows,
                    "solution": verdict.split()[1] if kind == "sound" else ""}


def _lines(size: int) -> list[str]:
    return [format(n, f"0{size}b").replace("1", "#").replace("0", ".") for n in range(2 ** size)]


# ---- the checker: replaying a Pattern save -------------------------------------------------------------------

def replay_pattern(ident: str, moves: list[str]) -> tuple[Grid | None, str]:
    """The grid's filled cells after ``moves`` (F/E/U x,y,w,h rectangles) from a blank board, and a problem.

    A Solve move (``S`` and the cells) counts as a problem: the proof must be played, not revealed.
    """
    width, height = (int(n) for n in ident.split(":", 1)[0].split("x"))
    cells = [["?"] * width for _ in range(height)]
    for move in moves:
        if move.startswith("S"):
            return None, "the saved game used Game > Solve"
        try:
            kind = move[0]
            x, y, w, h = (int(n) for n in move[1:].split(","))
        except (IndexError, ValueError):
            return None, f"unreadable move {move[:20]!r}"
        if kind not in "FEU" or min(x, y, w, h) < 0 or x + w > width or y + h > height:
            return None, f"move {move[:20]!r} is not a move on a {width}x{height} board"
        for yy in range(y, y + h):
            for xx in range(x, x + w):
                cells[yy][xx] = {"F": "#", "E": ".", "U": "?"}[kind]
    return tuple("".join("#" if c == "#" else "." for c in row) for row in cells), ""
