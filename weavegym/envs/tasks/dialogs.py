"""Helpers for tasks whose GUI half is a dialog or a Tk form that prints its record (no TASK here).

Setup opens the dialog (zenity, or a task's own Tk fixture) as the desktop
account and sends its stdout into a root-only file under the private folder, so
the answer exists only if someone confirmed it on the screen; the workspace
shell can neither read nor write that file. These helpers read such an answer
and wait for it to land.
"""

from __future__ import annotations

import json
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
