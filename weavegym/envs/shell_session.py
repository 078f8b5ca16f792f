"""The episode's terminal: `shell` actions behave like one persistent bash; `python` runs a fresh interpreter.

Two ways to get there. ``persistent`` (the env's default, EnvConfig.persistent_shell) hands every command to
the guest agent's long-lived bash for the account (guest_agent/persistent_shell.py) and Python code to a fork
of a warm interpreter beside it. Otherwise each command runs in a new ``bash`` as the guest's workspace
account, which has no access to the X display (the GUI is the other channel), and first restores the
previous command's state: working directory, shell and exported variables, functions and aliases. It saves
that state again when it exits (an ``exit`` in the command included). So ``cd`` and ``export`` persist
exactly as in a terminal, while a command that outlives its deadline is killed with its whole process group
and simply leaves the state of the command before it: the "shell" stays usable, with no wedged process to
recover.

The state lives under ``/tmp`` in the guest, so a snapshot reset wipes it along with everything else: every
episode starts with a fresh shell in ``$HOME``. Commands and programs travel on stdin, so neither is limited
by ``ARG_MAX``.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from weavegym.core.guest_layout import WORKSPACE_USER
from weavegym.machine.guest_client import ExecResult, GuestClient

# Per account ($UID expands in the guest): the desktop-terminal adversary of `weavegym validate` keeps a
# shell of its own beside the episode's one.
STATE_DIR = "/tmp/.weavegym-shell-$UID"
STATE_FILE = f"{STATE_DIR}/state"

# bash's own variables: dynamic, read-only or per-process; restoring them would be wrong or fail.
# Every variable name, without forking a `$(compgen -v)` subshell (~20 ms under TCG): "${!a@}" lists
# the names starting with "a", and every name starts with a letter or "_".
_ALL_VARS = " ".join(f'"${{!{c}@}}"' for c in string.ascii_letters + "_")
_SKIP_VARS = ("BASH*|EUID|PPID|UID|SHELLOPTS|FUNCNAME|GROUPS|HISTCMD|LINENO|RANDOM|SRANDOM|SECONDS|EPOCH*|"
              "PIPESTATUS|_|__wg_*|OLDPWD|PWD|SHLVL|COLUMNS|LINES|DIRSTACK|COMP_*|HOSTNAME|HOSTTYPE|MACHTYPE|"
              "OSTYPE|OPTIND|OPTARG|OPTERR|IFS|PS1|PS2|PS4|MAILCHECK")

# Sourced at top level, not inside a function, where `declare` would make every variable local.
# umask 002: files the shell makes are group-writable, so GUI apps (same shared group) can save over them.
_RESTORE = f"""
umask 002
shopt -s expand_aliases
if [[ -r {STATE_FILE} ]]; then . {STATE_FILE}; else cd ~ 2>/dev/null; fi
"""

SHELL_WRAPPER = f"""
IFS= read -r -d '' __wg_cmd
exec </dev/null
__wg_save() {{
  local __wg_rc=$? __wg_v
  umask 077; [[ -d {STATE_DIR} ]] || mkdir -p {STATE_DIR}
  {{
    for __wg_v in {_ALL_VARS}; do
      case $__wg_v in {_SKIP_VARS}) continue ;; esac
      [[ ${{!__wg_v@a}} == *r* ]] && continue
      declare -p "$__wg_v" 2>/dev/null
    done
    declare -f
    alias -p
    printf 'cd -- %q 2>/dev/null\\n' "$PWD"
  }} > {STATE_FILE}  # no temp file + mv: a fork costs ~20 ms under TCG, and the save runs every command
  return $__wg_rc
}}
trap __wg_save EXIT
""" + _RESTORE + """
eval "$__wg_cmd"
"""

PYTHON_WRAPPER = _RESTORE + """
exec python3 - 2>&1
"""


@dataclass(frozen=True)
class CommandOutput:
    text: str
    exit_code: int
    timed_out: bool
    output_truncated: bool  # the guest capped the output (max_output_bytes)
    duration_s: float


class ShellSession:
    """``persistent``: the guest agent's long-lived bash for this account (``GuestClient.shell``), where a
    command costs one pipe write instead of a bash start plus a state restore and save. Same semantics, but
    for ``exit`` (it leaves the state from before the command) and an agent restart (a fresh shell)."""

    def __init__(self, client: GuestClient, *, user: str = WORKSPACE_USER, max_output_bytes: int = 1 << 20,
                 persistent: bool = False) -> None:
        self.client = client
        self.user = user
        self.max_output_bytes = max_output_bytes
        self.persistent = persistent

    def shell(self, command: str, timeout: float) -> CommandOutput:
        if self.persistent:
            return self._output(self.client.shell(command, user=self.user, timeout=timeout,
                                                  max_output_bytes=self.max_output_bytes), timeout)
        return self._run(SHELL_WRAPPER, command, timeout)

    def python(self, code: str, timeout: float) -> CommandOutput:
        """A fresh ``python3`` in the shell's current directory and environment."""
        if self.persistent:
            return self._output(self.client.shell(code, python=True, user=self.user, timeout=timeout,
                                                  max_output_bytes=self.max_output_bytes), timeout)
        return self._run(PYTHON_WRAPPER, code, timeout)

    def restart(self) -> None:
        """A new episode's shell: fresh state in ``$HOME`` (the stateless shell's state file goes with the
        snapshot reset; a long-lived one is ended here, for backends without snapshots too)."""
        if self.persistent:
            self.client.close_shell(self.user)

    def _run(self, wrapper: str, stdin: str, timeout: float) -> CommandOutput:
        result: ExecResult = self.client.exec(
            ["bash", "-c", wrapper, "weavegym-shell"], user=self.user, stdin=stdin.encode("utf-8"),
            timeout=timeout, max_output_bytes=self.max_output_bytes, merge_stderr=True)
        return self._output(result, timeout)

    @staticmethod
    def _output(result: ExecResult, timeout: float) -> CommandOutput:
        text = result.stdout
        if result.timed_out:
            text += f"\n[weavegym: interrupted after {timeout:g} s; the shell is still usable]"
        if result.restarted:
            text += "\n[weavegym: the shell had to start over: fresh state in $HOME]"
        return CommandOutput(text=text, exit_code=124 if result.timed_out else result.exit_code,
                             timed_out=result.timed_out, output_truncated=result.truncated,
                             duration_s=result.duration_s)
