"""Reading the process table from /proc: what the agent needs to kill groups, sessions and commands."""

from __future__ import annotations

import os


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
