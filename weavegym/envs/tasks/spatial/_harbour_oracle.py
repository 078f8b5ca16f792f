"""Weave-Spatial-8's reference solution (no TASK): per chart, the office's chart (GUI) -> the links (CLI) and the
register's names and rate (CLI) -> the chart entered, its bridges built and the game saved in Bridges (GUI) with the
wait for the save (CLI) -> the berth cost confirmed and the licence code read at the office (GUI) -> the network
plan's line (CLI).

Everything the oracle learns it reads off its own observations: the charts and licence codes off the screen
(``pixel_font.read_text``), the links, names and rate off the shell's output. Under TCG on a loaded host a click or
a drag can trail its observation by many seconds or be lost, so each step waits on the screen with a bound and acts
again only where a repeat is harmless: a second 'Show chart' redraws the same chart, a second 'Confirm' after the
chart moved on finds an empty entry and changes nothing, and a link is dragged again only as many times as the
settled board says it still lacks (a drag cycles a link through one, two and no bridges).
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator, Mapping
from typing import Any

import numpy as np

from weavegym.envs.task import ActionLike, OracleContext
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.games.sgt_common import save_via_dialog, solver_command, wait_small_dialog
from weavegym.envs.tasks.spatial._harbour_common import (
    CHART,
    CONFIRM,
    COUNT,
    ENTRY,
    HARBOUR,
    LINE_STEP,
    NETWORK,
    PAD,
    RESULTS,
    SCALE,
    SHOW,
    STATUS,
    TILE,
    WATER,
    find_board,
    save_path,
)
from weavegym.envs.tasks.spatial.bridges import (
    LETTERS,
    Link,
    berth_cost,
    decode,
    encode,
    link_islands,
    parse_links,
    ref,
    sight,
)

TRIES, WAITS = 4, 10
SAVE_TRIES, DIALOG_WAITS = 3, 30
SPECIFIC_UPS, SAVE_UPS = 10, 7  # Game menu items counted up from its last (Exit): Specific... and Save...
REACH, THIN = 12, 8  # px either side of a link's middle searched for its bridges; a bridge's line is at most 8 px


def _frame(ctx: OracleContext) -> np.ndarray:
    assert ctx.obs is not None
    return ctx.obs["screen"]


def _terminal(ctx: OracleContext) -> str:
    return str((ctx.obs or {}).get("terminal", ""))


def _box_click(at: list[int], box: tuple[int, int, int, int]) -> dict[str, Any]:
    return {"kind": "click", "x": at[0] + box[0] + box[2] // 2, "y": at[1] + box[1] + box[3] // 2}


def _line(screen: np.ndarray, at: list[int], box: tuple[int, int, int, int], index: int, count: int) -> str:
    return pixel_font.read_text(screen, at[0] + box[0] + PAD, at[1] + box[1] + PAD + index * LINE_STEP, SCALE, count)


def read_chart(screen: np.ndarray, at: list[int], number: int) -> str | None:
    """Chart ``number``'s Bridges game id read off the office; None until the whole chart shows."""
    title = re.fullmatch(rf"CHART {number}  (\d) BY (\d)", _line(screen, at, CHART, 0, 16))
    if title is None:
        return None
    w, h = int(title.group(1)), int(title.group(2))
    if _line(screen, at, CHART, 1, 2 * w + 1) != "  " + " ".join(LETTERS[:w]):
        return None
    islands = {}
    for y in range(h):
        found = re.fullmatch(rf"{y + 1} ((?:[1-8{re.escape(WATER)}] ){{{w - 1}}}[1-8{re.escape(WATER)}])",
                             _line(screen, at, CHART, y + 2, 2 * w + 1))
        if found is None:
            return None
        islands.update({(x, y): int(c) for x, c in enumerate(found.group(1).split()) if c != WATER})
    return encode(w, h, islands) if len(islands) >= 2 else None


def read_result(screen: np.ndarray, at: list[int], number: int) -> str:
    return _line(screen, at, RESULTS, number - 1, 24)


def read_status(screen: np.ndarray, at: list[int]) -> str:
    return _line(screen, at, STATUS, 0, 40)


def centre(board: list[int] | tuple[int, int], square: tuple[int, int]) -> tuple[int, int]:
    return board[0] + square[0] * TILE, board[1] + square[1] * TILE


def bridges_on_screen(screen: np.ndarray, board: list[int] | tuple[int, int], link: Link) -> int:
    """How many bridges the link shows: the short black runs across the middle of the water between its islands
    (a bridge the other way through that point is one long run and does not count); -1 for a muddle."""
    (ax, ay), (bx, by) = centre(board, link[0]), centre(board, link[1])
    mx, my = (ax + bx) // 2, (ay + by) // 2
    strip = screen[my - REACH:my + REACH + 1, mx, :3] if ay == by else screen[my, mx - REACH:mx + REACH + 1, :3]
    black = np.concatenate(([False], strip.astype(int).max(axis=1) < 60, [False]))
    edges = np.flatnonzero(np.diff(black.astype(int)))
    runs = [int(end - start) for start, end in zip(edges[::2], edges[1::2], strict=True)]
    inner = [n for n in runs if n <= THIN]
    return len(inner) if len(inner) <= 2 else -1


def board_links(screen: np.ndarray, board: list[int] | tuple[int, int], ident: str) -> dict[Link, int]:
    w, h, islands = decode(ident)
    return {link: bridges_on_screen(screen, board, link) for link in sight(islands, w, h)}


def _show_chart(ctx: OracleContext, number: int) -> Generator[ActionLike, Any, str | None]:
    """Press 'Show chart' until chart ``number`` shows; its game id read off the screen (None: it never showed, as
    for the cli-only ablation, whose clicks cannot reach the desktop)."""
    for _try in range(TRIES):
        yield _box_click(ctx.truth["at"], SHOW)
        for _ in range(WAITS):
            ident = read_chart(_frame(ctx), ctx.truth["at"], number)
            if ident:
                return ident
            yield {"kind": "wait", "seconds": 2}
    return None


def _focus(ctx: OracleContext) -> dict[str, Any]:
    """A click in Bridges' canvas border, up and left of the board: focuses the window, changes nothing (the window
    keeps its top-left corner whatever the chart's size)."""
    return {"kind": "click", "x": ctx.truth["corner"][0], "y": ctx.truth["corner"][1]}


def _enter(ctx: OracleContext, ident: str) -> Generator[ActionLike, Any, tuple[int, int] | None]:
    """Game > Specific..., the id typed, until Bridges shows the chart's islands; the board's square (0, 0)."""
    islands = decode(ident)[2]
    for attempt in range(SAVE_TRIES):
        before = _frame(ctx).copy()
        if attempt:
            for keys in ("Escape", "Escape"):
                yield {"kind": "key", "keys": keys}
        yield _focus(ctx)
        for keys in ("F10", *["Up"] * SPECIFIC_UPS, "Return"):
            yield {"kind": "key", "keys": keys}
        if not (yield from wait_small_dialog(ctx, before, tries=DIALOG_WAITS)):
            continue
        yield {"kind": "type", "text": ident}
        yield {"kind": "key", "keys": "Return"}
        for _try in range(WAITS):
            found = find_board(_frame(ctx), islands)
            if found is not None:
                return found
            yield {"kind": "wait", "seconds": 1}
    return None


def _build(ctx: OracleContext, board: tuple[int, int], ident: str, links: Mapping[Link, int]) -> Iterator[ActionLike]:
    """Drag every link the settled board lacks as often as it lacks it, a bounded number of rounds."""
    want = {link: links.get(link, 0) for link in board_links(_frame(ctx), board, ident)}
    have = board_links(_frame(ctx), board, ident)
    for _round in range(4):
        for link in want:
            drags = (want[link] - have[link]) % 3 if have[link] >= 0 else 0
            (ax, ay), (bx, by) = centre(board, link[0]), centre(board, link[1])
            for _drag in range(drags):
                yield {"kind": "drag", "x": ax, "y": ay, "to_x": bx, "to_y": by}
        previous, same = None, 0
        for _ in range(WAITS):
            have = board_links(_frame(ctx), board, ident)
            if have == want:
                return
            same = same + 1 if have == previous else 0
            if same == 2:  # settled for two waits: what is still missing was lost
                break
            previous = have
            yield {"kind": "wait", "seconds": 2}


def _confirm(ctx: OracleContext, number: int, cost: int) -> Generator[ActionLike, Any, str]:
    """Type the cost, press 'Confirm' until the office shows the chart's licence; the code ('' if never)."""
    at = ctx.truth["at"]
    want = re.compile(rf"CHART {number}: LICENCE ([A-Z2-9]{{6}})")
    for attempt in range(TRIES):
        if attempt == 0 or read_status(_frame(ctx), at) == "TYPE THE BERTH COST FIRST":
            yield _box_click(at, ENTRY)
            yield {"kind": "type", "text": str(cost)}
        yield _box_click(at, CONFIRM)
        for _ in range(WAITS):
            found = want.fullmatch(read_result(_frame(ctx), at, number))
            if found:
                return found.group(1)
            yield {"kind": "wait", "seconds": 2}
    return ""


def register_command(number: int) -> str:
    """The shell line that prints chart ``number``'s rate and island names from the register."""
    return ("sqlite3 -separator ' ' ~/register/ferries.db "
            f"\"SELECT 'RATE', rate FROM charts WHERE chart = {number}; "
            f"SELECT 'ISLE', ref, name FROM islands WHERE chart = {number} ORDER BY ref;\"")


def parse_register(terminal: str) -> tuple[dict[str, str], int]:
    """({grid reference: island name}, rate) of register_command's output (rate 0 when it is not there)."""
    rate = re.search(r"^RATE (\d+)\s*$", terminal, re.M)
    names = dict(re.findall(r"^ISLE ([A-Z]\d+) ([A-Za-z]+)\s*$", terminal, re.M))
    return names, int(rate.group(1)) if rate else 0


def plan_line(number: int, licence: str, cost: int, links: Mapping[Link, int], names: Mapping[str, str]) -> str:
    items = ", ".join(f"{names.get(ref(a), ref(a))}-{names.get(ref(b), ref(b))} {n}" for (a, b), n in links.items())
    return f"{number} | {licence} | {cost} | {items}"


def plan_command(line: str) -> str:
    """The shell line that adds one chart to the plan (the line holds letters, digits, '|', '-', ',' and spaces)."""
    target = NETWORK.replace(NETWORK.split("/harbour/")[0], "~")
    return f"printf '%s\\n' '{line}' >> {target} && tail -n 1 {target}"


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    for number in range(1, COUNT + 1):
        ident = yield from _show_chart(ctx, number)
        if ident is None:
            break
        yield {"kind": "shell", "timeout": 300, "command": solver_command(
            link_islands, ident, answer_file=f"{HARBOUR}/chart-{number}-links.txt", label="ANSWER")}
        found = re.search(r"^ANSWER (LINKS [A-Z0-9=\- ]+)$", _terminal(ctx), re.M)
        # gui-only: the terminal is on the desktop, so the host's run of the same search stands in
        links = parse_links(found.group(1) if found else link_islands(ident))
        yield {"kind": "shell", "command": register_command(number)}
        names, rate = parse_register(_terminal(ctx))
        board = yield from _enter(ctx, ident)
        if board is None:
            break
        yield from _build(ctx, board, ident, links)
        focus = _focus(ctx)
        yield focus
        yield from save_via_dialog(ctx, save_path(number), SAVE_UPS, refocus=(focus["x"], focus["y"]),
                                   attempts=SAVE_TRIES, tries=DIALOG_WAITS, seconds=1)
        licence = yield from _confirm(ctx, number, berth_cost(links, rate))
        if not licence:
            break
        yield {"kind": "shell", "command": plan_command(plan_line(number, licence, berth_cost(links, rate), links,
                                                                  names))}
    yield {"kind": "shell", "command": f"cat {NETWORK.replace(NETWORK.split('/harbour/')[0], '~')}"}
    yield {"kind": "done"}
