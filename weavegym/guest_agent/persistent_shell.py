"""One long-lived bash per account: the episode's terminal, at the cost of one pipe write per command.

A command is one write to the shell's command pipe and one status line back, with no new bash, no state
file and no restore: ``cd``, variables, functions, aliases and background jobs persist because it is the
same process. The state a command started from is kept for the case where the command must be killed,
by a checkpoint: before it reads each command, the shell forks a copy of itself that stops at once, in
a process group of its own. When the command finishes, the shell kills that copy and makes the next
one. When the command outlives its deadline, the agent kills the shell and every process of its group
that started after the command did (the command, its children, the jobs it started; jobs of earlier
commands live on), and resumes the copy, which carries on serving with the state from before the
command. ``exit`` (or ``exec``) in a command ends the shell in the same way: the copy takes over. The
fork runs after a command's status is sent, while the caller is busy with the reply.

Pipes, with fixed descriptor numbers in the shell: 8 carries requests (a kind letter, the payload, a
NUL byte: no command can contain NUL), 9 carries status lines (``ready <pid of the copy>``, ``done
<exit code>``, ``exit <exit code>``), and 1 and 2 share one output pipe. A command can reach 8 and 9 (it
is the shell); using them (a job that reads 8 steals later commands) only breaks its own episode's
terminal, whose commands then time out; the env and the agent carry on. Output that background jobs
write after their command returned is reported with the next command, as a terminal would show it.

``python`` calls do not start a ``python3`` (about 155 ms under TCG before the first line runs): the shell
reports its directory and exported variables on 9 and waits on 8, while the agent has a warm interpreter
started with the shell (python_zygote.py) fork a child that runs the code with that state, and then tells the
shell the exit code. A python call cannot change the shell's state, so at its deadline only the child's
process group is killed; the shell is not. Where a fork would not behave as a fresh ``python3`` (a
``python3`` function, changed resource limits, or the cases zygote_program.py lists), the shell runs a real
``python3 -`` with the code, as it did before the warm interpreter existed.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import string
import subprocess
import threading
import time
from dataclasses import dataclass

from weavegym.guest_agent import procfs
from weavegym.guest_agent.errors import FailedPrecondition, InvalidArgument, NotFound
from weavegym.guest_agent.execution import ExecDefaults, build_spec, check_output_cap, check_timeout
from weavegym.guest_agent.python_zygote import PROGRAM, PythonZygote, ZygoteResult, read_umask, write_all

READ_CHUNK = 64 * 1024
PENDING_CAP = 1 << 20  # output of background jobs kept for the next command
READY_TIMEOUT_S = 30.0  # a new shell (or a resumed copy) says it is ready within this, or it is replaced
REPLY_GRACE_S = 5.0  # told how its python call ended, the shell says `done` within this

# The shell's program. It runs at top level (never inside a function), so `declare` and `local`-less
# assignments in commands are global, as at a prompt. umask 002: files the shell makes are group-writable,
# so GUI apps (same shared group) can save over them. A copy resumes inside `eval "$__wg_serve"`, and a
# subshell does not inherit the EXIT trap, so the loop sets it again. The pipes arrive on whatever numbers
# the agent's pipes had (8 or 9 among them), so they move to 8 and 9 through spare numbers. When the
# serving shell dies, its stopped copy's process group is orphaned, and the kernel sends it SIGHUP (ignored
# here) and SIGCONT: the copy may start serving before the agent hands over to it. __wg_py reports the shell's
# state for a python call: "py", then NUL-terminated fields (a flag, "f" when python3 is a function, $PWD, the
# exported NAME=value pairs) and an empty field; then it reads "r<exit code>" (the code ran) or "x<code>" (run
# it here).
LOOP = r"""
exec {__wg_r}<&"$1" {__wg_w}>&"$2" </dev/null
eval "exec $1<&- $2>&-"
exec 8<&"$__wg_r" 9>&"$__wg_w"
exec {__wg_r}<&- {__wg_w}>&-
unset __wg_r __wg_w
umask 002
shopt -s expand_aliases
cd ~ 2>/dev/null
__wg_py() {
  local __wg_v __wg_f=- __wg_e=()
  declare -F python3 >/dev/null && __wg_f=f
  for __wg_v in @ALL_VARS@; do
    [[ ${!__wg_v@a} == *x* && ${!__wg_v@a} != *[aA]* ]] && __wg_e+=("$__wg_v=${!__wg_v}")
  done
  printf 'py\n' >&9
  printf '%s\0' "$__wg_f" "${PWD:-.}" "${__wg_e[@]}" >&9
  printf '\0' >&9
  IFS= read -r -d "" -u 8 __wg_v || exit 0
  case $__wg_v in
    r*) return "${__wg_v:1}" ;;
    *) python3 - <<<"${__wg_v:1}" ;;
  esac
}
__wg_serve='
trap "printf \"exit %d\\n\" \$? >&9" EXIT
while :; do
  set -m
  ( trap "" HUP; kill -STOP "$BASHPID"; trap - HUP; eval "$__wg_serve" ) &
  __wg_copy=$!
  set +m
  disown "$__wg_copy" 2>/dev/null
  printf "ready %d\n" "$__wg_copy" >&9
  IFS= read -r -d "" -u 8 __wg_req || exit 0
  case ${__wg_req:0:1} in
    s) eval "${__wg_req:1}" ;;
    p) __wg_py ;;
  esac
  __wg_rc=$?
  kill -KILL "$__wg_copy" 2>/dev/null
  printf "done %d\n" "$__wg_rc" >&9
done'
eval "$__wg_serve"
"""
# Every variable name, without a `$(compgen -v)` subshell: "${!a@}" lists the names that start with "a".
LOOP = LOOP.replace("@ALL_VARS@", " ".join(f'"${{!{c}@}}"' for c in string.ascii_letters + "_"))
UNRUN_NOTE = b"\n[weavegym: the shell did not hand the python code over (its __wg_py function was changed)]"
LOST_NOTE = b"\n[weavegym: the python process was lost (its interpreter was killed); the shell is still usable]"
ENDED_NOTE = b"\n[weavegym: the shell ended (exec or a signal); the next command starts from the state before this one]"


class _Output:
    """What a command wrote: the first ``cap`` bytes kept, every byte counted (the agent's memory stays bounded
    however much a command prints)."""

    def __init__(self, cap: int) -> None:
        self.cap, self.data, self.total = cap, bytearray(), 0

    def add(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.total += len(chunk)


@dataclass(frozen=True)
class ShellResult:
    output: bytes
    exit_code: int
    timed_out: bool
    truncated: bool  # more than max_output_bytes were written; output holds the first ones
    output_bytes: int
    duration_s: float
    restarted: bool  # the shell started over with a fresh state: its checkpoint was gone too


class PersistentShell:
    """One bash that serves ``run`` calls one at a time (a lock serialises them) until ``close``."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, python_argv: list[str] | None = None) -> None:
        self._argv, self._env, self._cwd = argv, env, cwd
        self._python_argv = python_argv  # the warm interpreter's command (python_zygote.py); None: python3 per call
        self._zygote: PythonZygote | None = None
        self._py_report = b""  # what the shell said of itself for the python call under way
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None  # the first shell: the agent's child, the session leader
        self._shell = 0  # pid (and process group) of the serving bash
        self._copy = 0  # its current checkpoint (0: none yet)
        # Checkpoints announced by other shells: by a checkpoint that the kernel resumed when its shell died
        # (before we hand over to it), or strays (a dying shell's next checkpoint). copy -> its shell.
        self._others: dict[int, int] = {}
        self._shell_fd = -1  # a pidfd of the serving bash: readable once it is gone
        self._fds: dict[str, int] = {}
        self._status = b""
        self._pending = _Output(PENDING_CAP)  # what background jobs wrote since the last command returned

    # ------------------------------------------------------------------ life cycle

    def _start(self) -> None:
        req_r, req_w = os.pipe()
        st_r, st_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [*self._argv, "-c", LOOP, "weavegym-shell", str(req_r), str(st_w)],
                cwd=self._cwd, env=self._env, stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w,
                pass_fds=(req_r, st_w), start_new_session=True)
        except BaseException:
            os.close(out_w)
            raise
        finally:
            for fd in (req_r, st_w):
                os.close(fd)
        os.set_blocking(out_r, False)
        # out_w stays open here too: a restarted warm interpreter writes to the same pipe.
        self._fds = {"req": req_w, "status": st_r, "out": out_r, "out_w": out_w}
        self._status, self._pending = b"", _Output(PENDING_CAP)
        if self._python_argv is not None:  # it gets ready while the first command runs
            self._zygote = PythonZygote(self._python_argv, self._env, self._cwd, out_w, out_r)
            self._zygote.start()
        if not self._hand_to(self._proc.pid):
            self._kill_all()
            raise ShellUnavailable("the shell did not get ready")

    def close(self) -> None:
        """Kill the shell, its checkpoints and all their jobs; close the pipes. Idempotent."""
        with self._lock:
            self._kill_all()

    def _kill_all(self) -> None:
        # Everything the shell ever started shares the session of the first one (copies have process groups of
        # their own, not sessions): kill by session, so that a copy resumed while we kill cannot escape.
        if self._proc is not None:
            _kill_session(self._proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
            self._proc = None
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
        self._shell = self._copy = 0
        for fd in (*self._fds.values(), self._shell_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds, self._shell_fd = {}, -1

    # ------------------------------------------------------------------ commands

    def run(self, kind: str, payload: str, timeout_s: float, max_output_bytes: int) -> ShellResult:
        """Run a shell command (``kind="shell"``) or Python code (``"python"``) and wait for its status."""
        if kind not in ("shell", "python"):
            raise InvalidArgument(f"unknown shell request kind {kind!r}")
        if "\x00" in payload:
            raise InvalidArgument("the command contains a NUL byte, which no shell can receive")
        # Python code stays here: the shell reports its state, and the warm interpreter runs the code.
        request = b"p\0" if kind == "python" else (kind[0] + payload).encode("utf-8") + b"\0"
        with self._lock:
            start = time.monotonic()
            restarted = False
            if not self._fds:
                self._start()
            elif not _alive(self._shell):  # killed between requests (by a job of its own, say): its copy serves
                restarted = not self._hand_to(self._copy)
            if not self._copy and not self._hand_to(self._shell):  # it forks the next checkpoint after a command
                restarted = True
            self._adopt_announced()  # no stray may read this request
            successor = self._copy  # the state from before this command, should the command end the shell
            write_all(self._fds["req"], request)
            output = _Output(max_output_bytes)
            output.add(bytes(self._pending.data))
            self._pending = _Output(PENDING_CAP)
            deadline = start + timeout_s
            exit_code, timed_out, reported = 0, False, False
            while True:
                line = self._next_status(deadline, output)
                word, _, value = (line or b"").partition(b" ")
                if line is None:  # past the deadline: kill the command with the shell
                    timed_out, exit_code = True, 124
                    _kill_command(self._shell, successor)
                elif word == b"done":
                    exit_code, self._copy = int(value), 0  # the shell kills that copy and forks the next one
                    self._drain(output)
                    if kind == "python" and not reported:  # a command redefined __wg_py: the code never ran
                        exit_code = 255
                        output.add(UNRUN_NOTE)
                    break
                elif word == b"exit":  # `exit`, or a fatal shell error
                    exit_code = int(value)
                elif word == b"py":  # the shell waits in __wg_py for how the code ran
                    reported = True
                    result = self._python_call(payload, deadline, output)
                    if result.exit_code is None:  # it runs a python3 of its own
                        write_all(self._fds["req"], b"x" + payload.encode("utf-8") + b"\0")
                    else:
                        timed_out = result.timed_out
                        if result.reason == "lost":
                            output.add(LOST_NOTE)
                        write_all(self._fds["req"], b"r%d\0" % result.exit_code)
                        deadline = max(deadline, time.monotonic() + REPLY_GRACE_S)
                    continue
                elif word == b"gone":  # `exec`, or a signal
                    exit_code = 255
                    output.add(ENDED_NOTE)
                else:
                    continue
                self._drain(output)
                restarted |= not self._hand_to(successor)
                if not restarted:
                    self._drain(None)  # the killed command's last words belong to no command
                break
            return ShellResult(output=bytes(output.data), exit_code=exit_code, timed_out=timed_out,
                               truncated=output.total > max_output_bytes, output_bytes=output.total,
                               duration_s=time.monotonic() - start, restarted=restarted)

    def _python_call(self, code: str, deadline: float, output: _Output) -> ZygoteResult:
        """Run ``code`` in the warm interpreter with the state the shell reported; None exit code: it did not."""
        flag, cwd, *env = self._py_report.split(b"\0")
        if flag != b"-" or self._zygote is None:  # `python3` is a shell function: the shell must run it
            return ZygoteResult(None, reason="function" if flag != b"-" else "no zygote")
        if cwd == b".":  # PWD unset: the shell's real directory
            with contextlib.suppress(OSError):
                cwd = os.fsencode(os.readlink(f"/proc/{self._shell}/cwd"))
        umask = read_umask(self._shell)
        if umask is None:
            return ZygoteResult(None, reason="no umask")
        return self._zygote.call(cwd, umask, code, env, shell_pid=self._shell, deadline=deadline,
                                 drain=lambda: self._drain(output))

    def _hand_to(self, pid: int) -> bool:
        """Make ``pid`` (the first shell, or the checkpoint of one that died) the serving shell: resume it and
        wait until it has forked its own checkpoint. When it cannot, start a fresh shell and return False."""
        with contextlib.suppress(OSError):
            if self._shell_fd >= 0:
                os.close(self._shell_fd)
        self._shell_fd = -1
        self._shell, self._copy = pid, 0
        if pid and _alive(pid):
            with contextlib.suppress(OSError):
                self._shell_fd = os.pidfd_open(pid)
            if self._adopt_announced():  # it was resumed (by the kernel) and announced its checkpoint already
                return True
            deadline = time.monotonic() + READY_TIMEOUT_S
            while self._shell_fd >= 0 and time.monotonic() < deadline:
                # A copy stops itself right after the fork; it may not have yet. Resuming it too early would
                # leave it stopped for good, so resume it only once it is stopped (the kernel may have already).
                if _state(pid) == b"T":
                    _killpg(pid, signal.SIGCONT)
                if self._next_status(min(deadline, time.monotonic() + 0.2), self._pending, ready=True) == b"ready":
                    self._adopt_announced()  # and kill the strays
                    return True
                if self._adopt_announced():
                    return True
                if not _alive(pid):
                    break
        if self._proc is not None and pid == self._proc.pid:
            return False  # the first shell itself did not get ready: _start reports it
        self._kill_all()
        self._start()
        return False

    def _adopt_announced(self) -> bool:
        """Take the serving shell's checkpoint from the ones other shells announced (True if there was one),
        and kill the rest: a stray that was resumed would read requests too."""
        found = False
        for copy, parent in self._others.items():
            if parent == self._shell and _alive(copy):
                self._copy, found = copy, True
            else:
                _killpg(copy, signal.SIGKILL)
        self._others = {}
        return found

    def _next_status(self, deadline: float, output: _Output | None, *, ready: bool = False) -> bytes | None:
        """The next ``done``/``exit`` line of the serving shell, ``b"gone"`` when it died without one, or None
        once ``deadline`` passes; with ``ready``, also ``b"ready"`` once it announces its checkpoint. Output read
        meanwhile goes to ``output``. A ``ready`` from any other shell is kept in ``_others`` for ``_hand_to``."""
        while True:
            while True:
                if self._status.startswith(b"py\n"):  # NUL-separated fields up to an empty one
                    end = self._status.find(b"\0\0", 3)
                    if end < 0:
                        break  # the rest is on its way
                    self._py_report, self._status = self._status[3:end], self._status[end + 2:]
                    return b"py"
                if b"\n" not in self._status:
                    break
                line, _, self._status = self._status.partition(b"\n")
                word, _, value = line.partition(b" ")
                if word != b"ready":
                    return line
                copy = int(value or 0)
                parent = _parent(copy)
                if copy == 0 and ready:  # the fork failed (the account's processes at their cap): no checkpoint
                    return b"ready"
                if parent == self._shell:
                    self._copy = copy
                    if ready:
                        return b"ready"
                elif copy and parent is not None:
                    self._others[copy] = parent
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            watched = [self._fds["status"], self._fds["out"]] + ([self._shell_fd] if self._shell_fd >= 0 else [])
            readable, _, _ = select.select(watched, [], [], remaining)
            if self._fds["out"] in readable:
                self._drain(output)
            if self._fds["status"] in readable:
                data = os.read(self._fds["status"], 4096)
                if not data:  # no writer left: neither the shell nor any copy
                    return b"gone"
                self._status += data
            elif self._shell_fd in readable:  # gone, and nothing more to read from it
                return b"gone"

    def _drain(self, output: _Output | None) -> None:
        """Read what the output pipe holds now into ``output`` (None: discard it)."""
        with contextlib.suppress(BlockingIOError):
            while data := os.read(self._fds["out"], READ_CHUNK):
                if output is not None:
                    output.add(data)


class ShellUnavailable(RuntimeError):
    """A shell did not start (or a resumed checkpoint did not get ready) in time."""


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _kill_command(shell: int, copy: int) -> None:
    """Kill the serving shell and what it started after it forked ``copy`` (just before it read the command):
    the command that outlived its deadline, with its children and jobs. Jobs of earlier commands share the
    shell's process group (no job control) but started before, so they live on, as they do when a stateless
    command times out. Start times are in clock ticks; within one tick, the later pid is the later process."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(shell, signal.SIGKILL)
    table = dict(procfs.processes())
    after = (int(table[copy][19]), copy) if copy in table else (0, 0)
    procfs.kill_matching(lambda pid, fields: int(fields[2]) == shell and (int(fields[19]), pid) > after)


def _kill_session(sid: int) -> None:
    """Kill every process of session ``sid``."""
    procfs.kill_matching(lambda _pid, fields: int(fields[3]) == sid)


def _state(pid: int) -> bytes | None:
    fields = procfs.stat_fields(pid) if pid > 0 else None
    return fields[0] if fields else None


def _parent(pid: int) -> int | None:
    fields = procfs.stat_fields(pid) if pid > 0 else None
    return int(fields[1]) if fields and procfs.is_live(fields) else None


def _alive(pid: int) -> bool:
    return _state(pid) not in (None, b"Z", b"X")


class ShellRegistry:
    """The agent's long-lived shells, one per account, each started on its first command.

    A shell runs as its account exactly as an Exec command would (the same account switch, environment,
    process cap or episode cgroup), so the channel split holds for it too.
    """

    def __init__(self, defaults: ExecDefaults) -> None:
        self._defaults = defaults
        self._lock = threading.Lock()
        self._shells: dict[str, PersistentShell] = {}

    def run(self, user: str, kind: str, source: str, timeout_s: float, max_output_bytes: int) -> ShellResult:
        timeout, cap = check_timeout(timeout_s), check_output_cap(max_output_bytes)
        with self._lock:
            shell = self._shells.get(user)
            if shell is None:  # the account switch and environment are resolved once, when the shell starts
                spec = build_spec([self._defaults.shell, "--noprofile", "--norc"], cwd="", env={}, user=user,
                                  stdin=b"", timeout_s=timeout, max_output_bytes=cap, merge_stderr=True,
                                  defaults=self._defaults)
                shell = self._shells[user] = PersistentShell(spec.argv, spec.env, spec.cwd,
                                                             self._python_argv(user, timeout, cap))
        try:
            return shell.run(kind, source, timeout, cap)
        except ShellUnavailable as exc:
            raise FailedPrecondition(f"the shell of {user or 'the agent user'!r} did not start: {exc}") from None

    def _python_argv(self, user: str, timeout: float, cap: int) -> list[str] | None:
        """The warm interpreter's command for ``user``; None (a python3 per call) where there is no interpreter."""
        try:
            return build_spec([self._defaults.python, "-c", PROGRAM], cwd="", env={}, user=user, stdin=b"",
                              timeout_s=timeout, max_output_bytes=cap, merge_stderr=True, defaults=self._defaults).argv
        except NotFound:
            return None

    def close(self, user: str) -> bool:
        with self._lock:
            shell = self._shells.pop(user, None)
        if shell is not None:
            shell.close()
        return shell is not None

    def close_all(self) -> None:
        with self._lock:
            shells, self._shells = list(self._shells.values()), {}
        for shell in shells:
            shell.close()
