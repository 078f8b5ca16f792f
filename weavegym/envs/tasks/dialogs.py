"""Helpers for tasks whose GUI half is a dialog or a Tk form that prints its record (no TASK here).

Setup opens the dialog (zenity, or a task's own Tk fixture) as the desktop
account and sends its stdout into a root-only file under the private folder, so
the answer exists only if someone confirmed it on the screen; the workspace
shell can neither read nor write that file. These helpers read such an answer
and wait for it to land.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from weavegym.evaluators import Probe


def form_fields(probe: Probe, path: str) -> list[str] | None:
    """The fields of a ``zenity --forms`` answer (one line, "|"-separated), or None when nothing was confirmed."""
    text = probe.read_text(path)
    return None if not text else text.rstrip("\n").split("|")


def json_record(probe: Probe, path: str) -> dict[str, Any] | None:
    """The last JSON object a Tk form printed as it exited, or None when nothing (or no object) was recorded.

    The last line, because a form may print a line per submission and the latest is the one that counts.
    """
    lines = (probe.read_text(path) or "").strip().splitlines()
    try:
        found = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def await_dialog_exit() -> dict[str, Any]:
    """The oracle's shell step after it confirms a dialog: wait (at most 60 s) until zenity has exited.

    zenity writes its answer as it exits, which under TCG load can trail the key press by seconds; a checker
    that ran before would see no answer.
    """
    return {"kind": "shell", "command": "timeout 60 sh -c 'while pgrep -x zenity >/dev/null; do sleep 0.2; done'",
            "timeout": 90}


# A Tk entry's focus ring, thick and coloured (highlightthickness, highlightcolor; highlightbackground white):
# Tk draws it only while the entry has the keyboard and its window the focus, so an oracle can see on the screen
# that a click moved the focus before it types. The window manager moves the focus only once it gets to the
# click, and keys sent before then go to the window that had it (a GTK editor takes ctrl+slash as select-all).
FOCUS_RING, FOCUS_RING_COLOUR = 3, (0, 80, 200)


def ring_colour_hex(colour: Sequence[int] = FOCUS_RING_COLOUR) -> str:
    """The colour as Tk takes it in a fixture's layout."""
    return "#" + "".join(f"{int(c):02x}" for c in colour)


def focus_ring_shown(image: Any, box: Sequence[int], colour: Sequence[int] = FOCUS_RING_COLOUR) -> bool:
    """Whether the entry at ``box`` (x, y, width, height on the screen) shows its focus ring: at least three of
    the middles of its four edges are the ring's colour."""
    x, y, w, h = (int(v) for v in box)
    points = [(x + w // 2, y + 1), (x + w // 2, y + h - 2), (x + 1, y + h // 2), (x + w - 2, y + h // 2)]
    height, width = len(image), len(image[0]) if len(image) else 0
    lit = 0
    for px, py in points:
        if 0 <= px < width and 0 <= py < height:
            pixel = [int(v) for v in image[py][px][:3]]
            lit += sum(abs(a - int(b)) for a, b in zip(pixel, colour, strict=True)) < 90
    return lit >= 3
