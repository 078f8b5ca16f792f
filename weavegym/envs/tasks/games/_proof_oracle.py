"""Weave-Games-6's reference solution (no TASK): per puzzle, the desk's clues (GUI) -> the solution count (CLI) ->
for a sound one its id, play and save in Pattern (GUI) and the wait for the save (CLI) -> the verdict and slot code
at the desk (GUI); then the print list (CLI).

Everything the oracle learns it reads off its own observations: the clues and the slot codes off the screen
(``pixel_font.read_text``), the verdicts and solutions off the shell's output. Under TCG on a loaded host a click
can trail its observation by many seconds or be lost, so each step waits on the screen with a bound and clicks
again: a second 'Puzzle N' is harmless, a second verdict records the same verdict anew (the last one counts).
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from typing import Any

import numpy as np

from weavegym.envs.task import ActionLike, OracleContext
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.games._proof_common import (
    CLUES,
    COUNT,
    GAP,
    ISSUE,
    KINDS,
    LINE_STEP,
    OPEN,
    PAD,
    PRINT_LIST,
    RESULTS,
    SCALE,
    VERDICT,
    find_grid,
    proof_path,
)
from weavegym.envs.tasks.games.nonogram import SIZE, game_id, judge_puzzle
from weavegym.envs.tasks.games.sgt_common import (
    changed_pixels,
    save_via_dialog,
    solver_command,
    wait_small_dialog,
)

TRIES, WAITS = 4, 10
SAVE_TRIES, DIALOG_WAITS = 3, 30
SPECIFIC_UPS, SAVE_UPS = 10, 7  # Game menu items counted up from its last (Exit): Specific... and Save...
MARGIN = 84  # px left of the board: inside Pattern's canvas, more than a cell away from the board (no move)


def _frame(ctx: OracleContext) -> np.ndarray:
    assert ctx.obs is not None
    return ctx.obs["screen"]


def _box_click(at: list[int], box: tuple[int, int, int, int], index: int = 0) -> dict[str, Any]:
    return {"kind": "click", "x": at[0] + box[0] + index * (box[2] + GAP) + box[2] // 2,
            "y": at[1] + box[1] + box[3] // 2}


def read_clues(screen: np.ndarray, at: list[int], number: int) -> str | None:
    """Puzzle ``number``'s Pattern id read off the desk's clue panel; None until its clues show whole."""
    x0, y0 = at[0] + CLUES[0] + PAD, at[1] + CLUES[1] + PAD
    if pixel_font.read_text(screen, x0, y0, SCALE, 20) != f"PUZZLE {number}  {SIZE} BY {SIZE}":
        return None
    found: list[list[list[int]]] = [[], []]
    for side, letter in enumerate("CR"):
        for index in range(1, SIZE + 1):
            text = pixel_font.read_text(screen, x0 + side * (CLUES[2] // 2), y0 + (index + 1) * LINE_STEP, SCALE, 16)
            match = re.fullmatch(rf"{letter}{index}: (\d+(?: \d+)*)", text)
            if match is None:
                return None
            found[side].append([int(n) for n in match.group(1).split() if n != "0"])
    return game_id(found[0], found[1])


def read_result(screen: np.ndarray, at: list[int], number: int) -> str:
    return pixel_font.read_text(screen, at[0] + RESULTS[0] + PAD, at[1] + RESULTS[1] + PAD + (number - 1) * LINE_STEP,
                                SCALE, 30)


def cells(grid: list[float], x: int, y: int) -> tuple[int, int]:
    left, top, width, height = grid
    return round(left + (x + 0.5) * width), round(top + (y + 0.5) * height)


def board_on_screen(screen: np.ndarray, grid: list[float]) -> str:
    """The board's rows as '#' (a filled, black cell) and '.' (anything else), '/'-joined."""
    rows = []
    for y in range(SIZE):
        row = ""
        for x in range(SIZE):
            px, py = cells(grid, x, y)
            row += "#" if int(screen[py, px, :3].max()) < 80 else "."
        rows.append(row)
    return "/".join(rows)


def _open_puzzle(ctx: OracleContext, number: int) -> Generator[ActionLike, Any, str | None]:
    """Press 'Puzzle N' until its clues show; its id read off the screen (None: it never showed, as for the
    cli-only ablation, whose clicks cannot reach the desktop)."""
    for _try in range(TRIES):
        yield _box_click(ctx.truth["at"], OPEN, number - 1)
        for _ in range(WAITS):
            ident = read_clues(_frame(ctx), ctx.truth["at"], number)
            if ident:
                return ident
            yield {"kind": "wait", "seconds": 2}
    return None


def _focus(grid: list[float]) -> dict[str, Any]:
    """A click in Pattern's canvas left of the board (over the row clues): focuses the window, changes nothing."""
    return {"kind": "click", "x": round(grid[0]) - MARGIN, "y": round(grid[1] + grid[3] * SIZE / 2)}


def _menu(ctx: OracleContext, grid: list[float], ups: int, attempt: int) -> Iterator[ActionLike]:
    """Game > the item ``ups`` up from the bottom, by keyboard; from the second attempt on, Escape closes
    whatever a late menu or dialog left open first (keys typed into the board would be moves: u undoes)."""
    if attempt:
        for keys in ("Escape", "Escape"):
            yield {"kind": "key", "keys": keys}
    yield _focus(grid)
    for keys in ("F10", *["Up"] * ups, "Return"):
        yield {"kind": "key", "keys": keys}


def _clue_band(frame: np.ndarray, grid: list[float]) -> np.ndarray:
    """The column clues above the board."""
    left, top, width, height = grid
    return frame[max(0, round(top - 3 * height)):round(top) - 2, round(left):round(left + SIZE * width)]


def _enter(ctx: OracleContext, grid: list[float], ident: str) -> Iterator[ActionLike]:
    """Game > Specific..., the id typed, until Pattern shows a blank board under new column clues."""
    for attempt in range(SAVE_TRIES):
        before = _frame(ctx).copy()
        yield from _menu(ctx, grid, SPECIFIC_UPS, attempt)
        if not (yield from wait_small_dialog(ctx, before, tries=DIALOG_WAITS)):
            continue
        yield {"kind": "type", "text": ident}
        yield {"kind": "key", "keys": "Return"}
        previous = None
        for _try in range(WAITS):
            frame = _frame(ctx)
            band = _clue_band(frame, grid)
            if (find_grid(frame) is not None and changed_pixels(band, _clue_band(before, grid)).any()
                    and previous is not None and not changed_pixels(band, _clue_band(previous, grid)).any()):
                return
            previous = frame
            yield {"kind": "wait", "seconds": 1}


def _fill(grid: list[float], solution: str, have: str) -> Iterator[ActionLike]:
    """Each run of filled cells the board lacks: a drag along it (a click for one cell)."""
    for y, (want, got) in enumerate(zip(solution.split("/"), have.split("/"), strict=True)):
        for match in re.finditer(r"#+", want):
            if got[match.start():match.end()] == want[match.start():match.end()]:
                continue
            (x1, y1), (x2, y2) = cells(grid, match.start(), y), cells(grid, match.end() - 1, y)
            yield {"kind": "click", "x": x1, "y": y1} if x1 == x2 else \
                {"kind": "drag", "x": x1, "y": y1, "to_x": x2, "to_y": y2}


def _play(ctx: OracleContext, grid: list[float], solution: str) -> Iterator[ActionLike]:
    """Fill the solution, wait until the board shows it, fill again what a lost drag left out."""
    have = "/".join("." * SIZE for _ in range(SIZE))
    for _round in range(3):
        yield from _fill(grid, solution, have)
        for _ in range(WAITS // 2):
            have = board_on_screen(_frame(ctx), grid)
            if have == solution:
                return
            yield {"kind": "wait", "seconds": 1}


def _save(ctx: OracleContext, grid: list[float], path: str) -> Iterator[ActionLike]:
    """Game > Save..., the path typed only once the dialog shows, until the save exists (the shell sees it); a
    click left of the board focuses Pattern first and again before each retry."""
    focus = _focus(grid)
    yield focus
    yield from save_via_dialog(ctx, path, SAVE_UPS, refocus=(focus["x"], focus["y"]), attempts=SAVE_TRIES,
                               tries=DIALOG_WAITS, seconds=1)


def _record(ctx: OracleContext, number: int, verdict: str) -> Generator[ActionLike, Any, str]:
    """Press the verdict until the desk shows it for the puzzle; the slot code ('' for none or never shown)."""
    want = re.compile(rf"PUZZLE {number}: {verdict.upper()}(?:  SLOT ([A-Z2-9]{{6}}))?")
    for _try in range(TRIES):
        yield _box_click(ctx.truth["at"], VERDICT, KINDS.index(verdict))
        for _ in range(WAITS):
            found = want.fullmatch(read_result(_frame(ctx), ctx.truth["at"], number))
            if found:
                return found.group(1) or ""
            yield {"kind": "wait", "seconds": 2}
    return ""


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    grid = ctx.truth["grid"]
    lines = []
    for number in range(1, COUNT + 1):
        ident = yield from _open_puzzle(ctx, number)
        if ident is None:
            break
        yield {"kind": "shell", "timeout": 300, "command": solver_command(
            judge_puzzle, ident, answer_file=f"{ISSUE}/puzzle{number}.txt", label="VERDICT")}
        found = re.search(r"^VERDICT (SOUND (\S+)|AMBIGUOUS|BROKEN)$", (ctx.obs or {}).get("terminal", ""), re.M)
        answer = found.group(1) if found else judge_puzzle(ident)  # gui-only: the terminal is on the desktop
        verdict, solution = answer.split()[0].lower(), [*answer.split(), ""][1]
        if verdict == "sound":
            yield from _enter(ctx, grid, ident)
            yield from _play(ctx, grid, solution)
            yield from _save(ctx, grid, proof_path(number))
        slot = yield from _record(ctx, number, verdict)
        if verdict == "sound":
            lines.append(f"{number} | {slot} | {solution}")
    yield {"kind": "shell", "command": print_command(lines)}
    yield {"kind": "done"}


def print_command(lines: list[str]) -> str:
    """The shell line that writes the print list (the lines hold digits, '|', '#', '.', '/', spaces and codes)."""
    text = "".join(line + "\n" for line in lines)
    target = PRINT_LIST.replace(PRINT_LIST.split("/issue/")[0], "~")
    return f"printf %s '{text}' > {target} && cat {target}"
