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


def _grid(screen: np.ndarray, desc: str, window: list[int]) -> tuple[list[float], list[float]]:
    """Screen x of each board column and y of each row, fitted on the blue pegs inside the window."""
    x0, y0, w, h = window
    crop = screen[y0:y0 + h, x0:x0 + w].astype(int)
    blue = (crop[..., 2] > 200) & (crop[..., 0] < 80) & (crop[..., 1] < 80)
    axes = []
    for axis, offset, index in ((0, x0, lambda i: i % SIZE), (1, y0, lambda i: i // SIZE)):
        hits = np.flatnonzero(blue.any(axis=axis))
        runs = np.split(hits, np.flatnonzero(np.diff(hits) > 1) + 1)
        centres = [offset + float(r.mean()) for r in runs]
        lines = sorted({index(i) for i, ch in enumerate(desc) if ch == "P"})
        step, start = np.polyfit(lines, centres, 1)
        axes.append([start + step * k for k in range(SIZE)])
    return axes[0], axes[1]


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    assert ctx.obs is not None
    xs, ys = _grid(ctx.obs["screen"], ctx.truth["desc"], ctx.truth["window"])
    plan = yield from solve_in_shell(ctx, plan_jumps, board_text(ctx.truth["desc"]),
                                     answer_file="pegs_solution.txt", label="PLAN")
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
    oracle=oracle,
    profile="base",
    apps=("sgt-pegs", "python3"),
    max_steps=110,
    time_budget_s=1200.0,
)
