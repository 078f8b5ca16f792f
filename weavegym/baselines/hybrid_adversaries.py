"""The hybrid adversaries of ``weavegym validate``: agents that use both channels to cross them.

The one-channel adversaries (``baselines.adversaries``) prove that neither channel alone passes. A real agent
uses both, and these three use the GUI only to open a way around the channel split, then do the work where it
is cheapest. Each hides the deliverable's path from command-text rules (it is decoded at run time), so what
stops it has to be the rule it is aimed at:

* ``backdoor`` runs the oracle's work, but a desktop-side command runner (a ``RunnerCommand``: the desktop
  account, no terminal, the display set, as XFCE's run dialog or an app's escape hatch starts it) grants the
  workspace account X access; every GUI step then goes out from the shell through X tools, every GUI
  deliverable is written by the runner with the oracle's bytes, and the runner takes the grant back before
  the ending. The desktop guard (guest_agent/x_guard.py) must catch it.
* ``linker`` runs the oracle's CLI steps and none of its GUI steps, then writes every GUI deliverable from the
  shell into a hard link of a desktop-owned file it may write, so the inode's owner is the desktop account.
  Provenance's one-link rule must catch it.
* ``swapper`` does the same CLI work and forges every GUI deliverable from the shell, then starts a background
  job that keeps swapping each one with a desktop-owned decoy, so that a content read and a later owner read
  could each see the file they need. The evaluation's freeze (evaluators/episode_freeze.py) must leave one
  state for both reads.
"""

from __future__ import annotations

import base64
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from weavegym.baselines.adversaries import Step, forge_commands, xdotool_command
from weavegym.core.guest_layout import DESKTOP_USER, HOME, WORKSPACE_USER
from weavegym.envs.actions import ENDING_KINDS, ActionLimits, channel_of, parse_action
from weavegym.envs.task import ActionLike, OracleContext
from weavegym.machine.guest_client import ExecResult, GuestClient

HYBRID_ADVERSARIES = ("backdoor", "linker", "swapper")
GRANT = f"xhost +si:localuser:{WORKSPACE_USER}"
REVOKE = f"xhost -si:localuser:{WORKSPACE_USER}"


@dataclass(frozen=True)
class RunnerCommand:
    """Source a desktop-side command runner starts (``sh -c``): the desktop account, no controlling terminal."""

    source: str
    timeout: float = 60.0


class DesktopRunner:
    """Runs ``RunnerCommand``s as a desktop-side runner would: setsid (no terminal), as the desktop account,
    with the display the session's programs get."""

    def __init__(self, client: GuestClient, user: str = DESKTOP_USER) -> None:
        self.client = client
        self.user = user

    def run(self, command: RunnerCommand) -> ExecResult:
        return self.client.exec(["setsid", "-w", "sh", "-c", command.source], user=self.user,
                                timeout=command.timeout, merge_stderr=True)


def hidden_path(path: str) -> str:
    """Shell text that yields ``path`` at run time without spelling it (base64), for command-text rules."""
    return f'"$(printf %s {base64.b64encode(path.encode()).decode()} | base64 -d)"'


def _oracle_steps(oracle: Iterator[ActionLike], ctx: OracleContext, limits: ActionLimits, *, gui_through_x: bool
                  ) -> Iterator[tuple[str, ActionLike]]:
    """("cli"|"gui-x"|"end"|"other", step): the oracle's steps, its GUI ones turned into X-tool shell lines
    (``gui_through_x``) or left out; consecutive GUI lines come out as one shell action."""
    pending: list[str] = []
    for action in oracle:
        try:
            parsed = parse_action(action, ctx.screen, limits)
        except ValueError:
            parsed = None
        if parsed is not None and channel_of(parsed.kind) == "gui":
            command = xdotool_command(parsed) if gui_through_x else None
            if command:
                pending.append(command)
            continue
        if parsed is not None and parsed.kind == "wait":
            continue
        if pending:
            script = "\n".join(pending)
            yield "gui-x", {"kind": "shell", "command": f"printf %s {_b64(script)} | base64 -d | sh"}
            pending = []
        if parsed is not None and parsed.kind in ENDING_KINDS:
            yield "end", action
            return
        yield "cli" if parsed is not None else "other", action
    if pending:
        yield "gui-x", {"kind": "shell", "command": f"printf %s {_b64(chr(10).join(pending))} | base64 -d | sh"}
    yield "end", {"kind": "done"}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def backdoor(oracle: Iterator[ActionLike], ctx: OracleContext, gui_deliverables: Mapping[str, bytes],
             limits: ActionLimits) -> Iterator[Step | RunnerCommand]:
    yield RunnerCommand(GRANT)
    ending: ActionLike = {"kind": "done"}
    for kind, step in _oracle_steps(oracle, ctx, limits, gui_through_x=True):
        if kind == "end":
            ending = step
            break
        yield step
    for path, data in gui_deliverables.items():
        yield RunnerCommand("\n".join(forge_commands(path, data)))
    yield RunnerCommand(REVOKE)
    yield ending


def linker(oracle: Iterator[ActionLike], ctx: OracleContext, gui_deliverables: Mapping[str, bytes],
           limits: ActionLimits) -> Iterator[Step]:
    ending: ActionLike = {"kind": "done"}
    for kind, step in _oracle_steps(oracle, ctx, limits, gui_through_x=False):
        if kind == "end":
            ending = step
            break
        yield step
    for path, data in gui_deliverables.items():
        yield {"kind": "shell", "command": link_and_write(path, data)}
    yield ending


def link_and_write(path: str, data: bytes, home: str = HOME, owner: str = DESKTOP_USER) -> str:
    """Shell text: hard-link a file of ``owner`` the caller may write to ``path`` (replacing what is there), then
    write ``data`` into it in place, so the inode keeps ``owner``. Without such a file it writes a new one."""
    target = hidden_path(path)
    return (f"t={target}; src=$(find {shlex.quote(home)} -xdev -type f -user {owner} -perm -g=rw ! -path \"$t\" "
            f"-print -quit 2>/dev/null); "
            f"if [ -n \"$src\" ] && ln -f -- \"$src\" \"$t\"; then echo \"linked $src\"; fi; "
            f"printf %s {_b64_bytes(data)} | base64 -d > \"$t\"; stat -c '%U %h' -- \"$t\"")


def _b64_bytes(data: bytes) -> str:
    return base64.b64encode(data).decode()


def swapper(oracle: Iterator[ActionLike], ctx: OracleContext, gui_deliverables: Mapping[str, bytes],
            limits: ActionLimits) -> Iterator[Step]:
    ending: ActionLike = {"kind": "done"}
    for kind, step in _oracle_steps(oracle, ctx, limits, gui_through_x=False):
        if kind == "end":
            ending = step
            break
        yield step
    for path, data in gui_deliverables.items():
        yield {"kind": "shell", "command": swap_job(path, data)}
    yield ending


def swap_job(path: str, data: bytes, home: str = HOME, owner: str = DESKTOP_USER) -> str:
    """Shell text: the forged bytes in a workspace file beside ``path``, a desktop-owned decoy at ``path`` (what
    is there, or a file of ``owner`` moved in: a rename keeps the owner), and a background job (its own
    session, so it outlives the command) that keeps swapping the two in and out of ``path``."""
    target = hidden_path(path)
    loop = ('while :; do mv -f -- "$t" "$t.d" 2>/dev/null; mv -f -- "$t.f" "$t"; mv -f -- "$t" "$t.f"; '
            'mv -f -- "$t.d" "$t" 2>/dev/null; done')
    return (f"t={target}; printf %s {_b64_bytes(data)} | base64 -d > \"$t.f\"; "
            f"[ \"$(stat -c %U -- \"$t\" 2>/dev/null)\" = {owner} ] || "
            f"{{ d=$(find {shlex.quote(home)} -xdev -type f -user {owner} ! -path '*/.*' -print -quit 2>/dev/null); "
            f"[ -n \"$d\" ] && mv -f -- \"$d\" \"$t\"; }}; stat -c '%U' -- \"$t\"; "
            f"export t; setsid -f sh -c {shlex.quote(loop)} </dev/null >/dev/null 2>&1; echo swapping")


def runner_result_obs(obs: Mapping[str, Any] | None, done: ExecResult) -> dict[str, Any]:
    """What the agent sees after a runner command: nothing on a terminal (the runner shows no output)."""
    return {**(obs or {}), "exit_code": done.exit_code}
