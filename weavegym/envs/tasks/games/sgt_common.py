"""Helpers shared by the sgt-puzzles tasks (no TASK here): save files, a hidden start, the Save dialog.

Simon Tatham's puzzles save a game as ``KEY:length:value`` records (the game's
description, then one ``MOVE`` record per move). Tasks start a puzzle from such
a file and delete it once the window is up, so the board lives only in the GUI.

The episode's shell runs as the workspace account, which cannot reach the
desktop (no clipboard, no xdotool): the agent is the only bridge. It reads the
board off the window and types it into its solver's command line
(``python_command``), and it sees the Save dialog on the screen (``wait_dialog``)
while the shell sees only the save file the game writes (``wait_file_action``).
"""

from __future__ import annotations

import inspect
import re
import shlex
import textwrap
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from weavegym.envs.setup_context import HOME, SetupContext
from weavegym.envs.task import ActionLike, OracleContext
from weavegym.evaluators import GuiArtifactViaCli, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

SAVE_DIALOG = "game file to save"  # the Save dialog's title: "Enter name of game file to save"
DIFF_LEVEL = 24  # a pixel changed when a channel moved more than this
DIALOG_MIN = (300, 150)  # a region of change at least this wide and tall (px) is a dialog, not a menu
DIALOG_FILLED = 0.5  # ...and at least this share of it changed (its frame alone is not the dialog)
SETTLED_PIXELS = 400  # at most this many pixels may change between two polls of a drawn dialog
SMALL_DIALOG = (150, 70)  # Game > Specific... is small: a label, an entry, OK and Cancel


def record(key: str, value: str) -> str:
    return f"{key:<8}:{len(value)}:{value}\n"


def parse_save(text: str) -> list[tuple[str, str]]:
    """The (key, value) records of a save file; raises ValueError when the framing is broken."""
    records, pos = [], 0
    while pos < len(text):
        key_end = text.index(":", pos)
        len_end = text.index(":", key_end + 1)
        length = int(text[key_end + 1:len_end])
        records.append((text[pos:key_end].strip(), text[len_end + 1:len_end + 1 + length]))
        pos = len_end + 1 + length
        while pos < len(text) and text[pos] in "\r\n":
            pos += 1
    return records


def saved_game(text: str | None, game: str) -> tuple[str, list[str]] | None:
    """(DESC, the moves up to the saved position) of a save of ``game``, or None."""
    try:
        records = parse_save(text or "")
        fields = dict(records)
        if fields.get("GAME") != game or "DESC" not in fields:
            return None
        moves = [v for k, v in records if k == "MOVE"]
        return fields["DESC"], moves[:int(fields.get("STATEPOS", len(moves) + 1)) - 1]
    except ValueError:
        return None


def start_hidden(ctx: SetupContext, binary: str, game: str, params: str, desc: str, title: str) -> list[int]:
    """Open ``binary`` on the board ``desc`` from a save file deleted once the window is up; its geometry."""
    slug = "".join(c if c.isalnum() else "-" for c in game.lower())
    start = f"/tmp/.{slug}-start.sav"
    ctx.write_file(start, "".join(record(k, v) for k, v in (
        ("SAVEFILE", "Simon Tatham's Portable Puzzle Collection"), ("VERSION", "1"), ("GAME", game),
        ("PARAMS", params), ("CPARAMS", params), ("DESC", desc), ("NSTATES", "1"), ("STATEPOS", "1"))), mode=0o600)
    ctx.launch_gui(f"cd {HOME} && {{as_user}} {binary} --load {start}", name=slug)
    window = ctx.wait_window(title)
    ctx.run(["rm", "-f", start])
    return window.geometry


def python_command(source: str, *args: str) -> str:
    """A shell command that runs the Python ``source`` with ``args`` on its command line (``sys.argv[1:]``).

    The solvers take the board this way: the shell cannot see the window, so the agent reads the board
    off the screen and types it into the command.
    """
    return f"python3 - {' '.join(shlex.quote(a) for a in args)} <<'PY'\n{source.strip()}\nPY"


def solver_command(solver: Callable[[str], str | list[str]], board: str, *, answer_file: str, label: str,
                   helpers: tuple[Callable[..., Any], ...] = ()) -> str:
    """The oracle's CLI step: the guest's python3 runs ``solver``'s own source on the typed ``board``.

    The function is the one copy of a puzzle's search. The host calls it directly (setup's truth, the plan the
    gui-only ablation plays) and the guest runs its source text, so the two cannot drift apart. It must be
    self-contained: builtins, imports inside its body, and the module functions named in ``helpers`` (shipped
    before it, equally self-contained; the checkers share them). Its answer (a route string, or a list of moves
    written one per line) goes to ``answer_file`` in the working folder and is printed after ``label``.
    """
    source = "\n".join(textwrap.dedent(inspect.getsource(f)) for f in (*helpers, solver))
    main = (f"answer = {solver.__name__}(sys.argv[1])\n"
            "lines = [answer] if isinstance(answer, str) else answer\n"
            f"open({answer_file!r}, 'w').write(''.join(line + '\\n' for line in lines))\n"
            f"print({label!r}, ' '.join(lines))")
    return python_command(f"from __future__ import annotations\nimport sys\n{source}\n{main}", board)


def solve_in_shell(ctx: OracleContext, solver: Callable[[str], str | list[str]], board: str, *, answer_file: str,
                   label: str, helpers: tuple[Callable[..., Any], ...] = ()) -> Generator[ActionLike, None, list[str]]:
    """The puzzle oracles' opening: focus the window, run ``solver`` on the typed ``board`` in the shell.

    Returns the answer the shell printed, split on spaces. The gui-only ablation drops the shell step, so the
    terminal holds no answer; then the host's own call of the same function stands in, and that run still
    plays a correct solution through the GUI and tests the checker's provenance rules.
    """
    yield focus_action(ctx.truth["window"])
    # An agent reads the board off the window in its screenshot; the oracle knows it.
    command = solver_command(solver, board, answer_file=answer_file, label=label, helpers=helpers)
    yield {"kind": "shell", "command": command, "timeout": 300}
    assert ctx.obs is not None
    found = re.search(rf"^{re.escape(label)} (.+)$", ctx.obs["terminal"], re.M)
    if found:
        return found.group(1).split()
    answer = solver(board)
    return [answer] if isinstance(answer, str) else answer


BOARD_WAITS = 10
POINTER_CLEARANCE = 40  # px right of and below the window where the pointer is parked while the board is read


def read_still_board(ctx: OracleContext, read: Callable[[np.ndarray], Any], task_id: str
                     ) -> Generator[ActionLike, Any, Any]:
    """The puzzle oracles' reading of the board, as an agent reads it: park the pointer off the window (it may lie
    on a tile), then ``read`` the screen until two screenshots in a row give the same board (drawn and still).

    ``read`` takes the screen and returns the board or None; the board is returned. When no board showed in
    BOARD_WAITS screenshots the oracle gives up as an agent would, with a ``fail`` that says so, and None is
    returned (the caller ends there). A one-channel adversary replaying the oracle may get there: its pointer
    stays wherever the shell could not move it.
    """
    x, y, w, h = ctx.truth["window"]
    yield {"kind": "move", "x": x + w + POINTER_CLEARANCE, "y": y + h + POINTER_CLEARANCE}
    board = before = None
    for _ in range(BOARD_WAITS):
        assert ctx.obs is not None
        board = read(ctx.obs["screen"])
        if board is not None and board == before:
            break
        before = board
        yield {"kind": "wait", "seconds": 1}
    if board is None:
        yield {"kind": "fail", "reason": f"{task_id} oracle: no whole board showed in the window at "
                                         f"{ctx.truth['window']}"}
    return board


def wait_file_action(path: str, *, seconds: int = 30, then: str = "echo SAVED") -> dict[str, Any]:
    """A shell action that waits (at most ``seconds``) until ``path`` exists and is not empty, then runs ``then``.

    The save a GUI app writes as the desktop account is visible to the workspace shell (shared home).
    """
    command = f"timeout {seconds} sh -c 'until [ -s {path} ]; do sleep 0.2; done' && {then}"
    return {"kind": "shell", "timeout": seconds + 30, "command": command}


def focus_action(window: list[int]) -> dict[str, Any]:
    """A click on the puzzle's status bar (its bottom-left corner): focuses the window and moves nothing."""
    x, y, _w, h = window
    return {"kind": "click", "x": x + 4, "y": y + h - 4}


def saved_game_outputs(save: str, plan: str, window: str, plan_description: str) -> dict[str, Any]:
    """``deliverables`` and ``rules`` of a puzzle task: the save from the window's dialog, the plan from the shell.

    Spread into ``Task(...)``: the save is the desktop account's and must not come out of a shell command;
    the plan is the workspace account's.
    """
    name = save.rsplit("/", 1)[-1]
    return {
        "deliverables": (Deliverable(save, "gui", description=f"~/{name} (saved by the {window} window)"),
                         Deliverable(plan, "cli", description=plan_description)),
        "rules": (GuiArtifactViaCli([save], f"the save file must come from the {window} window's Save dialog"),),
    }


def changed_pixels(frame: np.ndarray, reference: np.ndarray) -> np.ndarray:
    return np.abs(frame.astype(np.int16) - reference.astype(np.int16)).max(axis=2) > DIFF_LEVEL


def dialog_shown(frame: np.ndarray, before: np.ndarray, previous: np.ndarray | None) -> bool:
    """Whether ``frame`` shows a dialog, drawn and settled, that was not on the screen ``before``.

    A dialog is a wide and tall region of change, filled: the window manager draws the frame first,
    around the old screen, and the opening menu (or its stale trace) is narrow. Settled: hardly a
    pixel differs from the ``previous`` poll (a blinking text cursor may).
    """
    if previous is None or frame.shape != before.shape or previous.shape != frame.shape:
        return False
    changed = changed_pixels(frame, before)
    rows, cols = np.nonzero(changed)
    if not len(rows):
        return False
    width, height = int(cols.max() - cols.min()) + 1, int(rows.max() - rows.min()) + 1
    return (width >= DIALOG_MIN[0] and height >= DIALOG_MIN[1] and len(rows) >= DIALOG_FILLED * width * height
            and int(changed_pixels(frame, previous).sum()) <= SETTLED_PIXELS)


def wait_dialog(ctx: OracleContext, before: np.ndarray, *, tries: int = 40,
                seconds: float = 0.5) -> Generator[ActionLike, Any, bool]:
    """Wait steps (at most ``tries`` of ``seconds``) until the screen shows a new dialog, compared with ``before``;
    whether it did.

    The oracle looks at its observations as an agent does; no shell can see the desktop's windows.
    """
    previous = None
    for _try in range(tries):
        assert ctx.obs is not None
        frame = ctx.obs["screen"]
        if dialog_shown(frame, before, previous):
            return True
        previous = frame
        yield {"kind": "wait", "seconds": seconds}
    return False


def small_dialog_shown(frame: np.ndarray, before: np.ndarray, previous: np.ndarray | None) -> bool:
    """Whether a small dialog (Game > Specific...: a label, an entry, OK and Cancel) shows, drawn and settled.

    A new region at least SMALL_DIALOG and wider than tall: the open Game menu it replaces is narrow and tall,
    and text typed while the menu still shows would be lost.
    """
    box = changed_box(frame, before)
    if box is None or previous is None or previous.shape != frame.shape:
        return False
    width, height = box[2] - box[0], box[3] - box[1]
    return (width >= SMALL_DIALOG[0] and height >= SMALL_DIALOG[1] and width > height
            and int(changed_pixels(frame, previous).sum()) <= SETTLED_PIXELS)


def wait_small_dialog(ctx: OracleContext, before: np.ndarray, *, tries: int) -> Generator[ActionLike, Any, bool]:
    """One-second waits (at most ``tries``) until ``small_dialog_shown``; whether it did."""
    previous = None
    for _try in range(tries):
        assert ctx.obs is not None
        if small_dialog_shown(ctx.obs["screen"], before, previous):
            return True
        previous = ctx.obs["screen"]
        yield {"kind": "wait", "seconds": 1}
    return False


def save_via_dialog(ctx: OracleContext, path: str, ups: int, *, refocus: tuple[int, int] | None = None,
                    attempts: int = 3, tries: int = 40, seconds: float = 0.5) -> Iterator[ActionLike]:
    """Game > Save... by keyboard (F10, then ``ups`` times Up from the bottom), type ``path``, confirm.

    The puzzle window must have the focus. The path is typed only once the dialog shows on the screen: typed into
    the board it would be read as the game's own keys (u undoes, n starts a new game). Under load the menu or the
    dialog can come too late; then Escape closes whatever is open, a click at ``refocus`` (a point of the puzzle
    window where a click changes nothing, such as its title bar) gives the window the focus back, and it starts
    again, at most ``attempts`` times. Then it waits for the save file.
    """
    for attempt in range(attempts):
        if attempt:
            for keys in ("Escape", "Escape"):
                yield {"kind": "key", "keys": keys}
            if refocus is not None:
                yield {"kind": "click", "x": refocus[0], "y": refocus[1]}
        assert ctx.obs is not None
        before = ctx.obs["screen"].copy()
        for keys in ("F10", *["Up"] * ups, "Return"):
            yield {"kind": "key", "keys": keys}
        if not (yield from wait_dialog(ctx, before, tries=tries, seconds=seconds)):
            continue
        yield {"kind": "type", "text": path}
        for _return in range(3):  # the file chooser may swallow the first Return to finish its completion
            yield {"kind": "key", "keys": "Return"}
            yield wait_file_action(path, seconds=15)
            if "SAVED" in (ctx.obs or {}).get("terminal", ""):
                return


@dataclass(frozen=True)
class ShortestPlayChecks:
    """Clauses for "find a shortest solution, write it down, play exactly it, save the game" puzzles.

    The save must come from the window (it holds the board that exists only there), end solved in
    the fewest moves, and replay the moves file the agent wrote: the file proves the CLI search,
    the save proves the play. ``replay(desc, moves)`` is the task's own model of the puzzle.
    """

    game: str  # the save file's GAME record, e.g. "Cube"
    save: str
    moves_file: str
    unit: str  # one move in evidence text: "rolls", "turns"
    solved_as: str  # the solved position in words, e.g. "with all six faces blue"
    replay: Callable[[str, str], tuple[bool, str | None]]
    letters: Callable[[list[str]], str] = "".join  # saved MOVE records as move letters
    written: Callable[[str], str] = str  # the moves file's letters, normalised (e.g. upper-cased)
    solve_letter: str = ""  # what ``letters`` makes of Game > Solve, which a solution may not use

    def saved(self, probe: Probe) -> tuple[str, str] | None:
        found = saved_game(probe.read_text(self.save), self.game)
        return None if found is None else (found[0], self.letters(found[1]))

    def route(self, probe: Probe) -> str | None:
        text = probe.read_text(self.moves_file)
        return None if text is None else self.written(re.sub(r"[\s,]+", "", text))

    def check_save_board(self, probe: Probe, truth: Mapping[str, Any]) -> Verdict:
        saved = self.saved(probe)
        if saved is None:
            return Verdict.failed(f"{self.save} is missing or not a {self.game} save file")
        return Verdict.check(saved[0] == truth["desc"], f"saved board {saved[0]!r}, the board on screen was "
                             f"{truth['desc']!r}")

    def check_save_solved(self, probe: Probe, truth: Mapping[str, Any]) -> Verdict:
        saved = self.saved(probe)
        if saved is None:
            return Verdict.failed("no saved game")
        if self.solve_letter and self.solve_letter in saved[1]:
            return Verdict.failed("the saved game used Game > Solve")
        done, error = self.replay(truth["desc"], saved[1])
        return Verdict.check(done, error or f"saved game ({len(saved[1])} {self.unit}: {saved[1]}) ends "
                             f"{'solved, ' + self.solved_as if done else 'unsolved'}")

    def check_save_shortest(self, probe: Probe, truth: Mapping[str, Any]) -> Verdict:
        saved = self.saved(probe)
        if saved is None:
            return Verdict.failed("no saved game")
        best = len(truth["best"])
        return Verdict.check(self.replay(truth["desc"], saved[1])[0] and len(saved[1]) == best,
                             f"saved game takes {len(saved[1])} {self.unit}, the shortest solution takes {best}")

    def check_moves_file(self, probe: Probe, truth: Mapping[str, Any]) -> Verdict:
        route = self.route(probe)
        if not route:
            return Verdict.failed(f"{self.moves_file} is missing or empty")
        done, error = self.replay(truth["desc"], route)
        best = len(truth["best"])
        evidence = error or (f"moves {route} ({len(route)} {self.unit}) {'solve' if done else 'do not solve'} "
                             f"the board; the shortest solution takes {best}")
        if done and len(route) > best:
            return Verdict.partial(evidence)
        return Verdict.check(done, evidence)

    def check_played(self, probe: Probe, truth: Mapping[str, Any]) -> Verdict:
        saved, route = self.saved(probe), self.route(probe)
        if saved is None or not route:
            return Verdict.failed("the saved game or the moves file is missing")
        return Verdict.check(saved[1] == route, f"saved {self.unit} {saved[1]!r}, moves file {route!r}")


def changed_box(frame: np.ndarray, before: np.ndarray, *, block: int = 8) -> tuple[int, int, int, int] | None:
    """The bounding box (x0, y0, x1, y1) of the largest connected region that changed since ``before``.

    Blocks of ``block`` px with a third of their pixels changed are joined 4-connectedly, so a clock
    ticking in a panel or a taskbar entry far from a new window does not widen its box (as it widens
    the plain bounding box of every change that ``dialog_shown`` takes).
    """
    if frame.shape != before.shape:
        return None
    changed = changed_pixels(frame, before)
    rows, cols = changed.shape[0] // block, changed.shape[1] // block
    hot = changed[:rows * block, :cols * block].reshape(rows, block, cols, block).mean(axis=(1, 3)) > 0.33
    seen = np.zeros_like(hot)
    best: tuple[int, tuple[int, int, int, int]] | None = None
    for r0, c0 in zip(*np.nonzero(hot), strict=True):
        if seen[r0, c0]:
            continue
        seen[r0, c0] = True
        stack, size, box = [(int(r0), int(c0))], 0, [int(c0), int(r0), int(c0), int(r0)]
        while stack:
            r, c = stack.pop()
            size += 1
            box = [min(box[0], c), min(box[1], r), max(box[2], c), max(box[3], r)]
            for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                if 0 <= nr < rows and 0 <= nc < cols and hot[nr, nc] and not seen[nr, nc]:
                    seen[nr, nc] = True
                    stack.append((nr, nc))
        if best is None or size > best[0]:
            best = (size, (box[0] * block, box[1] * block, (box[2] + 1) * block, (box[3] + 1) * block))
    return None if best is None else best[1]


def wait_box(ctx: OracleContext, before: np.ndarray, *, min_size: tuple[int, int] = DIALOG_MIN, tries: int = 40,
             seconds: float = 0.5) -> Iterator[ActionLike]:
    """Wait steps until a new window or box at least ``min_size`` px shows (``changed_box``) and holds still.

    Used by tasks whose apps draw dialogs over their own windows (GIMP, xboard, Thunar, OpenSCAD); the
    oracle looks at its observations as an agent does.
    """
    previous = None
    for _try in range(tries):
        assert ctx.obs is not None
        frame = ctx.obs["screen"]
        box = changed_box(frame, before)
        if (box is not None and previous is not None and previous.shape == frame.shape
                and box[2] - box[0] >= min_size[0] and box[3] - box[1] >= min_size[1]
                and int(changed_pixels(frame, previous).sum()) <= SETTLED_PIXELS):
            return
        previous = frame
        yield {"kind": "wait", "seconds": seconds}
