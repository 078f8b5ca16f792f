"""Weave-Spatial-7's reference solution (no TASK): per field, the office's plan (GUI) -> the placement (CLI) -> the
field entered, pitched and saved in Tents (GUI) with the wait for the save (CLI) -> the pitches allocated and the
permit code read at the office (GUI) -> the sheet's line (CLI).

Everything the oracle learns it reads off its own observations: the plans and permit codes off the screen
(``pixel_font.read_text``), the placements off the shell's output. Under TCG on a loaded host a click can trail its
observation by many seconds or be lost, so each step waits on the screen with a bound and acts again only where a
repeat is harmless: a second 'Show field' redraws the same plan, a second 'Allocate' after the field moved on
finds an empty entry and changes nothing, and a tent is clicked again only while the settled board lacks it.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from typing import Any

import numpy as np

from weavegym.envs.task import ActionLike, OracleContext
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.games.sgt_common import (
    save_via_dialog,
    solver_command,
    wait_small_dialog,
)
from weavegym.envs.tasks.spatial._campsite_common import (
    ALLOCATE,
    COUNT,
    ENTRY,
    LINE_STEP,
    OFFICE,
    OPEN,
    PAD,
    PLAN,
    RESULTS,
    SCALE,
    SHEET,
    SHOW,
    STATUS,
    TREE,
    find_board,
    save_path,
)
from weavegym.envs.tasks.spatial.tents import LETTERS, decode, game_id, parse_refs, pitch_tents

TRIES, WAITS = 4, 10
SAVE_TRIES, DIALOG_WAITS = 3, 30
SPECIFIC_UPS, SAVE_UPS = 10, 7  # Game menu items counted up from its last (Exit): Specific... and Save...
MARGIN = 8  # px left of the board: inside Tents' canvas border, where a click changes nothing


def _frame(ctx: OracleContext) -> np.ndarray:
    assert ctx.obs is not None
    return ctx.obs["screen"]


def _box_click(at: list[int], box: tuple[int, int, int, int]) -> dict[str, Any]:
    return {"kind": "click", "x": at[0] + box[0] + box[2] // 2, "y": at[1] + box[1] + box[3] // 2}


def _line(screen: np.ndarray, at: list[int], box: tuple[int, int, int, int], index: int, count: int) -> str:
    return pixel_font.read_text(screen, at[0] + box[0] + PAD, at[1] + box[1] + PAD + index * LINE_STEP, SCALE, count)


def read_plan(screen: np.ndarray, at: list[int], number: int) -> str | None:
    """Field ``number``'s Tents game id read off the office's plan; None until the whole plan shows."""
    title = re.fullmatch(rf"FIELD {number}  (\d) BY (\d)", _line(screen, at, PLAN, 0, 16))
    if title is None:
        return None
    w, h = int(title.group(1)), int(title.group(2))
    if _line(screen, at, PLAN, 1, 2 * w + 2) != "  " + " ".join(LETTERS[:w]):
        return None
    trees, rows = [], []
    for y in range(h):
        found = re.fullmatch(rf"{y + 1} ((?:[{TREE}{re.escape(OPEN)}] ){{{w - 1}}}[{TREE}{re.escape(OPEN)}])  (\d)",
                             _line(screen, at, PLAN, y + 2, 2 * w + 4))
        if found is None:
            return None
        trees += [(x, y) for x, square in enumerate(found.group(1).split()) if square == TREE]
        rows.append(int(found.group(2)))
    cols = re.fullmatch(r"  (\d(?: \d)*)", _line(screen, at, PLAN, h + 2, 2 * w + 2))
    if cols is None or len(cols.group(1).split()) != w:
        return None
    return game_id(w, h, trees, [int(n) for n in cols.group(1).split()], rows)


def read_result(screen: np.ndarray, at: list[int], number: int) -> str:
    return _line(screen, at, RESULTS, number - 1, 24)


def read_status(screen: np.ndarray, at: list[int]) -> str:
    return _line(screen, at, STATUS, 0, 40)


def board_on_screen(screen: np.ndarray, board: list[int], w: int, h: int) -> list[str]:
    """Tents' board as rows of 'T' (a tree: green leaves), 'A' (a tent: yellow or red) and '.' (anything else),
    from a patch up and left of each square's centre: the mouse pointer, which the screenshots show, hangs down
    and right of the square last clicked."""
    left, top, cell = board
    rows = []
    for y in range(h):
        row = ""
        for x in range(w):
            cx, cy = left + x * cell + cell // 2, top + y * cell + cell // 2
            patch = screen[cy - 3:cy, cx - 3:cx, :3].reshape(-1, 3).astype(int)
            r, g, b = patch[:, 0], patch[:, 1], patch[:, 2]
            row += ("T" if ((g > 140) & (r < 60) & (b < 60)).sum() * 2 > len(patch)
                    else "A" if ((r > 150) & (b < 70) & (g < 200)).sum() * 2 > len(patch) else ".")
        rows.append(row)
    return rows


def _show_field(ctx: OracleContext, number: int) -> Generator[ActionLike, Any, str | None]:
    """Press 'Show field' until field ``number``'s plan shows; its game id read off the screen (None: it never
    showed, as for the cli-only ablation, whose clicks cannot reach the desktop)."""
    for _try in range(TRIES):
        yield _box_click(ctx.truth["at"], SHOW)
        for _ in range(WAITS):
            ident = read_plan(_frame(ctx), ctx.truth["at"], number)
            if ident:
                return ident
            yield {"kind": "wait", "seconds": 2}
    return None


def _focus(board: list[int]) -> dict[str, Any]:
    """A click in Tents' canvas left of the board: focuses the window, changes nothing."""
    return {"kind": "click", "x": board[0] - MARGIN, "y": board[1] + board[2] // 2}


def _trees(ident: str) -> list[str]:
    w, h, trees, _cols, _rows = decode(ident)
    return ["".join("T" if (x, y) in trees else "." for x in range(w)) for y in range(h)]


def _enter(ctx: OracleContext, ident: str) -> Generator[ActionLike, Any, list[int] | None]:
    """Game > Specific..., the id typed, until Tents shows the field's trees on a board of its size; the board."""
    board, want = ctx.truth["board"], _trees(ident)
    size = len(want[0])
    for attempt in range(SAVE_TRIES):
        before = _frame(ctx).copy()
        if attempt:
            for keys in ("Escape", "Escape"):
                yield {"kind": "key", "keys": keys}
        yield _focus(board)
        for keys in ("F10", *["Up"] * SPECIFIC_UPS, "Return"):
            yield {"kind": "key", "keys": keys}
        if not (yield from wait_small_dialog(ctx, before, tries=DIALOG_WAITS)):
            continue
        yield {"kind": "type", "text": ident}
        yield {"kind": "key", "keys": "Return"}
        for _try in range(WAITS):
            found = find_board(_frame(ctx), size)
            if found is not None and board_on_screen(_frame(ctx), list(found), size, len(want)) == want:
                return list(found)
            yield {"kind": "wait", "seconds": 1}
    return None


def _pitch(ctx: OracleContext, board: list[int], ident: str, squares: set[tuple[int, int]]) -> Iterator[ActionLike]:
    """Click every tent the settled board lacks, a bounded number of rounds."""
    trees = _trees(ident)
    w, h = len(trees[0]), len(trees)
    want = ["".join("A" if (x, y) in squares else trees[y][x] for x in range(w)) for y in range(h)]
    have = trees
    for _round in range(3):
        for x, y in sorted(squares, key=lambda c: (c[1], c[0])):
            if have[y][x] != "A":
                yield {"kind": "click", "x": board[0] + x * board[2] + board[2] // 2,
                       "y": board[1] + y * board[2] + board[2] // 2}
        previous, same = None, 0
        for _ in range(WAITS):
            have = board_on_screen(_frame(ctx), board, w, h)
            if have == want:
                return
            same = same + 1 if have == previous else 0
            if same == 2:  # settled for two waits: what is still missing was lost
                break
            previous = have
            yield {"kind": "wait", "seconds": 2}


def _allocate(ctx: OracleContext, number: int, pitches: list[str]) -> Generator[ActionLike, Any, str]:
    """Type the pitches, press 'Allocate' until the office shows the field's permit; the code ('' if never)."""
    at = ctx.truth["at"]
    want = re.compile(rf"FIELD {number}: PERMIT ([A-Z2-9]{{6}})")
    for attempt in range(TRIES):
        if attempt == 0 or read_status(_frame(ctx), at) == "TYPE THE PITCHES FIRST":
            yield _box_click(at, ENTRY)
            yield {"kind": "type", "text": " ".join(pitches)}
        yield _box_click(at, ALLOCATE)
        for _ in range(WAITS):
            found = want.fullmatch(read_result(_frame(ctx), at, number))
            if found:
                return found.group(1)
            yield {"kind": "wait", "seconds": 2}
    return ""


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    for number in range(1, COUNT + 1):
        ident = yield from _show_field(ctx, number)
        if ident is None:
            break
        yield {"kind": "shell", "timeout": 300, "command": solver_command(
            pitch_tents, ident, answer_file=f"{OFFICE}/field-{number}-pitches.txt", label="ANSWER")}
        found = re.search(r"^ANSWER PITCHES ([A-Z0-9 ]+)$", (ctx.obs or {}).get("terminal", ""), re.M)
        # gui-only: the terminal is on the desktop, so the host's run of the same search stands in
        pitches = found.group(1).split() if found else pitch_tents(ident).split()[1:]
        board = yield from _enter(ctx, ident)
        if board is None:
            break
        w, h = len(_trees(ident)[0]), len(_trees(ident))
        yield from _pitch(ctx, board, ident, parse_refs(" ".join(pitches), w, h) or set())
        focus = _focus(board)
        yield focus
        yield from save_via_dialog(ctx, save_path(number), SAVE_UPS, refocus=(focus["x"], focus["y"]),
                                   attempts=SAVE_TRIES, tries=DIALOG_WAITS, seconds=1)
        permit = yield from _allocate(ctx, number, pitches)
        yield {"kind": "shell", "command": sheet_command(f"{number} | {permit} | {' '.join(pitches)}")}
    yield {"kind": "shell", "command": f"cat {SHEET.replace(SHEET.split('/office/')[0], '~')}"}
    yield {"kind": "done"}


def sheet_command(line: str) -> str:
    """The shell line that adds one field to the sheet (the line holds digits, letters, '|' and spaces)."""
    target = SHEET.replace(SHEET.split("/office/")[0], "~")
    return f"printf '%s\\n' '{line}' >> {target} && tail -n 1 {target}"
