"""Weave-Games-3: plan a complete clearance of a Same Game board with a program, play it, save the game.

Same Game removes a connected group of two or more same-coloured tiles; the
tiles above fall and empty columns close up to the left, so whether a board
can be cleared to the last tile depends on the order of every removal: a
search for a program (CLI), whose plan goes to a file. The board exists only
in the running window (setup deleted the file it was loaded from), and the
shell cannot reach the desktop: the agent reads the board off the screen and
hands it to its program. The plan must be clicked there and the game saved
through its Game > Save dialog (GUI).
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

SAMEGAME = "/usr/games/sgt-samegame"
SAVE = f"{HOME}/samegame.sav"
PLAN = f"{HOME}/samegame_plan.txt"
W, H = 10, 5
PARAMS = f"{W}x{H}c3s2"
Board = tuple[tuple[str, ...], ...]  # columns, each listed bottom to top; empty columns are dropped


def plan_clearance(board: str) -> list[str]:
    """Removals ("x,row", row 0 at the top) that clear the board, by depth-first search; [] when none do.

    ``board`` is the board as the agent types it (rows top to bottom, separated by "/", one digit per tile
    naming its colour), e.g. 1231132213/... Groups are tried smallest first. This is also the oracle's CLI
    step: ``solver_command`` runs this function's source in the guest, so it stays self-contained.
    """
    rows = board.split("/")
    height = len(rows)
    Cols = tuple[tuple[str, ...], ...]  # columns, each bottom to top; empty columns dropped
    start: Cols = tuple(tuple(rows[y][x] for y in range(height - 1, -1, -1)) for x in range(len(rows[0])))

    def groups(cols: Cols) -> list[list[tuple[int, int]]]:
        seen: set[tuple[int, int]] = set()
        out = []
        for x, col in enumerate(cols):
            for y in range(len(col)):
                if (x, y) in seen:
                    continue
                stack, group = [(x, y)], []
                seen.add((x, y))
                while stack:
                    a, b = stack.pop()
                    group.append((a, b))
                    for na, nb in ((a + 1, b), (a - 1, b), (a, b + 1), (a, b - 1)):
                        if 0 <= na < len(cols) and 0 <= nb < len(cols[na]) and (na, nb) not in seen \
                                and cols[na][nb] == col[y]:
                            seen.add((na, nb))
                            stack.append((na, nb))
                if len(group) > 1:
                    out.append(group)
        return out

    def without(cols: Cols, group: list[tuple[int, int]]) -> Cols:
        gone = set(group)
        kept = (tuple(v for y, v in enumerate(col) if (x, y) not in gone) for x, col in enumerate(cols))
        return tuple(col for col in kept if col)

    tried: set[Cols] = set()

    def solve(cols: Cols) -> list[str] | None:
        if not cols:
            return []
        if cols in tried:
            return None
        tried.add(cols)
        for group in sorted(groups(cols), key=len):
            rest = solve(without(cols, group))
            if rest is not None:
                x, y = group[0]
                return [f"{x},{height - 1 - y}", *rest]
        return None

    return solve(start) or []


def board_of(desc: str) -> Board:
    values = desc.split(",")
    return tuple(tuple(values[y * W + x] for y in range(H - 1, -1, -1)) for x in range(W))


def board_text(desc: str) -> str:
    """The board as an agent transcribes it from the window: rows of colour digits joined by "/"."""
    values = desc.split(",")
    return "/".join("".join(values[y * W:(y + 1) * W]) for y in range(H))


def group_at(board: Board, x: int, row: int) -> set[tuple[int, int]]:
    """The same-coloured group (as (column, height-from-bottom) cells) holding the tile at column x, row."""
    y = H - 1 - row
    if not (0 <= x < len(board) and 0 <= y < len(board[x])):
        return set()
    colour, group, stack = board[x][y], {(x, y)}, [(x, y)]
    while stack:
        a, b = stack.pop()
        for na, nb in ((a + 1, b), (a - 1, b), (a, b + 1), (a, b - 1)):
            if 0 <= na < len(board) and 0 <= nb < len(board[na]) and (na, nb) not in group \
                    and board[na][nb] == colour:
                group.add((na, nb))
                stack.append((na, nb))
    return group


def remove(board: Board, group: set[tuple[int, int]]) -> Board:
    cols = [tuple(v for y, v in enumerate(col) if (x, y) not in group) for x, col in enumerate(board)]
    return tuple(col for col in cols if col)


def replay_plan(desc: str, plan: list[str]) -> tuple[int, str | None]:
    """Remove the group under each "x,row" of the plan; (tiles left, None) or (tiles left, the first error)."""
    board = board_of(desc)
    for n, step in enumerate(plan, 1):
        m = re.fullmatch(r"\s*(\d+)\s*,\s*(\d+)\s*", step)
        group = group_at(board, int(m.group(1)), int(m.group(2))) if m else set()
        if len(group) < 2:
            return sum(map(len, board)), f"step {n} {step!r} is not on a group of two or more tiles"
        board = remove(board, group)
    return sum(map(len, board)), None


def replay_moves(desc: str, moves: list[str]) -> tuple[int, str | None]:
    """Replay saved "M<index,...>" moves (row-major indices of the board at that moment)."""
    board = board_of(desc)
    for n, move in enumerate(moves, 1):
        try:
            cells = {(i % W, H - 1 - i // W) for i in map(int, move.removeprefix("M").split(","))}
        except ValueError:
            return sum(map(len, board)), f"move {n} {move!r} is not a removal"
        x, y = min(cells)
        if len(cells) < 2 or group_at(board, x, H - 1 - y) != cells:
            return sum(map(len, board)), f"move {n} {move!r} is not a whole group"
        board = remove(board, cells)
    return sum(map(len, board)), None


def setup(ctx: SetupContext) -> Prepared:
    seed = int(ctx.rng.integers(1, 2**31))
    out = ctx.run(f"{SAMEGAME} --generate 1 '{PARAMS}#{seed}' 2>/dev/null").stdout
    desc = next(line.split(":", 1)[1] for line in out.split() if line.startswith(f"{PARAMS}:"))
    window = start_hidden(ctx, SAMEGAME, "Same Game", PARAMS, desc, "^Same Game$")
    return Prepared(params={}, truth={"desc": desc, "window": window})


def _saved(probe: Probe) -> tuple[str, list[str]] | None:
    return saved_game(probe.read_text(SAVE), "Same Game")


def _plan(probe: Probe) -> list[str] | None:
    text = probe.read_text(PLAN)
    return None if text is None else [line for line in text.splitlines() if line.strip()]


def check_save_board(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    saved = _saved(probe)
    if saved is None:
        return Verdict.failed(f"{SAVE} is missing or not a Same Game save file")
    return Verdict.check(saved[0] == truth["desc"], f"saved board {saved[0][:40]!r}..., the board on screen was "
                         f"{truth['desc'][:40]!r}...")


def check_save_cleared(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    saved = _saved(probe)
    if saved is None:
        return Verdict.failed("no saved game")
    left, error = replay_moves(truth["desc"], saved[1])
    return Verdict.check(error is None and left == 0, f"{len(saved[1])} saved removals leave {left} of {W * H} "
                         "tiles" + (f" ({error})" if error else ""))


def check_plan(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    plan = _plan(probe)
    if not plan:
        return Verdict.failed(f"{PLAN} is missing or empty")
    left, error = replay_plan(truth["desc"], plan)
    return Verdict.check(error is None and left == 0, f"{PLAN}: {len(plan)} removals leave {left} tiles"
                         + (f"; {error}" if error else ""))


def check_played_plan(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    saved, plan = _saved(probe), _plan(probe)
    if saved is None or not plan:
        return Verdict.failed("the saved game or the plan is missing")
    board, same = board_of(truth["desc"]), len(saved[1]) == len(plan)
    for move, step in zip(saved[1], plan, strict=False):
        x, row = map(int, step.split(","))
        group = group_at(board, x, row)
        cells = {(i % W, H - 1 - i // W) for i in map(int, move.removeprefix("M").split(","))}
        if group != cells:
            same = False
            break
        board = remove(board, group)
    return Verdict.check(same, f"{len(saved[1])} saved removals vs {len(plan)} planned; "
                         f"{'the same groups in the same order' if same else 'they differ'}")


def _grid(screen: np.ndarray, window: list[int]) -> tuple[list[float], list[float]] | None:
    """Screen x of each column and y of each row: the full board's coloured tiles span W x H cells (None: no
    tile shows)."""
    x0, y0, w, h = window
    crop = screen[y0:y0 + h, x0:x0 + w].astype(int)
    coloured = ((crop.max(axis=2) - crop.min(axis=2)) > 100) & (crop.min(axis=2) < 30)
    xs, ys = np.flatnonzero(coloured.any(axis=0)), np.flatnonzero(coloured.any(axis=1))
    if not len(xs):
        return None
    tw, th = (xs[-1] + 1 - xs[0]) / W, (ys[-1] + 1 - ys[0]) / H
    return ([x0 + xs[0] + (i + 0.5) * tw for i in range(W)], [y0 + ys[0] + (j + 0.5) * th for j in range(H)])


# sgt-samegame's three colours (c3), by the digit its descriptions use for each; measured in the VM (base image).
PALETTE = {"1": (0, 0, 255), "2": (0, 128, 0), "3": (255, 0, 0)}
CELL_SAMPLES = ((0, 0), (-6, 0), (6, 0), (0, -6), (0, 6), (-5, -5), (5, -5), (-5, 5), (5, 5))


def _colour_digit(screen: np.ndarray, x: float, y: float) -> str | None:
    """The palette digit most of the points near a tile's centre show (the pointer may cover some); None when
    none of them is a tile colour."""
    votes: dict[str, int] = {}
    for dx, dy in CELL_SAMPLES:
        pixel = [int(v) for v in screen[round(y) + dy, round(x) + dx][:3]]
        for digit, colour in PALETTE.items():
            if sum(abs(a - b) for a, b in zip(pixel, colour, strict=True)) < 60:
                votes[digit] = votes.get(digit, 0) + 1
    return max(votes, key=lambda d: votes[d]) if votes else None


def read_board(screen: np.ndarray, window: list[int]) -> tuple[str, list[float], list[float]] | None:
    """The full board in the window read off the screen, as an agent transcribes it (rows of colour digits
    joined by "/", board_text's form), with the screen x of each column and y of each row; None until every
    tile shows a colour."""
    grid = _grid(screen, window)
    if grid is None:
        return None
    xs, ys = grid
    rows = []
    for y in ys:
        digits = [_colour_digit(screen, x, y) for x in xs]
        if None in digits:
            return None
        rows.append("".join(digits))  # type: ignore[arg-type]
    return "/".join(rows), xs, ys


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    board = yield from read_still_board(ctx, lambda screen: read_board(screen, ctx.truth["window"]), TASK.id)
    if board is None:
        return
    text, xs, ys = board  # read off the window, as an agent would: the truth's board is withheld
    plan = yield from solve_in_shell(ctx, plan_clearance, text, answer_file="samegame_plan.txt", label="PLAN")
    for step in plan:
        col, row = map(int, step.split(","))
        yield {"kind": "click", "x": round(xs[col]), "y": round(ys[row])}  # select the group
        yield {"kind": "click", "x": round(xs[col]), "y": round(ys[row])}  # and remove it
    yield from save_via_dialog(ctx, SAVE, ups=5)  # Game > Save... is the fifth item from the bottom
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Games-3",
    title="Plan and play a complete Same Game clearance, then save the game",
    instruction=(
        "The Same Game window shows a 10x5 board of coloured tiles. Clicking a connected group of two or more "
        "same-coloured tiles selects it, clicking it again removes it; tiles above fall down and empty columns "
        "close up to the left. 1) Find an order of removals that clears every tile, and write it to "
        "~/samegame_plan.txt, one removal per line as x,y: the 0-based column and row (from the top-left) of "
        "any tile of the group on the board as it is at that step. 2) Play exactly that plan in the window. "
        "3) Save the cleared game with the window's Game > Save... dialog as ~/samegame.sav, then finish. "
        "Do not start a new game."),
    channels=Channels(
        gui="read the board off the Same Game window, click the removals, save the game through its Save dialog",
        cli="search the removal orders for one that clears the board and write the plan to a file",
        why_both="the board lives only in the GUI and the save must come from it, while finding a full "
                 "clearance is a search for a program"),
    setup=setup,
    clauses=(
        Clause("save_board", "~/samegame.sav is a Same Game save of the board on screen", check_save_board,
               critical=True, cap=0.25),
        Clause("save_cleared", "the saved game removed every tile", check_save_cleared, weight=2.0,
               critical=True, cap=0.5),
        Clause("plan_file", "~/samegame_plan.txt clears the board", check_plan, weight=2.0),
        Clause("played_plan", "the saved game plays exactly the planned removals", check_played_plan),
    ),
    **saved_game_outputs(SAVE, PLAN, "Same Game", "~/samegame_plan.txt"),
    withheld=("desc",),
    oracle=oracle,
    profile="base",
    apps=("sgt-samegame", "python3"),
    max_steps=130,
    time_budget_s=1500.0,
)
