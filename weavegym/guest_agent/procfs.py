"""Reading the process table from /proc: what the agent needs to kill groups, sessions and commands."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (state, ppid, pgrp, session, ...), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()  # the name may hold spaces and parentheses


def processes() -> list[tuple[int, list[bytes]]]:
    """(pid, stat fields) of every process there is now."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := stat_fields(int(entry))) is not None:
            found.append((int(entry), fields))
    return found


def is_live(fields: list[bytes]) -> bool:
    """Not a zombie or dead: zombies are gone already, only waiting for a reaper."""
    return fields[0] not in (b"Z", b"X")


def kill_matching(matches: Callable[[int, list[bytes]], bool], deadline_s: float = 5.0) -> None:
    """SIGKILL the live processes that ``matches(pid, fields)`` until none is left (new ones may fork while we
    look), for at most ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        members = [pid for pid, fields in processes() if is_live(fields) and matches(pid, fields)]
        if not members:
            return
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)  # SIGKILL is asynchronous: look again shortly
