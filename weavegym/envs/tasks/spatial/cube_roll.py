"""Weave-Spatial-1: find the shortest way to roll a cube over all six blue squares, roll it, save the game.

The puzzle (sgt-puzzles Cube) is a 4x4 grid with six blue squares; rolling the
cube onto a blue square picks the blue up onto the face that lands on it, and
rolling a blue face onto a white square puts it down. The board exists only in
the running Cube window (setup deleted the file it was loaded from), and the
shell cannot reach the desktop: the agent reads the board off the screen and
hands it to its program. Tracking the cube's faces through every roll to find
the *shortest* route is a breadth-first search for a program (CLI); the route
must be rolled in the window and the game saved through its Game > Save dialog
(GUI).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from weavegym.envs.setup_context import HOME, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.games.sgt_common import (
    ShortestPlayChecks,
    read_still_board,
    save_via_dialog,
    saved_game_outputs,
    solve_in_shell,
    start_hidden,
)
from weavegym.evaluators import Clause

CUBE = "/usr/games/sgt-cube"
SAVE = f"{HOME}/cube.sav"
ROUTE = f"{HOME}/cube_route.txt"
W = H = 4
ARROWS = {"L": "Left", "R": "Right", "U": "Up", "D": "Down"}
ALL_BLUE = 63


def parse_desc(desc: str) -> tuple[int, int]:
    """(cell of the cube, bitmask of blue squares; bit i = cell i, row-major) of a Cube description."""
    squares, pos = desc.split(",")
    bits = "".join(f"{int(c, 16):04b}" for c in squares)[:W * H]
    return int(pos), sum(int(b) << i for i, b in enumerate(bits))


def roll(state: tuple[int, int, int], move: str, width: int, height: int) -> tuple[int, int, int] | None:
    """The (cell, blue squares, blue faces) after one roll (L R U D), or None when it leaves the grid.

    Shared by the checker's replay and the guest's solver (``solver_command`` ships it), so self-contained.
    """
    step = {"L": (-1, 0), "R": (1, 0), "U": (0, -1), "D": (0, 1)}[move]
    # Faces as bits (bottom, top, north, south, east, west); after a roll, face i is the old face order[i].
    order = {"R": (4, 5, 2, 3, 1, 0), "L": (5, 4, 2, 3, 0, 1), "U": (2, 3, 1, 0, 4, 5), "D": (3, 2, 0, 1, 4, 5)}[move]
    cell, grid, faces = state
    x, y = cell % width + step[0], cell // width + step[1]
    if not (0 <= x < width and 0 <= y < height):
        return None
    new = sum((faces >> order[i] & 1) << i for i in range(6))
    cell = y * width + x
    if (new & 1) != (grid >> cell & 1):  # the bottom face and the square swap colours
        new, grid = new ^ 1, grid ^ (1 << cell)
    return cell, grid, new


def shortest_route(board: str) -> str:
    """A shortest route of rolls (letters L R U D) that makes all six faces blue, by breadth-first search.

    ``board`` is the board as the agent types it (rows top to bottom, separated by "/": B a blue square,
    . a white one, C the cube), e.g. B..C/.B../... This is also the oracle's CLI step: ``solver_command`` runs
    this function's source (and ``roll``'s) in the guest, so it stays self-contained.
    """
    from collections import deque

    rows = board.split("/")
    width, height, cells = len(rows[0]), len(rows), "".join(rows)
    start = (cells.index("C"), sum(1 << i for i, c in enumerate(cells) if c == "B"), 0)
    prev: dict[tuple[int, int, int], tuple[tuple[int, int, int], str] | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if state[2] == 63:  # all six faces blue
            route = []
            while (link := prev[state]) is not None:
                state, move = link
                route.append(move)
            return "".join(reversed(route))
        for move in "LRUD":
            nxt = roll(state, move, width, height)
            if nxt is not None and nxt not in prev:
                prev[nxt] = (state, move)
                queue.append(nxt)
    raise ValueError(f"the Cube board {board!r} has no solution")


def replay(desc: str, moves: str) -> tuple[bool, str | None]:
    """(all six faces blue at the end, None) or (False, why a roll is impossible)."""
    state: tuple[int, int, int] | None = (*parse_desc(desc), 0)
    for n, move in enumerate(moves, 1):
        if move not in ARROWS:
            return False, f"roll {n} {move!r} is not one of L R U D"
        state = roll(state, move, W, H) if state else None
        if state is None:
            return False, f"roll {n} ({move}) leaves the grid"
    return state is not None and state[2] == ALL_BLUE, None


def board_text(desc: str) -> str:
    """The board as an agent transcribes it from the window: rows of B (blue), . (white), C (the cube) joined by "/".

    The game always starts the cube on a white square, so the square under it is known.
    """
    cube, blue = parse_desc(desc)
    cells = ["C" if i == cube else "B" if blue >> i & 1 else "." for i in range(W * H)]
    return "/".join("".join(cells[y * W:(y + 1) * W]) for y in range(H))


def setup(ctx: SetupContext) -> Prepared:
    seed = int(ctx.rng.integers(1, 2**31))
    out = ctx.run(f"{CUBE} --generate 4 'c{W}x{H}#{seed}' 2>/dev/null").stdout
    boards = [line.split(":", 1)[1] for line in out.split() if line.startswith(f"c{W}x{H}:")]
    desc = max(boards, key=lambda b: len(shortest_route(board_text(b))))
    window = start_hidden(ctx, CUBE, "Cube", f"c{W}x{H}", desc, "^Cube$")
    best = shortest_route(board_text(desc))
    return Prepared(params={}, truth={"desc": desc, "best": best, "window": window})


CHECKS = ShortestPlayChecks(game="Cube", save=SAVE, moves_file=ROUTE, unit="rolls",
                            solved_as="with all six faces blue", replay=replay, written=str.upper)


# How sgt-cube draws the board (measured in the VM, base image): dark grid lines around square cells; the cube as
# a square face CUBE_OFFSET px up and left of its cell, joined to the cell's corners by short diagonals.
DARK, CUBE_OFFSET = 60, 15


def _dark_lines(dark: np.ndarray, axis: int, offset: int, low: int, high: int) -> list[int]:
    """Screen coordinates of the lines (columns for axis 0, rows for axis 1) with between low and high dark
    pixels; neighbours merged into their middle."""
    counts = dark.sum(axis=axis)
    hits = np.flatnonzero((counts >= low) & (counts <= high))
    return [offset + round(float(run.mean())) for run in np.split(hits, np.flatnonzero(np.diff(hits) > 1) + 1)
            ] if len(hits) else []


def read_board(screen: np.ndarray, window: list[int]) -> str | None:
    """The board in the window read off the screen, as an agent transcribes it (board_text's form: rows of B
    blue, . white, C the cube, joined by "/"); None until a whole W x H grid and one cube show."""
    x0, y0, w, h = (int(v) for v in window)
    crop = screen[y0:y0 + h, x0:x0 + w].astype(int)
    dark = crop.max(axis=2) < DARK
    # Grid lines run (nearly: the cube hides parts of some) the board's full height or width. The cube is drawn up
    # and left of its cell, so the right and bottom lines always show: the grid is counted back from them.
    grid = []
    for axis, offset, length in ((0, x0, h), (1, y0, w)):
        longest = max(int(dark.sum(axis=axis).max(initial=0)), 1)
        lines = _dark_lines(dark, axis, offset, int(longest * 0.7), length)
        if len(lines) < 2:
            return None
        size = float(min(b - a for a, b in itertools.pairwise(lines)))
        if any(abs((lines[-1] - line) / size - round((lines[-1] - line) / size)) * size > 3 for line in lines) \
                or round((lines[-1] - lines[0]) / size) > (W if axis == 0 else H):
            return None
        grid.append((lines[-1] - (W if axis == 0 else H) * size, size))
    (gx, size), (gy, _size) = grid
    xs, ys = [gx + k * size for k in range(W + 1)], [gy + k * size for k in range(H + 1)]
    # The cube's face: the shorter lines, one face apart, not on the grid.
    face_x = [x for x in _dark_lines(dark, 0, x0, int(size * 0.7), int(size * 1.6)) if min(abs(x - g) for g in xs) > 4]
    face_y = [y for y in _dark_lines(dark, 1, y0, int(size * 0.7), int(size * 1.6)) if min(abs(y - g) for g in ys) > 4]
    if len(face_x) != 2 or len(face_y) != 2:
        return None
    cube = (round((face_x[0] + CUBE_OFFSET - xs[0]) / size), round((face_y[0] + CUBE_OFFSET - ys[0]) / size))
    rows = []
    for row in range(H):
        cells = ""
        for column in range(W):
            centre = screen[round(ys[0] + (row + 0.5) * size), round(xs[0] + (column + 0.5) * size)]
            r, g, b = (int(v) for v in centre[:3])
            cells += ("C" if (column, row) == cube else "B" if b > 200 and r < 80 and g < 80
                      else "." if min(r, g, b) > 200 else "?")
        rows.append(cells)
    text = "/".join(rows)
    return None if "?" in text or text.count("C") != 1 else text


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    board = yield from read_still_board(ctx, lambda screen: read_board(screen, ctx.truth["window"]), TASK.id)
    if board is None:
        return
    # Read off the window, as an agent would: the truth's board is withheld.
    route = yield from solve_in_shell(ctx, shortest_route, board, answer_file="cube_route.txt", label="ROUTE",
                                      helpers=(roll,))
    for move in "".join(route):
        yield {"kind": "key", "keys": ARROWS[move]}
    yield from save_via_dialog(ctx, SAVE, ups=4)  # Game > Save... is the fourth item from the bottom
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Spatial-1",
    title="Roll the cube over all blue squares by the shortest route",
    instruction=(
        "The Cube window shows a 4x4 grid with some blue squares and a cube. Rolling the cube onto a blue square "
        "picks the blue up onto the cube face that lands on it; rolling a blue face onto a white square puts it "
        "down again. The puzzle is solved when all six faces of the cube are blue. 1) Work out the shortest "
        "possible sequence of rolls that solves it and write it to ~/cube_route.txt as one line of letters "
        "L, R, U, D (left, right, up, down as seen on screen), e.g. RRULD. 2) Roll the cube along exactly that "
        "route in the Cube window (the arrow keys roll it). 3) Save the game with the window's Game > Save... "
        "dialog as ~/cube.sav, then finish. Do not start a new game."),
    channels=Channels(
        gui="read the board off the Cube window, roll the cube, save the game through its Save dialog",
        cli="run a breadth-first search over cube positions and face colourings for the shortest route",
        why_both="the board lives only in the GUI and the save must come from it, while proving a route "
                 "shortest means searching every roll sequence with a program"),
    setup=setup,
    clauses=(
        Clause("save_board", "~/cube.sav is a Cube save of the board on screen", CHECKS.check_save_board,
               critical=True, cap=0.25),
        Clause("save_completed", "the saved game ends with all six faces blue", CHECKS.check_save_solved, weight=2.0,
               critical=True, cap=0.5),
        Clause("save_shortest", "the saved game takes the fewest possible rolls", CHECKS.check_save_shortest),
        Clause("route_file", "~/cube_route.txt holds a shortest solving route", CHECKS.check_moves_file, weight=2.0),
        Clause("rolled_route", "the saved game rolls exactly the route in the file", CHECKS.check_played),
    ),
    **saved_game_outputs(SAVE, ROUTE, "Cube", "~/cube_route.txt"),
    withheld=("desc",),
    oracle=oracle,
    profile="base",
    apps=("sgt-cube", "python3"),
    max_steps=100,
    time_budget_s=1200.0,
)
