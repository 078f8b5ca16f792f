"""Helpers shared by the sgt-puzzles tasks (no TASK here): save files, a hidden start, the Save dialog.

Simon Tatham's puzzles save a game as ``KEY:length:value`` records (the game's
description, then one ``MOVE`` record per move). Tasks start a puzzle from such
a file and delete it once the window is up, so the board lives only in the GUI.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from weavegym.envs.setup_context import HOME, SetupContext
from weavegym.envs.task import ActionLike, OracleContext

SAVE_DIALOG = "game file to save"  # the Save dialog's title: "Enter name of game file to save"


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
        ("PARAMS", params), ("CPARAMS", params), ("DESC", desc), ("NSTATES", "1"), ("STATEPOS", "1"))))
    ctx.launch_gui(f"cd {HOME} && {{as_user}} {binary} --load {start}", name=slug)
    window = ctx.wait_window(title)
    ctx.run(["rm", "-f", start])
    return [window.x, window.y, window.width, window.height]


def wait_window_action(title: str, *, present: bool = True, seconds: int = 60, then: str = "") -> dict[str, Any]:
    """A shell action that waits (at most ``seconds``) until a window titled ``title`` is shown, or gone."""
    loop = "until" if present else "while"
    command = (f"timeout {seconds} sh -c '{loop} xdotool search --onlyvisible --name \"{title}\" >/dev/null; "
               "do sleep 0.2; done'" + (f" && {then}" if then else ""))
    return {"kind": "shell", "timeout": seconds + 30, "command": command}


def save_via_dialog(ctx: OracleContext, path: str, ups: int) -> Iterator[ActionLike]:
    """Game > Save... by keyboard (F10, then ``ups`` times Up from the bottom), type ``path``, confirm."""
    for keys in ("F10", *["Up"] * ups, "Return"):
        yield {"kind": "key", "keys": keys}
    yield wait_window_action(SAVE_DIALOG)
    yield {"kind": "type", "text": path}
    for _attempt in range(3):  # the file chooser may swallow the first Return to finish its completion
        yield {"kind": "key", "keys": "Return"}
        yield wait_window_action(SAVE_DIALOG, present=False, seconds=15, then="echo SAVED")
        assert ctx.obs is not None
        if "SAVED" in ctx.obs["terminal"]:
            break
