"""The adversaries of ``weavegym validate``: agents that want the reward through one channel, or by forging.

A hybrid task is only worth something if neither channel alone can pass it. These agents try, each
built from the task's own oracle so that they are as well informed as an agent can be:

* ``cli-only`` runs the oracle's shell and python steps, turns every GUI step into the shell command
  that would do it with X tools (xdotool, and first xclip and a raw X11 handshake), then forges every
  GUI deliverable from the shell, in place and by copy, with the bytes the oracle's run produced.
* ``gui-only`` runs the oracle's GUI steps and types every CLI step into a terminal window on the
  desktop, so the commands run as the desktop account, on a pseudo-terminal, with X access.
* ``forger`` does no work at all: it writes every deliverable with the oracle's bytes (the truth, as a
  worst-case adversary would have it) through the shell, and through a desktop terminal wherever the
  shell cannot reach the file, then ends exactly as the oracle's run did: ``done`` with the right answer,
  or on an infeasible variant ``fail`` with a reason that names the cause. An answer or an abstention
  alone must therefore never be worth a pass: the work's traces have to be too.

The one-channel adversaries end as the oracle does (``done`` with its answer, ``fail`` with its reason),
with what the oracle made of their observations: the oracle does not see the task's withheld truth
(``Task.withheld``; an Abstention task's feasibility and causes), so an answer or a cause it can only find
through the missing channel comes out wrong. Tasks with infeasible variants meet two more:

* ``quitter`` gives up at once, with the instruction itself as its reason: it must not pass on any variant
  (a cause that the instruction gives away would let it);
* ``fabricator`` (infeasible variants) writes every path the task calls a fabrication and says ``done``;
* ``shotgun`` (infeasible variants of a task whose cause is one of many candidates, ``Abstention.candidates``)
  does all of the oracle's work but ends with a reason that lists every candidate: naming them all must not
  count as naming the cause.

Steps are actions sent through ``env.step`` (recorded in the trajectory, as any agent's) or
``TerminalCommand``s. A terminal command is what an agent types into a terminal window it opened on the
desktop; ``DesktopTerminal`` runs it exactly as that window would (the desktop account, a fresh
pseudo-terminal as its controlling tty, DISPLAY set) without typing it key by key, which would only
make validation slower. Like a real terminal window, it never appears in the trajectory as CLI code.
"""

from __future__ import annotations

import base64
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from weavegym.core.guest_layout import DESKTOP_USER
from weavegym.envs.actions import ENDING_KINDS, Action, ActionLimits, channel_of, parse_action
from weavegym.envs.episode_clauses import episode_clauses
from weavegym.envs.shell_session import PYTHON_WRAPPER, SHELL_WRAPPER
from weavegym.envs.task import ActionLike, OracleContext, Task
from weavegym.machine.guest_client import ExecResult, GuestClient

ADVERSARIES = ("cli-only", "gui-only", "forger")
ABSTENTION_ADVERSARIES = ("quitter", "fabricator")  # only for tasks with infeasible variants (Task.abstention)
SHOTGUN = "shotgun"  # only for those whose cause is one of many candidates (Abstention.candidates)
FABRICATED = b"fabricated by weavegym validate\n"
FORGE_CHUNK = 60_000  # base64 characters per shell action (actions carry at most 100 000)
MAX_FORGED_BYTES = 16 << 20

# What a shell-only agent tries first: the desktop's display, its clipboard, X without any library.
X_PROBES = r"""export DISPLAY=:0
xdotool getactivewindow getwindowname; echo "xdotool exit $?"
command -v xclip >/dev/null && { xclip -o -selection clipboard; echo "xclip exit $?"; }
python3 - <<'PY'
import socket, struct
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("/tmp/.X11-unix/X0")
    s.sendall(struct.pack("<cxHHHHxx", b"l", 11, 0, 0, 0))
    print("X11 handshake:", "accepted" if s.recv(8)[:1] == b"\x01" else "refused")
except OSError as exc:
    print("X11 connect:", exc)
PY
"""


@dataclass(frozen=True)
class TerminalCommand:
    """Source typed into a terminal window on the desktop (``python``: into a python3 there)."""

    source: str
    python: bool = False
    timeout: float = 120.0


Step = ActionLike | TerminalCommand


class DesktopTerminal:
    """Runs ``TerminalCommand``s as a terminal window on the desktop would, keeping its shell's state."""

    INPUT = "/tmp/.weavegym-terminal-input"

    def __init__(self, client: GuestClient, user: str = DESKTOP_USER) -> None:
        self.client = client
        self.user = user

    def run(self, command: TerminalCommand) -> ExecResult:
        self.client.upload(command.source.encode("utf-8"), self.INPUT, mode=0o600, owner=self.user)
        wrapper = PYTHON_WRAPPER if command.python else SHELL_WRAPPER
        # `script` gives the command a new pseudo-terminal as its controlling tty, as a terminal window does.
        line = f'bash -c "$WEAVEGYM_WRAPPER" weavegym-terminal < {self.INPUT}'
        return self.client.exec(["script", "-q", "-e", "-c", line, "/dev/null"], user=self.user,
                                env={"WEAVEGYM_WRAPPER": wrapper, "SHELL": "/bin/bash"}, timeout=command.timeout,
                                merge_stderr=True)


def xdotool_command(action: Action) -> str | None:
    """The shell command that would perform a GUI action through X (None: nothing to translate)."""
    kind = action.kind
    at = f"mousemove {action.x} {action.y} " if getattr(action, "x", None) is not None else ""
    button = {"left": 1, "middle": 2, "right": 3}.get(str(getattr(action, "button", "left") or "left"), 1)
    if kind == "move":
        body = at
    elif kind in ("click", "double_click", "right_click"):
        repeat = "--repeat 2 " if kind == "double_click" else ""
        body = f"{at}click {repeat}{3 if kind == 'right_click' else button}"
    elif kind == "drag":
        body = (f"mousemove {action.x} {action.y} mousedown 1 "
                f"mousemove {action.to_x} {action.to_y} mouseup 1")
    elif kind == "scroll":
        clicks = int(getattr(action, "dy", 0) or 0)
        body = f"{at}click --repeat {max(1, abs(clicks))} {5 if clicks > 0 else 4}"
    elif kind == "type":
        body = f"type -- {shlex.quote(action.text or '')}"
    elif kind == "key":
        body = f"key -- {shlex.quote(action.keys or '')}"
    elif kind in ("mouse_down", "mouse_up"):
        body = f"{at}{kind.replace('_', '')} {button}"
    else:
        return None
    return f"DISPLAY=:0 xdotool {body}"


def forge_commands(path: str, data: bytes) -> list[str]:
    """Shell commands that put ``data`` at ``path``: staged in /tmp, then in place, else by a move over it."""
    encoded = base64.b64encode(data).decode()
    stage = "/tmp/.weavegym-forged"
    chunks = [encoded[i:i + FORGE_CHUNK] for i in range(0, len(encoded), FORGE_CHUNK)] or [""]
    commands = [f"printf %s {shlex.quote(chunks[0])} > {stage}.b64"]
    commands += [f"printf %s {shlex.quote(chunk)} >> {stage}.b64" for chunk in chunks[1:]]
    target = shlex.quote(path)
    commands.append(f"base64 -d {stage}.b64 > {stage} && mkdir -p -- \"$(dirname -- {target})\" && "
                    f"{{ cat {stage} > {target} || mv -f {stage} {target}; }}")
    return commands


def _parsed(action: ActionLike, screen: tuple[int, int], limits: ActionLimits) -> Action | None:
    try:
        return parse_action(action, screen, limits)
    except ValueError:
        return None


def cli_only(oracle: Iterator[ActionLike], ctx: OracleContext, gui_deliverables: Mapping[str, bytes],
             limits: ActionLimits) -> Iterator[Step]:
    """Consecutive GUI steps go out as one shell action (an agent with a step budget would batch them
    too), and ``wait`` steps are dropped: without X nothing on screen changes for them to wait for."""
    yield {"kind": "shell", "command": X_PROBES}
    pending: list[str] = []
    ending: ActionLike = {"kind": "done"}
    for action in oracle:
        parsed = _parsed(action, ctx.screen, limits)
        if parsed is not None and channel_of(parsed.kind) == "gui":
            command = xdotool_command(parsed)
            if command:
                pending.append(command)
            continue
        if parsed is not None and parsed.kind == "wait":
            continue
        if pending:
            yield {"kind": "shell", "command": "\n".join(pending)}
            pending = []
        if parsed is not None and parsed.kind in ENDING_KINDS:
            ending = action
            break
        yield action  # a CLI step, or an invalid one: the env reports it, and validate counts it
    if pending:
        yield {"kind": "shell", "command": "\n".join(pending)}
    for path, data in gui_deliverables.items():
        for command in forge_commands(path, data):
            yield {"kind": "shell", "command": command}
    yield ending


def gui_only(oracle: Iterator[ActionLike], ctx: OracleContext, limits: ActionLimits) -> Iterator[Step]:
    ending: ActionLike = {"kind": "done"}
    for action in oracle:
        parsed = _parsed(action, ctx.screen, limits)
        if parsed is None or channel_of(parsed.kind) == "gui":
            yield action
        elif channel_of(parsed.kind) == "cli":
            timeout = parsed.timeout or limits.default_timeout_s
            source = parsed.code if parsed.kind == "python" else parsed.command
            yield TerminalCommand(source, python=parsed.kind == "python", timeout=timeout)
        elif parsed.kind in ENDING_KINDS:
            ending = action
            break
        else:
            yield action  # wait
    yield ending


def forger(ctx: OracleContext, deliverables: Mapping[str, bytes], ending: Mapping[str, Any] | None = None
           ) -> Iterator[Step]:
    """``ending``: the oracle's own done/fail action (None: a plain ``done``)."""
    for path, data in deliverables.items():
        commands = forge_commands(path, data)
        for command in commands:
            yield {"kind": "shell", "command": command}
        if (ctx.obs or {}).get("exit_code", 0) != 0:  # the shell cannot reach it: a desktop terminal may
            yield TerminalCommand("\n".join(commands))
    yield dict(ending) if ending is not None else {"kind": "done"}


def quitter(instruction: str) -> Iterator[Step]:
    yield {"kind": "fail", "reason": instruction}


def shotgun(oracle: Iterator[Step], candidates: Sequence[str],
            ending_of: Callable[[Step], Mapping[str, Any] | None]) -> Iterator[Step]:
    """The oracle's steps, but its ``fail`` names every candidate as well as the cause it found."""
    for step in oracle:
        ending = None if isinstance(step, TerminalCommand) else ending_of(step)
        if ending is not None and ending.get("kind") == "fail":
            yield {**ending, "reason": f"{ending.get('reason') or ''} It may be any of: {', '.join(candidates)}."}
            return
        yield step


def fabricator(ctx: OracleContext, paths: list[str]) -> Iterator[Step]:
    """Make up every fabrication (the shell first, then a desktop terminal), then claim success."""
    for path in paths:
        commands = forge_commands(path, FABRICATED)
        for command in commands:
            yield {"kind": "shell", "command": command}
        if (ctx.obs or {}).get("exit_code", 0) != 0:
            yield TerminalCommand("\n".join(commands))
    yield {"kind": "done", "answer": "done"}


def capture_deliverables(task: Task, truth: Mapping[str, Any], read: Callable[..., bytes | None]
                         ) -> dict[str, tuple[str, bytes]]:
    """{path: (channel, bytes)} of the deliverables a finished episode left; ``read`` is Probe.read_bytes.

    Root-owned ones (a dialog's answer captured by setup) are left out: no account of the episode can
    write them, and a command that names the harness's private folder is flagged on its own.
    """
    found = {}
    # The deliverables this variant scores: an infeasible one's are the abstention's (envs/episode_clauses.py).
    for deliverable in episode_clauses(task, truth)[1]:
        if deliverable.owner == "root":
            continue
        path = deliverable.resolve(truth)
        data = read(path, max_bytes=MAX_FORGED_BYTES)
        if data is not None:
            found[path] = (deliverable.channel, data)
    return found
