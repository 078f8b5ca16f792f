"""Weave-Spatial-3: turn a scrambled orientable Twiddle board back to order in the fewest quarter turns, then save it.

The puzzle (sgt-puzzles Twiddle, orientable) is a 3x3 grid of numbered tiles,
each with an arrow; a move turns one of the four 2x2 blocks a quarter turn,
which moves its four tiles round *and* turns each tile's arrow with them. The
scrambled board exists only in the running Twiddle window (setup deleted the
file it was loaded from), and the shell cannot reach the desktop: the agent
reads the board off the screen and hands it to its program. Tracking positions
and orientations to find a *shortest* sequence of turns is a search for a
program (CLI); the turns must be played in the window and the game saved
through its Game > Save dialog (GUI).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from weavegym.envs.setup_context import HOME, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.games.sgt_common import (
    ShortestPlayChecks,
    save_via_dialog,
    saved_game_outputs,
    solve_in_shell,
    start_hidden,
)
from weavegym.evaluators import Clause

TWIDDLE = "/usr/games/sgt-twiddle"
PARAMS = "3x3n2o"  # 3x3 grid, 2x2 blocks, orientable tiles
SAVE = f"{HOME}/twiddle.sav"
MOVES = f"{HOME}/twiddle_moves.txt"
W = 3
SOLVED = tuple((i + 1) * 4 for i in range(W * W))  # a tile is 4 * number + orientation (0 u, 1 l, 2 d, 3 r)
# Move letters (also the window's keys): a b c d turn the top-left, top-right, bottom-left, bottom-right block a
# quarter turn anticlockwise, A B C D clockwise. Each is (x, y, dir) of the game's "M<x>,<y>,<dir>" move.
BLOCKS = {"a": (0, 0), "b": (1, 0), "c": (0, 1), "d": (1, 1)}
LETTERS = {**{k: (x, y, 1) for k, (x, y) in BLOCKS.items()}, **{k.upper(): (x, y, -1) for k, (x, y) in BLOCKS.items()}}
SCRAMBLE = 8
MIN_BEST = 6

def parse_desc(desc: str) -> tuple[int, ...]:
    return tuple(int(n) * 4 + "uldr".index(o) for n, o in re.findall(r"(\d+)([uldr])", desc))


def format_desc(grid: tuple[int, ...]) -> str:
    return "".join(f"{v // 4}{'uldr'[v & 3]}" for v in grid)


def board_text(desc: str) -> str:
    """The board as an agent transcribes it from the window: each row's tiles (number, arrow u/l/d/r), rows by "/"."""
    tiles = [f"{v // 4}{'uldr'[v & 3]}" for v in parse_desc(desc)]
    return "/".join(" ".join(tiles[y * W:(y + 1) * W]) for y in range(W))


def turn(grid: tuple[int, ...], x: int, y: int, direction: int) -> tuple[int, ...]:
    """Twiddle's do_rotate for a 2x2 block of a square grid: +1 turns it (tiles and arrows) a quarter anticlockwise.

    Shared by the checker's replay and the guest's solver (``solver_command`` ships it), so self-contained.
    """
    width = round(len(grid) ** 0.5)
    cells, base = list(grid), y * width + x
    ring = [base, base + 1, base + width + 1, base + width]  # top-left, top-right, bottom-right, bottom-left
    old = [cells[p] for p in ring]
    for k in range(4):
        v = old[(k + direction) & 3]
        cells[ring[k]] = v & ~3 | (v + direction) & 3
    return tuple(cells)


def fewest_turns(board: str) -> str:
    """A shortest sequence of move letters (a b c d, A B C D) back to the solved board: meet in the middle.

    ``board`` is the board as the agent types it (rows top to bottom, separated by "/": each tile's number and
    the way its arrow points, u l d r), e.g. "4l 2u 9d/1r 3u 5l/...". Solutions must take at most 10 turns.
    This is also the oracle's CLI step: ``solver_command`` runs this function's source (and ``turn``'s) in the
    guest, so it stays self-contained.
    """
    import re

    start = tuple(int(n) * 4 + "uldr".index(o) for n, o in re.findall(r"(\d+)([uldr])", board))
    goal = tuple(sorted(v & ~3 for v in start))
    blocks = {"a": (0, 0), "b": (1, 0), "c": (0, 1), "d": (1, 1)}
    letters = {**{k: (x, y, 1) for k, (x, y) in blocks.items()},
               **{k.upper(): (x, y, -1) for k, (x, y) in blocks.items()}}

    def layers(root: tuple[int, ...], depth: int, sign: int) -> dict[tuple[int, ...], str]:
        seen, layer = {root: ""}, [root]
        for _ in range(depth):
            nxt = []
            for state in layer:
                for letter, (x, y, d) in letters.items():
                    new = turn(state, x, y, d * sign)
                    if new not in seen:
                        seen[new] = seen[state] + letter
                        nxt.append(new)
            layer = nxt
        return seen

    forward, backward = layers(start, 5, 1), layers(goal, 5, -1)
    meet = min((s for s in forward if s in backward), key=lambda s: len(forward[s]) + len(backward[s]))
    return forward[meet] + backward[meet][::-1]


def replay(desc: str, letters: str) -> tuple[bool, str | None]:
    """(solved at the end, None) or (False, why a letter is no move)."""
    grid = parse_desc(desc)
    for n, letter in enumerate(letters, 1):
        if letter not in LETTERS:
            return False, f"move {n} {letter!r} is not one of a b c d A B C D"
        grid = turn(grid, *LETTERS[letter])
    return grid == SOLVED, None


def setup(ctx: SetupContext) -> Prepared:
    while True:  # scramble the solved board with random quarter turns until the shortest way back is long enough
        grid, last = SOLVED, ""
        for _ in range(SCRAMBLE):
            options = [k for k in LETTERS if k != last.swapcase()]  # never undo the previous turn
            last = options[int(ctx.rng.integers(len(options)))]
            grid = turn(grid, *LETTERS[last])
        best = fewest_turns(board_text(format_desc(grid)))
        if len(best) >= MIN_BEST:
            break
    desc = format_desc(grid)
    window = start_hidden(ctx, TWIDDLE, "Twiddle", PARAMS, desc, "^Twiddle$")
    return Prepared(params={}, truth={"desc": desc, "best": best, "window": window})


def _letters(moves: list[str]) -> str:
    """The saved moves as letters ('S' for the Solve command, '?' for anything else)."""
    out = []
    for move in moves:
        found = re.fullmatch(r"M(\d),(\d),(-?1)", move)
        out.append(next((k for k, v in LETTERS.items() if found and v == tuple(map(int, found.groups()))),
                        "S" if move == "S" else "?"))
    return "".join(out)


CHECKS = ShortestPlayChecks(game="Twiddle", save=SAVE, moves_file=MOVES, unit="turns",
                            solved_as="in order with every arrow up", replay=replay, letters=_letters,
                            solve_letter="S")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    route = yield from solve_in_shell(ctx, fewest_turns, board_text(ctx.truth["desc"]),
                                      answer_file="twiddle_moves.txt", label="ROUTE", helpers=(turn,))
    for letter in "".join(route):
        yield {"kind": "key", "keys": f"shift+{letter.lower()}" if letter.isupper() else letter}
    yield from save_via_dialog(ctx, SAVE, ups=6)  # Game > Save... is the sixth item from the bottom
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Spatial-3",
    title="Turn the Twiddle tiles back in order and upright in the fewest quarter turns",
    instruction=(
        "The Twiddle window shows a scrambled 3x3 grid of numbered tiles, each with an arrow. A move turns one of "
        "the four 2x2 blocks a quarter turn: its four tiles move round and each tile's arrow turns with it. The "
        "puzzle is solved when the tiles read 1 to 9 (left to right, top to bottom) with every arrow pointing up. "
        "Moves are written as letters: a, b, c, d turn the top-left, top-right, bottom-left, bottom-right block "
        "anticlockwise, and A, B, C, D turn it clockwise (the same letters are the window's keys; shift for the "
        "capitals). 1) Work out a shortest possible sequence of moves that solves the board and write it to "
        "~/twiddle_moves.txt as one line of letters, e.g. aDbC. 2) Play exactly that sequence in the Twiddle "
        "window. 3) Save the game with the window's Game > Save... dialog as ~/twiddle.sav, then finish. Do not "
        "start a new game or use Game > Solve."),
    channels=Channels(
        gui="read the board off the Twiddle window, play the turns, save the game through its Save dialog",
        cli="search tile positions and orientations with a program for a shortest sequence of turns",
        why_both="the board lives only in the GUI and the save must come from it, while proving a sequence "
                 "shortest means searching the turns with a program"),
    setup=setup,
    clauses=(
        Clause("save_board", "~/twiddle.sav is a Twiddle save of the board on screen", CHECKS.check_save_board,
               critical=True, cap=0.25),
        Clause("save_solved", "the saved game ends in order with every arrow up, without Solve",
               CHECKS.check_save_solved, weight=2.0, critical=True, cap=0.5),
        Clause("save_shortest", "the saved game takes the fewest possible turns", CHECKS.check_save_shortest),
        Clause("moves_file", "~/twiddle_moves.txt holds a shortest solving sequence", CHECKS.check_moves_file,
               weight=2.0),
        Clause("played_moves", "the saved game plays exactly the moves in the file", CHECKS.check_played),
    ),
    **saved_game_outputs(SAVE, MOVES, "Twiddle", "~/twiddle_moves.txt"),
    oracle=oracle,
    profile="base",
    apps=("sgt-twiddle", "python3"),
    max_steps=90,
    time_budget_s=1200.0,
)
