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

import functools
import re
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


# How sgt-twiddle draws a tile (measured in the VM, base image): its number in black, upright, centred, over a grey
# triangle whose apex points the tile's way. Each digit's dark pixels (max channel < 100) in the 13 x 15 box around
# the tile's centre, row by row as bits, as hex; taken from a frame of a VM run whose board was known.
TRIANGLE_GREY, DARK, TRIANGLE_LINE = 191, 100, 8
DIGIT_BOX = (13, 15)  # width, height
DIGITS = {
    "1": "00000003e01f00b800c006003001800c00600700ff07f8000",
    "2": "00000003f03fc18f003803c01c01c01c01c01c01ff0ff8000",
    "3": "00000003f01fc00f00380380f807e007801c21e1fe0fe0000",
    "4": "000000007807c03e03701b819c18e0c707fc3fe00e0070000",
    "5": "00000003f81fc0c006003f01fc00f003801c31e1fe07e0000",
    "6": "00000000f80fe0e00e007f03fe1e70e3871c1ce0fe01e0000",
    "7": "00000007fc3fe00f007003803801c01c00e00e00700380000",
    "8": "00000001f01fc1c70e3839c0fc0fe0e3871c38e0ff03e0000",
    "9": "00000001f01fc1ce0e3871c39e0ff03f801c01c0fc07c0000",
}
MAX_DIGIT_MISMATCH = 12  # of the box's 195 pixels


@functools.cache
def _digit_masks() -> dict[str, np.ndarray]:
    """DIGITS as boolean masks, decoded once."""
    width, height = DIGIT_BOX
    return {d: np.array([int(b) for b in f"{int(h, 16):0{width * height}b}"], bool).reshape(height, width)
            for d, h in DIGITS.items()}


def _read_digit(dark: np.ndarray, x: int, y: int) -> str | None:
    """The digit whose mask best matches the dark pixels around (x, y), trying shifts of a pixel either way."""
    width, height = DIGIT_BOX
    best, found = MAX_DIGIT_MISMATCH + 1, None
    for mask_digit, mask in _digit_masks().items():
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                top, left = y + dy - height // 2, x + dx - width // 2
                box = dark[top:top + height, left:left + width]
                if box.shape == mask.shape and (miss := int((box != mask).sum())) < best:
                    best, found = miss, mask_digit
    return found


def _arrow(triangle: np.ndarray, x: int, y: int) -> str | None:
    """u l d r: where the tile's triangle points, from which side of the centre its area leans to (the base)."""
    ys, xs = np.nonzero(triangle[y - 22:y + 23, x - 22:x + 23])
    if len(xs) < 100:
        return None
    dx, dy = xs.mean() - 22, ys.mean() - 22
    if max(abs(dx), abs(dy)) < 1.5:
        return None
    return ("l" if dx > 0 else "r") if abs(dx) > abs(dy) else ("u" if dy > 0 else "d")


def read_board(screen: np.ndarray, window: list[int]) -> str | None:
    """The board in the window read off the screen, as an agent transcribes it (board_text's form: each row's
    tiles as number and arrow, rows joined by "/"); None until W x W tiles show, each read."""
    x0, y0, w, h = (int(v) for v in window)
    crop = screen[max(y0, 0):y0 + h, max(x0, 0):x0 + w].astype(int)
    triangle = np.abs(crop - TRIANGLE_GREY).max(axis=2) <= 3
    triangle[triangle.sum(axis=1) > 0.8 * crop.shape[1]] = False  # the menu bar's separator shares the grey
    # The board: the rows and columns the triangles fill (text elsewhere has a few pixels of the grey at its edges).
    rows_at = np.flatnonzero(triangle.sum(axis=1) >= TRIANGLE_LINE)
    columns_at = np.flatnonzero(triangle.sum(axis=0) >= TRIANGLE_LINE)
    if not len(rows_at) or not len(columns_at):
        return None
    top, bottom, left, right = rows_at.min(), rows_at.max(), columns_at.min(), columns_at.max()
    dark = crop.max(axis=2) < DARK
    centres = []
    for axis, start in ((0, left), (1, top)):  # digit columns, then rows, inside the triangles' extent
        hits = np.flatnonzero(dark[top:bottom + 1, left:right + 1].any(axis=axis))
        runs = np.split(hits, np.flatnonzero(np.diff(hits) > 1) + 1) if len(hits) else []
        if len(runs) != W:
            return None
        centres.append([int(start + (run[0] + run[-1]) // 2) for run in runs])
    digits = [_read_digit(dark, x, y) for y in centres[1] for x in centres[0]]
    arrows = [_arrow(triangle, x, y) for y in centres[1] for x in centres[0]]
    missing = set(DIGITS) - set(digits)
    if digits.count(None) == 1 and len(missing) == 1:  # the pointer on one number: the one not seen elsewhere
        digits[digits.index(None)] = missing.pop()
    if None in digits or None in arrows or len(set(digits)) != W * W:
        return None
    tiles = [f"{d}{a}" for d, a in zip(digits, arrows, strict=True)]
    rows = [" ".join(tiles[row * W:(row + 1) * W]) for row in range(W)]
    return "/".join(rows)


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    board = yield from read_still_board(ctx, lambda screen: read_board(screen, ctx.truth["window"]), TASK.id)
    if board is None:
        return
    # Read off the window, as an agent would: the truth's board is withheld.
    route = yield from solve_in_shell(ctx, fewest_turns, board, answer_file="twiddle_moves.txt", label="ROUTE",
                                      helpers=(turn,))
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
    withheld=("desc",),
    oracle=oracle,
    profile="base",
    apps=("sgt-twiddle", "python3"),
    max_steps=90,
    time_budget_s=1200.0,
)
