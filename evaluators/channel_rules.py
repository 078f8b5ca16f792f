"""Rules that keep the two channels apart at the end of an episode (state, not command text).

The image closes the obvious bridges (the workspace account has no X cookie and is on no X access
list); these rules catch an agent that opens one from the *desktop* side, which a GUI action can do:
- ``DesktopAccessUnchanged``: someone ran ``xhost +…`` (or handed X to another account), after which
  the shell could drive the GUI with xdotool. Any entry beyond the expected ones zeroes the episode.
- ``NoDesktopTerminalWork``: a program ran on a terminal as the desktop account, i.e. command-line
  work was typed into a terminal window instead of going through the ``shell`` channel; that is how a
  GUI deliverable would be forged from the desktop side. Seen from the kernel's process accounting
  (each process's controlling tty and uid), never from program names, so a renamed binary changes
  nothing. GUI apps started from the desktop have no controlling terminal.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from weavegym.envs.setup_context import DESKTOP_USER
from weavegym.evaluators.trajectory_rules import RuleContext, ShortcutFlag

PACCT = "/var/log/account/pacct"
PACCT_MAX_BYTES = 16 << 20
_ACCT_V3 = struct.Struct("<BBHIIIIIIf8H16s")  # linux/acct.h: struct acct_v3, 64 bytes
ACCT_V3_SIZE = 64


class DesktopAccessUnchanged:
    """The X server's access list holds only the accounts the image and the task put there."""

    def __init__(self, allowed_accounts: Iterable[str] = ()) -> None:
        self.name = "DesktopAccessUnchanged"
        self.allowed = {f"SI:localuser:{a}" for a in (DESKTOP_USER, *allowed_accounts)}

    def check(self, ctx: RuleContext) -> list[ShortcutFlag]:
        result = ctx.probe._exec(["xhost"], what="xhost (X access list)", max_output_bytes=1 << 16, check=True)
        lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
        if not lines or "access control enabled" not in lines[0]:
            return [ShortcutFlag(self.name, "high", "X access control was switched off (xhost +)",
                                 {"xhost": lines[:5]})]
        extra = [entry for entry in lines[1:] if entry not in self.allowed]
        if not extra:
            return []
        return [ShortcutFlag(self.name, "high", f"the X server was opened to {', '.join(extra[:5])}",
                             {"unexpected": extra[:20], "allowed": sorted(self.allowed)})]


def terminal_processes(pacct: bytes, uid: int, since: float) -> list[dict[str, object]]:
    """Processes of ``uid`` begun at or after ``since`` (epoch s) that had a controlling terminal."""
    found = []
    for offset in range(0, len(pacct) - ACCT_V3_SIZE + 1, ACCT_V3_SIZE):
        (_flag, version, tty, _exit, ac_uid, _gid, pid, _ppid, btime, _etime,
         *_rest, comm) = _ACCT_V3.unpack_from(pacct, offset)
        if version & 0x0F != 3:
            continue
        if ac_uid == uid and tty != 0 and btime >= since:
            found.append({"pid": pid, "tty": tty, "comm": comm.split(b"\0", 1)[0].decode("ascii", "replace"),
                          "started": btime})
    return found


class NoDesktopTerminalWork:
    """No process of the desktop account had a controlling terminal during the episode."""

    def __init__(self, desktop_user: str = DESKTOP_USER) -> None:
        self.name = "NoDesktopTerminalWork"
        self.desktop_user = desktop_user

    def check(self, ctx: RuleContext) -> list[ShortcutFlag]:
        probe = ctx.probe
        live = probe._exec(["ps", "-u", self.desktop_user, "-o", "pid=,tty=,comm="], what="ps of the desktop account",
                           max_output_bytes=1 << 20)
        on_tty = [line.split(None, 2) for line in live.stdout.splitlines() if len(line.split(None, 2)) == 3]
        running = [{"pid": int(p), "tty": t, "comm": c} for p, t, c in on_tty if t != "?"]
        ended: list[dict[str, object]] = []
        uid_line = probe._exec(["id", "-u", self.desktop_user], what="uid of the desktop account").stdout.strip()
        started = ctx.trajectory.started_wall if ctx.trajectory.started_wall else 0.0
        data = probe.read_bytes(PACCT, max_bytes=PACCT_MAX_BYTES) if uid_line.isdigit() else None
        if data is not None:
            tail = data[len(data) % ACCT_V3_SIZE:] if len(data) % ACCT_V3_SIZE else data
            ended = terminal_processes(tail, int(uid_line), started - 2.0)
        if not running and not ended:
            return []
        seen = running + ended
        names = sorted({str(p["comm"]) for p in seen})
        return [ShortcutFlag(self.name, "high",
                             f"{len(seen)} program(s) ran on a terminal as the desktop account "
                             f"({', '.join(names[:8])}); command-line work belongs to the shell channel",
                             {"running": running[:20], "ended": ended[:20]})]
