"""The agent's side of the warm interpreter (zygote_program.py) that serves one account's ``python`` calls.

It is started with the account's long-lived shell, exactly as that shell is (the same account switch,
episode cgroup or process cap), in a session of its own, with stdout and stderr on the shell's output pipe.
A call hands it the shell's state and the code; it forks a child that runs the code and reports the child's
pid and exit code. At the deadline the agent kills the child's process group (the child and what it
started), as a timed-out command of the shell is killed, and the warm interpreter lives on.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from weavegym.guest_agent import procfs

PROGRAM = Path(__file__).with_name("zygote_program.py").read_text(encoding="utf-8")
KILL_GRACE_S = 5.0  # a killed child is reaped, and reported, well within this


@dataclass(frozen=True)
class ZygoteResult:
    """``exit_code`` None: the zygote did not run the code (``reason`` says why) and a real python3 must."""

    exit_code: int | None
    timed_out: bool = False
    reason: str = ""


class PythonZygote:
    """One warm interpreter; ``call`` is not thread-safe (the shell's lock serialises calls)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, out_write: int, out_read: int) -> None:
        self._argv, self._env, self._cwd = argv, env, cwd
        # The shell's output pipe, both ends (the owner closes them): the children write to it, and the owner's
        # drain callback empties it while a call waits, so that a child never blocks on a full pipe.
        self._out_write, self._out_read = out_write, out_read
        self._proc: subprocess.Popen[bytes] | None = None
        self._requests = self._replies = -1
        self._buffer = b""
        self._ready = False
        self._failed = False  # it did not get ready once: do not pay that wait on every call

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None else 0

    def start(self, env: dict[str, str] | None = None) -> None:
        """Start (or restart, with ``env`` as its environment) the interpreter; it gets ready in the background."""
        self.close()
        if env is not None:
            self._env = env
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [*self._argv, str(req_r), str(rep_w)], cwd=self._cwd, env=self._env, stdin=subprocess.DEVNULL,
                stdout=self._out_write, stderr=self._out_write, pass_fds=(req_r, rep_w), start_new_session=True)
        except OSError:
            for fd in (req_w, rep_r):
                os.close(fd)
            self._failed = True
            return
        finally:
            for fd in (req_r, rep_w):
                os.close(fd)
        self._requests, self._replies, self._buffer, self._ready = req_w, rep_r, b"", False

    def close(self) -> None:
        """Kill the interpreter and every child it forked (they share its session). Idempotent."""
        if self._proc is not None:
            procfs.kill_matching(lambda _pid, fields, sid=self._proc.pid: int(fields[3]) == sid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
            self._proc = None
        for fd in (self._requests, self._replies):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._requests = self._replies = -1

    def call(self, cwd: bytes, umask: int, code: str, env: list[bytes], *, shell_pid: int, deadline: float,
             drain: Callable[[], None]) -> ZygoteResult:
        """Run ``code`` in a child with the shell's directory, umask and environment (``NAME=value`` items)."""
        if self._proc is None or self._failed:
            return ZygoteResult(None, reason="not running")
        if not self._ready:
            self._ready = self._next_line(min(deadline, time.monotonic() + 30.0), drain) == b"ready"
            if not self._ready:
                self._failed = True
                self.close()
                return ZygoteResult(None, reason="did not get ready")
        if _limits(shell_pid) != _limits(self.pid):  # `ulimit` in the shell: python3 would inherit it
            return ZygoteResult(None, reason="limits")
        payload = b"\0".join([cwd, b"%o" % umask, code.encode("utf-8", "surrogateescape"), *env])
        try:
            write_all(self._requests, b"%d\n" % len(payload) + payload)
        except OSError:  # it died since the last call: the code did not run
            self.start()
            return ZygoteResult(None, reason="gone")
        child, timed_out = 0, False
        while True:
            line = self._next_line(deadline if not timed_out else time.monotonic() + KILL_GRACE_S, drain)
            word, _, value = (line or b"").partition(b" ")
            if word == b"pid":
                child = int(value)
                if timed_out:
                    _kill_group(child)
            elif word == b"exit":
                return ZygoteResult(124 if timed_out else int(value), timed_out=timed_out)
            elif word == b"fallback":
                reason = value.decode()
                if reason in ("env", "site"):  # start afresh, where it would be used again
                    self.start(env=_as_env(env) if reason == "env" else None)
                return ZygoteResult(None, reason=reason)
            elif line is None and not timed_out:  # the deadline: kill the child and what it started
                timed_out = True
                if child:
                    _kill_group(child)
            else:  # the interpreter died, or a killed child was not reported in time: the code may have run
                self.start()
                return ZygoteResult(124 if timed_out else 255, timed_out=timed_out, reason="lost")

    def _next_line(self, deadline: float, drain: Callable[[], None]) -> bytes | None:
        """The next reply line, b"" if the interpreter closed its end, or None at the deadline."""
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            readable, _, _ = select.select([self._replies, self._out_read], [], [], remaining)
            if self._out_read in readable:
                drain()
            if self._replies in readable:
                data = os.read(self._replies, 4096)
                if not data:
                    return b""
                self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line


def _kill_group(pgid: int) -> None:
    procfs.kill_matching(lambda _pid, fields: int(fields[2]) == pgid)


def _as_env(entries: list[bytes]) -> dict[str, str]:
    return dict(os.fsdecode(e).partition("=")[::2] for e in entries if b"=" in e)


def _limits(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/limits").read_bytes()
    except OSError:
        return None


def read_umask(pid: int) -> int | None:
    """A process's umask, from /proc (Linux 4.7+)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_bytes().splitlines():
            if line.startswith(b"Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return None


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
