"""Weave-Games-1: solve a random peg-solitaire board with a search program, play it in Pegs, save the game.

The board exists only in the running Pegs window (it was loaded from a file
that setup deleted), and the shell cannot reach the desktop: the agent reads
the board off the screen and hands it to its program. Finding a sequence of
jumps that leaves one peg is a search problem for a program (CLI), whose plan
goes to a file; the plan must then be played in the Pegs window and the game
saved through its Game > Save dialog (GUI). The checker replays the saved game
from its own description; the save must belong to the desktop account, the
plan to the workspace account.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from weavegym.envs.setup_context import HOME, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.games.sgt_common import (
    read_still_board,
    save_via_dialog,
    saved_game,
    saved_game_outputs,
    solve_in_shell,
    start_hidden,
)
from weavegym.evaluators import Clause, Probe, Verdict

PEGS = "/usr/games/sgt-pegs"
SAVE = f"{HOME}/pegs.sav"
PLAN = f"{HOME}/pegs_solution.txt"
SIZE = 5
MIN_PEGS = 14
WINDOW_MARGIN = 40  # px around the window's reported geometry (the frame's offset) that the oracle searches
MOVE = re.compile(r"^(\d+),(\d+)-(\d+),(\d+)$")


def plan_jumps(board: str) -> list[str]:
    """Jumps that leave one peg, by depth-first search; [] when there are none.

    ``board`` is the board as the agent types it (rows top to bottom, separated by "/": P a peg, H an empty
    hole, O no hole), e.g. OPPPO/PPHPP/... This is also the oracle's CLI step: ``solver_command`` runs this
    function's source in the guest, so it stays self-contained.
    """
    cells = {(x, y): ch for y, row in enumerate(board.split("/")) for x, ch in enumerate(row)}
    holes = {p for p, ch in cells.items() if ch in "PH"}
    seen: set[frozenset[tuple[int, int]]] = set()

    def solve(pegs: frozenset[tuple[int, int]]) -> list[str] | None:
        if len(pegs) == 1:
            return []
        if pegs in seen:
            return None
        seen.add(pegs)
        for x, y in sorted(pegs):
            for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                mid, to = (x + dx, y + dy), (x + 2 * dx, y + 2 * dy)
                if mid in pegs and to in holes and to not in pegs:
                    rest = solve(pegs - {(x, y), mid} | {to})
                    if rest is not None:
                        return [f"{x},{y}-{to[0]},{to[1]}", *rest]
        return None

    return solve(frozenset(p for p, ch in cells.items() if ch == "P")) or []


def board_text(desc: str) -> str:
    """The board as an agent transcribes it from the window: rows of P/H/O joined by "/"."""
    return "/".join(desc[i:i + SIZE] for i in range(0, SIZE * SIZE, SIZE))


def setup(ctx: SetupContext) -> Prepared:
    seed = int(ctx.rng.integers(1, 2**31))
    out = ctx.run(f"{PEGS} --generate 8 '{SIZE}x{SIZE}random#{seed}' 2>/dev/null").stdout
    boards = [line.split(":", 1)[1] for line in out.split() if line.startswith(f"{SIZE}x{SIZE}:")]
    desc = next((b for b in boards if b.count("P") >= MIN_PEGS), max(boards, key=lambda b: b.count("P")))
    window = start_hidden(ctx, PEGS, "Pegs", f"{SIZE}x{SIZE}random", desc, "^Pegs$")
    return Prepared(params={}, truth={"desc": desc, "pegs": desc.count("P"), "window": window})


def replay(desc: str, moves: list[str]) -> tuple[int, str | None]:
    """Play ``moves`` on the board; (pegs left, None) or (pegs left, why the first bad move is illegal)."""
    board = {(i % SIZE, i // SIZE): ch for i, ch in enumerate(desc)}
    for n, move in enumerate(moves, 1):
        m = MOVE.match(move.strip())
        if m is None:
            return sum(v == "P" for v in board.values()), f"move {n} {move!r} is not x1,y1-x2,y2"
        x1, y1, x2, y2 = map(int, m.groups())
        mid = ((x1 + x2) // 2, (y1 + y2) // 2)
        jump = {abs(x2 - x1), abs(y2 - y1)} == {0, 2}
        if not (jump and board.get((x1, y1)) == "P" and board.get(mid) == "P" and board.get((x2, y2)) == "H"):
            return sum(v == "P" for v in board.values()), f"move {n} {move!r} is not a legal jump"
        board[(x1, y1)], board[mid], board[(x2, y2)] = "H", "H", "P"
    return sum(v == "P" for v in board.values()), None


def _saved(probe: Probe) -> tuple[str, list[str]] | None:
    """(DESC, the moves up to the saved position) of ~/pegs.sav, or None when it is no Pegs save."""
    return saved_game(probe.read_text(SAVE), "Pegs")


def _plan(probe: Probe) -> list[str] | None:
    text = probe.read_text(PLAN)
    return None if text is None else [line.strip() for line in text.splitlines() if line.strip()]


def check_save_board(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    saved = _saved(probe)
    if saved is None:
        return Verdict.failed(f"{SAVE} is missing or not a Pegs save file")
    return Verdict.check(saved[0] == truth["desc"], f"saved board {saved[0]!r}, the board on screen was "
                         f"{truth['desc']!r}")


def check_save_legal(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    saved = _saved(probe)
    if saved is None or not saved[1]:
        return Verdict.failed("no saved moves")
    _left, error = replay(truth["desc"], saved[1])
    return Verdict.check(error is None, error or f"all {len(saved[1])} saved moves are legal jumps")


def check_save_solved(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    saved = _saved(probe)
    if saved is None:
        return Verdict.failed("no saved game")
    left, error = replay(truth["desc"], saved[1])
    return Verdict.check(error is None and left == 1,
                         f"saved game leaves {left} peg(s) of {truth['pegs']}" + (f" ({error})" if error else ""))


def check_plan(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    plan = _plan(probe)
    if not plan:
        return Verdict.failed(f"{PLAN} is missing or empty")
    left, error = replay(truth["desc"], plan)
    return Verdict.check(error is None and left == 1,
                         f"{PLAN}: {len(plan)} jumps leave {left} peg(s)" + (f"; {error}" if error else ""))


def check_played_plan(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    saved, plan = _saved(probe), _plan(probe)
    if saved is None or not plan:
        return Verdict.failed("the saved game or the plan is missing")
    return Verdict.check(saved[1] == plan, f"saved moves {saved[1][:3]}... vs plan {plan[:3]}... "
                         f"({len(saved[1])} vs {len(plan)} jumps)")


# sgt-pegs draws cells TILE px apart (its default size), the first cell's centre FIRST_CELL px right of and below the
# top-left of its drawing area. Pegs are pure blue, holes a grey dot (the board's bevelled edge shares their grey);
# obstacles are left as the drawing area's background. Measured in the VM (base image, openbox).
TILE, FIRST_CELL = 33, 32
HOLE_GREY, BACKGROUND_GREYS, BEVEL_WHITE = 173, (212, 213, 214), 255
CELL_SAMPLES = ((0, 0), (-5, 0), (5, 0), (0, -5), (0, 5), (-4, -4), (4, -4), (-4, 4), (4, 4))  # inside a hole


def _in_drawing_area(pixel: Any) -> bool:
    """A pixel of the drawing area: its background, the bevel, a hole, a peg or a peg's anti-aliased rim (but
    not the menu bar's separator, the window frame or the desktop)."""
    r, g, b = (int(v) for v in pixel[:3])
    if abs(r - g) > 6:
        return False
    if b - r >= 20 and b >= 200:
        return True  # a peg or its rim
    return abs(b - r) <= 6 and (r in BACKGROUND_GREYS or r >= BEVEL_WHITE - 2 or abs(r - HOLE_GREY) <= 4)


def _edge(screen: np.ndarray, x: int, y: int, dx: int, dy: int) -> int:
    """The last coordinate (x for a horizontal walk, y for a vertical one) still in the drawing area, walking
    from (x, y) in steps of (dx, dy)."""
    height, width = screen.shape[:2]
    while 0 <= x + dx < width and 0 <= y + dy < height and _in_drawing_area(screen[y + dy, x + dx]):
        x, y = x + dx, y + dy
    return x if dx else y


def _run_centres(line: np.ndarray) -> list[int]:
    """The middles of the runs of True in ``line`` (the pegs a row or column of the mask crosses)."""
    hits = np.flatnonzero(line)
    return [int(run.mean()) for run in np.split(hits, np.flatnonzero(np.diff(hits) > 1) + 1)] if len(hits) else []


def _cell(screen: np.ndarray, x: float, y: float) -> str | None:
    """P, H or O: what most of the points near a cell's centre show (the pointer may cover some of them); None
    when none of them is a peg, a hole or the background."""
    votes: dict[str, int] = {}
    for dx, dy in CELL_SAMPLES:
        r, g, b = (int(v) for v in screen[round(y) + dy, round(x) + dx][:3])
        grey = max(r, g, b) - min(r, g, b) <= 6
        kind = ("P" if b > 200 and r < 80 and g < 80 else "H" if grey and abs(r - HOLE_GREY) <= 8
                else "O" if grey and r in BACKGROUND_GREYS else None)
        if kind is not None:
            votes[kind] = votes.get(kind, 0) + 1
    return max(votes, key=lambda k: votes[k]) if votes else None


def read_board(screen: np.ndarray, region: tuple[int, int, int, int] | list[int]
               ) -> tuple[str, list[float], list[float]] | None:
    """The board a Pegs window inside ``region`` (x, y, width, height) shows, read off the screen as an agent
    reads it: its desc (P peg, H hole, O obstacle, row by row) and the screen x of each column and y of each row;
    None until one whole, still board shows there.

    The pegs fix the grid's phase; the drawing area's top-left (found by walking from the first peg's centre
    to the area's edges) fixes which column and row the first peg is in, since a whole edge row or column may
    be obstacles.
    """
    x0, y0, w, h = (int(v) for v in region)
    crop = screen[max(y0, 0):y0 + h, max(x0, 0):x0 + w].astype(int)
    x0, y0 = max(x0, 0), max(y0, 0)
    blue = (crop[..., 2] > 200) & (crop[..., 0] < 80) & (crop[..., 1] < 80)
    axes = []
    for axis in (0, 1):  # columns (x), then rows (y)
        hits = np.flatnonzero(blue.any(axis=axis))
        runs = [r for r in np.split(hits, np.flatnonzero(np.diff(hits) > 1) + 1) if len(r) > 4] if len(hits) else []
        if not runs:
            return None
        centres = [(x0, y0)[axis] + float(r.mean()) for r in runs]
        cells = [round((c - centres[0]) / TILE) for c in centres]
        if any(abs(c - centres[0] - k * TILE) > 4 for c, k in zip(centres, cells, strict=True)):
            return None  # not one board's grid (a dialog over it, a window still being drawn)
        step, start = np.polyfit(cells, centres, 1) if len(set(cells)) > 1 else (float(TILE), centres[0])
        axes.append((float(step), float(start), cells[-1]))
    (xstep, xstart, xspan), (ystep, ystart, yspan) = axes
    # A peg in the first peg column (any row) and one in the first peg row, to walk to the area's edges from.
    column = blue[:, round(xstart) - x0] if 0 <= round(xstart) - x0 < blue.shape[1] else np.zeros(0, bool)
    row = blue[round(ystart) - y0] if 0 <= round(ystart) - y0 < blue.shape[0] else np.zeros(0, bool)
    if not column.any() or not row.any():
        return None
    # From every peg of the first column (row) to the area's edge; the furthest walk wins, since the pointer may
    # lie across one of them.
    left = min(_edge(screen, round(xstart), y0 + centre, -1, 0) for centre in _run_centres(column))
    top = min(_edge(screen, x0 + centre, round(ystart), 0, -1) for centre in _run_centres(row))
    first_x, first_y = round((xstart - left - FIRST_CELL) / xstep), round((ystart - top - FIRST_CELL) / ystep)
    if min(first_x, first_y) < 0 or first_x + xspan >= SIZE or first_y + yspan >= SIZE:
        return None
    xs = [xstart + xstep * (k - first_x) for k in range(SIZE)]
    ys = [ystart + ystep * (k - first_y) for k in range(SIZE)]
    cells = [_cell(screen, x, y) for y in ys for x in xs]
    if None in cells:
        return None
    desc = "".join(cells)  # type: ignore[arg-type]
    return desc, xs, ys


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    x, y, w, h = ctx.truth["window"]
    region = (x - WINDOW_MARGIN, y - WINDOW_MARGIN, w + 2 * WINDOW_MARGIN, h + 2 * WINDOW_MARGIN)
    board = yield from read_still_board(ctx, lambda screen: read_board(screen, region), TASK.id)
    if board is None:
        return
    desc, xs, ys = board  # read off the window, as an agent would: the truth's board is withheld
    plan = yield from solve_in_shell(ctx, plan_jumps, board_text(desc), answer_file="pegs_solution.txt", label="PLAN")
    for move in plan:
        x1, y1, x2, y2 = map(int, MOVE.match(move).groups())
        yield {"kind": "drag", "x": round(xs[x1]), "y": round(ys[y1]), "to_x": round(xs[x2]), "to_y": round(ys[y2])}
    yield from save_via_dialog(ctx, SAVE, ups=5)  # Game > Save... is the fifth item from the bottom
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Games-1",
    title="Solve the peg-solitaire board with a program, play it, save the game",
    instruction=(
        "The Pegs window shows a peg-solitaire board: a jump moves a peg over an orthogonally adjacent peg "
        "into an empty hole two cells away and removes the jumped peg. 1) Find a sequence of jumps that "
        "leaves exactly one peg, and write it to ~/pegs_solution.txt, one jump per line as x1,y1-x2,y2 "
        "(0-based column,row of the board's 5x5 grid, counted from the top-left cell; e.g. 3,3-3,1). "
        "2) Play exactly that sequence in the Pegs window. 3) Save the finished game with the window's "
        "Game > Save... dialog as ~/pegs.sav, then finish. Do not start a new game."),
    channels=Channels(
        gui="read the board off the Pegs window, play the jumps, save the game through its Save dialog",
        cli="run a search program that finds the winning sequence of jumps and write it to a file",
        why_both="the board lives only in the GUI and the save must come from it, while finding a one-peg "
                 "finish is a search for a program"),
    setup=setup,
    clauses=(
        Clause("save_board", "~/pegs.sav is a Pegs save of the board on screen", check_save_board,
               critical=True, cap=0.25),
        Clause("save_legal", "every saved move is a legal jump", check_save_legal),
        Clause("save_solved", "the saved game ends with exactly one peg", check_save_solved, weight=2.0,
               critical=True, cap=0.5),
        Clause("plan_file", "~/pegs_solution.txt lists jumps that leave one peg", check_plan, weight=2.0),
        Clause("played_plan", "the saved game plays exactly the planned jumps", check_played_plan),
    ),
    **saved_game_outputs(SAVE, PLAN, "Pegs", "~/pegs_solution.txt"),
    withheld=("desc",),
    oracle=oracle,
    profile="base",
    apps=("sgt-pegs", "python3"),
    max_steps=110,
    time_budget_s=1200.0,
)
