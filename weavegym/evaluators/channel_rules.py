"""Rules that keep the two channels apart (the kernel's and the X server's records, not command text).

The image closes the obvious bridges (the workspace account has no X cookie and is on no X access
list); these rules catch an agent that opens one from the *desktop* side, which a GUI action can do:
- ``DesktopGuarded``: the guest agent's guard (guest_agent/x_guard.py) watched the X server all episode and
  saw a grant to another account, access control switched off, or an X client of another account (each of
  which it undid at once). A grant taken back before ``done`` is still on its record.
- ``EpisodeFrozen``: the evaluation could not stop every process of the episode before reading its state
  (evaluators/episode_freeze.py), so what it read may have changed under it.
- ``DesktopAccessUnchanged``: someone ran ``xhost +…`` (or handed X to another account), after which
  the shell could drive the GUI with xdotool. Any entry beyond the expected ones zeroes the episode.
- ``NoDesktopTerminalWork``: a program ran on a terminal as the desktop account, i.e. command-line
  work was typed into a terminal window instead of going through the ``shell`` channel; that is how a
  GUI deliverable would be forged from the desktop side. Seen from the kernel's process accounting
  (each process's controlling tty and uid), never from program names, so a renamed binary changes
  nothing. GUI apps started from the desktop have no controlling terminal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict

from weavegym.core.guest_layout import DESKTOP_USER
from weavegym.evaluators.episode_freeze import EpisodeFreeze
from weavegym.evaluators.trajectory_rules import RuleContext, ShortcutFlag
from weavegym.machine.desktop_guard import GuardReport


class DesktopGuarded:
    """The desktop guard's record of the episode is clean: armed since the reset, and no crossing."""

    def __init__(self, report: GuardReport) -> None:
        self.name = "DesktopGuarded"
        self.report = report

    def check(self, ctx: RuleContext) -> list[ShortcutFlag]:
        report = self.report
        if not report.armed:
            return [ShortcutFlag(self.name, "high", "the desktop guard was not armed for this episode, so nobody "
                                 "watched the X server", {"checks": report.checks})]
        flags = []
        if report.crossings_total:
            kinds = sorted({c.kind for c in report.crossings})
            first = report.crossings[0].detail if report.crossings else ""
            flags.append(ShortcutFlag(
                self.name, "high", f"channel crossing: {report.crossings_total} time(s) another account reached the "
                f"desktop's X server ({', '.join(kinds)}; first: {first}); GUI work belongs to the GUI channel",
                {"crossings": [asdict(c) for c in report.crossings[:20]], "total": report.crossings_total}))
        if report.error:
            flags.append(ShortcutFlag(self.name, "high", f"the desktop guard could not check the X server at the end:"
                                      f" {report.error}", {"checks": report.checks}))
        return flags


class EpisodeFrozen:
    """Every process of the episode's accounts was stopped before the state was read."""

    def __init__(self, freezer: EpisodeFreeze) -> None:
        self.name = "EpisodeFrozen"
        self.freezer = freezer  # rules run after the clauses, so its freeze has happened by then

    def check(self, ctx: RuleContext) -> list[ShortcutFlag]:
        result = self.freezer.result
        if result is None:
            return [ShortcutFlag(self.name, "high", "the episode was not frozen before its state was read", {})]
        if result.ok:
            return []
        return [ShortcutFlag(self.name, "high", f"{len(result.still_running)} process(es) of the episode kept "
                             "running through the freeze before scoring (a fork storm?): what the checker read may "
                             "have changed under it", {"running": list(result.still_running[:20]),
                                                        "rounds": result.rounds})]


class DesktopAccessUnchanged:
    """The X server's access list holds only the accounts the image and the task put there."""

    def __init__(self, allowed_accounts: Iterable[str] = ()) -> None:
        self.name = "DesktopAccessUnchanged"
        self.allowed = {f"SI:localuser:{a}" for a in (DESKTOP_USER, *allowed_accounts)}

    def check(self, ctx: RuleContext) -> list[ShortcutFlag]:
        enabled, entries = ctx.probe.x_access_list()
        if not enabled:
            return [ShortcutFlag(self.name, "high", "X access control was switched off (xhost +)",
                                 {"xhost": entries[:5]})]
        extra = [entry for entry in entries if entry not in self.allowed]
        if not extra:
            return []
        return [ShortcutFlag(self.name, "high", f"the X server was opened to {', '.join(extra[:5])}",
                             {"unexpected": extra[:20], "allowed": sorted(self.allowed)})]


class NoDesktopTerminalWork:
    """No process of the desktop account had a controlling terminal during the episode."""

    def __init__(self, desktop_user: str = DESKTOP_USER) -> None:
        self.name = "NoDesktopTerminalWork"
        self.desktop_user = desktop_user

    def check(self, ctx: RuleContext) -> list[ShortcutFlag]:
        probe = ctx.probe
        running = [asdict(p) for p in probe.terminal_processes(self.desktop_user)]
        since = (ctx.trajectory.started_wall or 0.0) - 2.0  # the guest clock is resynced at reset, to ~1 s
        ended, flooded = probe.ended_terminal_processes(self.desktop_user, since)
        if flooded:  # fail closed: that many terminal programs is itself the answer
            return [ShortcutFlag(self.name, "high", "a flood of programs ran on a terminal as the desktop account",
                                 {"running": running[:20]})]
        if probe.accounting_paused():  # the disk was filled to blind the accounting
            return [ShortcutFlag(self.name, "high", "process accounting was paused during the episode (disk full?)",
                                 {"running": running[:20]})]
        if not running and not ended:
            return []
        seen = running + [asdict(p) for p in ended]
        names = sorted({str(p["comm"]) for p in seen})
        return [ShortcutFlag(self.name, "high",
                             f"{len(seen)} program(s) ran on a terminal as the desktop account "
                             f"({', '.join(names[:8])}); command-line work belongs to the shell channel",
                             {"running": running[:20], "ended": seen[len(running):][:20]})]
