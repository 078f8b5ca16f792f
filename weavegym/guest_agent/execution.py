"""Running commands in the guest: streamed output, capped, killed at a deadline.

Design choices and why:
- Each command gets its own session (``setsid``), so the deadline kills the
  whole process group, not just the shell that started it.
- Output beyond the cap is still read (and counted) so the process never blocks
  on a full pipe; only the first ``max_output_bytes`` per stream are sent.
- When the main process exits normally, background children it started
  (``gedit &``) keep running. Their pipes are drained by a daemon thread until
  they close, because closing our end would kill them with SIGPIPE the first
  time they log something.
"""

from __future__ import annotations

import os
import pwd
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from weavegym.guest_agent import procfs
from weavegym.guest_agent.errors import InvalidArgument, NotFound, PermissionDenied

DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 24 * 3600.0
DEFAULT_MAX_OUTPUT = 1 << 20
READ_CHUNK = 64 * 1024
MAX_STDIN = 64 << 20


@dataclass(frozen=True)
class ExecSpec:
    """A validated command, ready to start."""

    argv: list[str]
    cwd: str
    env: dict[str, str]  # the account switch, if any, is part of argv (see _as_account)
    stdin: bytes
    timeout_s: float
    max_output_bytes: int
    merge_stderr: bool
    cleanup_paths: tuple[str, ...] = ()


@dataclass
class Started:
    pid: int


@dataclass
class Output:
    stream: str  # "stdout" | "stderr"
    data: bytes


@dataclass
class Exited:
    exit_code: int
    timed_out: bool
    stdout_truncated: bool
    stderr_truncated: bool
    stdout_bytes: int
    stderr_bytes: int
    duration_s: float


ExecEvent = Started | Output | Exited


@dataclass
class ExecDefaults:
    """Agent-wide settings for commands; the display is the one the agent serves."""

    display: str = ""
    # Accounts whose commands get no DISPLAY/XAUTHORITY: the episode's workspace account must not see the
    # desktop (the X server refuses it anyway; this keeps its environment from even naming the display).
    no_display_users: frozenset[str] = frozenset()
    # The most processes (and threads) those same accounts may have at once, counted per account by the
    # kernel (RLIMIT_NPROC): a fork bomb from the episode's shell stops there instead of taking the guest,
    # and the checker (root) still runs. 0: no limit.
    process_limit: int = 0
    # The cgroup.procs those accounts' commands join (cgroups.py), whose unit caps them instead (and
    # outside the agent's own group); "" (no such unit): the cap above is RLIMIT_NPROC.
    episode_cgroup: str = ""
    python: str = "/usr/bin/python3"
    shell: str = "/bin/bash"
    extra_env: dict[str, str] = field(default_factory=dict)


def _check_text(value: str, what: str) -> None:
    if "\x00" in value:
        raise InvalidArgument(f"{what} contains a NUL byte, which no process can receive")


def check_timeout(timeout_s: float) -> float:
    """The deadline a request asked for, in seconds (0: the default); raises InvalidArgument when out of range."""
    if timeout_s < 0 or timeout_s != timeout_s:
        raise InvalidArgument(f"timeout_s must be >= 0, got {timeout_s}")
    timeout = DEFAULT_TIMEOUT_S if timeout_s == 0 else timeout_s
    if timeout > MAX_TIMEOUT_S:
        raise InvalidArgument(f"timeout_s {timeout_s} exceeds the maximum of {MAX_TIMEOUT_S:.0f}")
    return timeout


def check_output_cap(max_output_bytes: int) -> int:
    """The output cap a request asked for (0: the default); raises InvalidArgument when negative."""
    if max_output_bytes < 0:
        raise InvalidArgument(f"max_output_bytes must be >= 0, got {max_output_bytes}")
    return DEFAULT_MAX_OUTPUT if max_output_bytes == 0 else max_output_bytes


def build_spec(
    argv: list[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    user: str,
    stdin: bytes,
    timeout_s: float,
    max_output_bytes: int,
    merge_stderr: bool,
    defaults: ExecDefaults,
    cleanup_paths: tuple[str, ...] = (),
) -> ExecSpec:
    """Validate a request and resolve user, cwd and environment; raises RequestError subclasses."""
    if not argv or not argv[0]:
        raise InvalidArgument("empty command")
    for i, arg in enumerate(argv):
        _check_text(arg, f"argument {i}")
    timeout = check_timeout(timeout_s)
    max_output_bytes = check_output_cap(max_output_bytes)
    if len(stdin) > MAX_STDIN:
        raise InvalidArgument(f"stdin is {len(stdin)} bytes; the limit is {MAX_STDIN} (upload a file instead)")

    account = _resolve_user(user)
    home = account.pw_dir if account else os.path.expanduser("~")
    workdir = cwd or home
    _check_text(workdir, "cwd")
    if not os.path.isdir(workdir):
        raise NotFound(f"cwd {workdir!r} does not exist or is not a directory")

    full_env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": home,
        "USER": account.pw_name if account else pwd.getpwuid(os.getuid()).pw_name,
        "LOGNAME": account.pw_name if account else pwd.getpwuid(os.getuid()).pw_name,
        "SHELL": defaults.shell,
        "TERM": "dumb",
    }
    name = account.pw_name if account else pwd.getpwuid(os.getuid()).pw_name
    if defaults.display and name not in defaults.no_display_users:
        full_env["DISPLAY"] = defaults.display
        # Only the agent's own account gets its X cookie: other accounts reach X through the server's
        # per-user access list (or not at all), never through a cookie they could copy elsewhere.
        if account is None and os.environ.get("XAUTHORITY"):
            full_env["XAUTHORITY"] = os.environ["XAUTHORITY"]
    full_env.update(defaults.extra_env)
    for key, value in env.items():
        if not key or "=" in key:
            raise InvalidArgument(f"invalid environment variable name {key!r}")
        _check_text(key, "environment variable name")
        _check_text(value, f"environment variable {key}")
        full_env[key] = value
    capped = account is not None and name in defaults.no_display_users
    if account is not None:
        argv = _as_account(argv, account, full_env["PATH"], capped, defaults)
    return ExecSpec(
        argv=argv,
        cwd=workdir,
        env=full_env,
        stdin=stdin,
        timeout_s=timeout,
        max_output_bytes=max_output_bytes,
        merge_stderr=merge_stderr,
        cleanup_paths=cleanup_paths,
    )


def _as_account(argv: list[str], account: pwd.struct_passwd, path: str, capped: bool,
                defaults: ExecDefaults) -> list[str]:
    """The command behind a wrapper that switches to ``account`` (and caps it) after the exec.

    Popen's own ``user=``/``group=`` make it fork() the agent, a threaded gRPC server, and the child
    then runs gRPC's fork handlers and glibc's set*id broadcast before exec: with grpcio 1.85 about one
    such child in three died of SIGSEGV (measured on a host Xvfb agent). Without a uid change Popen uses
    vfork(), which runs no handlers; setpriv then drops to the account. No preexec_fn either: it is
    unsafe in a threaded server.
    """
    if shutil.which(argv[0], path=path) is None:  # as Popen would have said, before the wrapper
        raise NotFound(f"command not found: {argv[0]!r}")
    switch = ["/usr/bin/setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--init-groups", "--"]
    if capped and defaults.episode_cgroup:
        # Still root, the child joins the episode's group (writing 0 moves the writer itself, before the
        # command can fork), then drops to the account and execs the command.
        return ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', defaults.episode_cgroup, *switch, *argv]
    if capped and defaults.process_limit:
        # prlimit runs as the account (after the switch), so it may lower its own limit, then execs the
        # command.
        return [*switch, "prlimit", f"--nproc={defaults.process_limit}", "--", *argv]
    return [*switch, *argv]


def _resolve_user(user: str) -> pwd.struct_passwd | None:
    if not user:
        return None
    try:
        account = pwd.getpwnam(user)
    except KeyError:
        raise InvalidArgument(f"no such user {user!r} in the guest") from None
    if account.pw_uid == os.getuid():
        return None
    if os.getuid() != 0:
        raise PermissionDenied(f"the agent runs as uid {os.getuid()} and cannot switch to {user!r}")
    return account


def write_python_source(code: str) -> str:
    """Write Python source to a temp file; the 128 KiB argv limit makes ``-c`` unfit for big code."""
    _check_text(code, "code")
    fd, path = tempfile.mkstemp(prefix="weavegym-", suffix=".py")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(code)
    os.chmod(path, 0o644)  # readable by the desktop user the code may run as
    return path


def run(spec: ExecSpec, cancelled: Callable[[], bool] = lambda: False) -> Iterator[ExecEvent]:
    """Start the process and yield Started, Output…, Exited. ``cancelled`` aborts (client gone)."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            spec.argv,
            cwd=spec.cwd,
            env=spec.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if spec.merge_stderr else subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        _cleanup(spec)
        raise NotFound(f"command not found: {spec.argv[0]!r}") from None
    except (PermissionError, OSError) as exc:
        _cleanup(spec)
        raise InvalidArgument(f"cannot start {spec.argv[0]!r}: {exc}") from None
    counters = {"stdout": 0, "stderr": 0}
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    if proc.stderr is not None:
        sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    timed_out = False
    deadline = start + spec.timeout_s
    try:
        # Inside the try: a consumer that stops after this event (client gone) still gets
        # the process group killed and the temp files removed by the finally below.
        yield Started(pid=proc.pid)
        threading.Thread(target=_feed_stdin, args=(proc, spec.stdin), daemon=True).start()
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline or cancelled():
                timed_out = now >= deadline
                _kill_group(proc.pid)
                break
            if proc.poll() is not None:
                # Main process is gone; collect what is already buffered, then hand
                # any pipe still held by background children to a drainer thread.
                _drain_ready(sel, counters, spec.max_output_bytes, out := [])
                yield from out
                break
            for key, _ in sel.select(timeout=min(0.1, deadline - now)):
                data = os.read(key.fileobj.fileno(), READ_CHUNK)  # type: ignore[union-attr]
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                chunk = _account(key.data, data, counters, spec.max_output_bytes)
                if chunk:
                    yield Output(key.data, chunk)
        try:
            exit_code = proc.wait(timeout=max(0.0, deadline - time.monotonic()) if not timed_out else 5)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            exit_code = proc.wait(timeout=5)
        if timed_out:
            _kill_group(proc.pid)  # children that outlived the leader
            _wait_group_gone(proc.pid, deadline_s=5.0)
        _hand_off_pipes(sel, proc, kill_first=timed_out)
    finally:
        if proc.poll() is None:
            _kill_group(proc.pid)
            proc.wait(timeout=5)
        _cleanup(spec)
    yield Exited(
        exit_code=exit_code,
        timed_out=timed_out,
        stdout_truncated=counters["stdout"] > spec.max_output_bytes,
        stderr_truncated=counters["stderr"] > spec.max_output_bytes,
        stdout_bytes=counters["stdout"],
        stderr_bytes=counters["stderr"],
        duration_s=time.monotonic() - start,
    )


def _account(stream: str, data: bytes, counters: dict[str, int], cap: int) -> bytes:
    """Count every byte; return the part that still fits under the per-stream cap."""
    sent = min(counters[stream], cap)
    counters[stream] += len(data)
    room = cap - sent
    return data[:room] if room > 0 else b""


def _drain_ready(sel: selectors.BaseSelector, counters: dict[str, int], cap: int, out: list) -> None:
    while sel.get_map():
        ready = sel.select(timeout=0.02)
        if not ready:
            return
        for key, _ in ready:
            data = os.read(key.fileobj.fileno(), READ_CHUNK)  # type: ignore[union-attr]
            if not data:
                sel.unregister(key.fileobj)
                continue
            chunk = _account(key.data, data, counters, cap)
            if chunk:
                out.append(Output(key.data, chunk))


def _hand_off_pipes(sel: selectors.BaseSelector, proc: subprocess.Popen, kill_first: bool) -> None:
    remaining = [key.fileobj for key in sel.get_map().values()]
    sel.close()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None and pipe not in remaining:
            pipe.close()
    if remaining and not kill_first:
        threading.Thread(target=_discard_until_eof, args=(remaining,), daemon=True).start()
    else:
        for pipe in remaining:
            pipe.close()  # type: ignore[union-attr]


def _discard_until_eof(pipes: list) -> None:
    for pipe in pipes:
        try:
            while os.read(pipe.fileno(), READ_CHUNK):
                pass
        except OSError:
            pass
        finally:
            pipe.close()


def _feed_stdin(proc: subprocess.Popen, data: bytes) -> None:
    try:
        if data and proc.stdin is not None:
            proc.stdin.write(data)
    except (BrokenPipeError, OSError):
        pass  # the process did not want (all of) its input
    finally:
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _live_members(pgid: int) -> list[int]:
    """PIDs in process group ``pgid`` that are not zombies (zombies are dead, awaiting a reaper)."""
    return [pid for pid, fields in procfs.processes() if int(fields[2]) == pgid and procfs.is_live(fields)]


def _wait_group_gone(pgid: int, deadline_s: float) -> None:
    """SIGKILL is asynchronous: report the timeout only once the group is really gone."""
    end = time.monotonic() + deadline_s
    while _live_members(pgid) and time.monotonic() < end:
        _kill_group(pgid)
        time.sleep(0.01)


def _cleanup(spec: ExecSpec) -> None:
    for path in spec.cleanup_paths:
        try:
            os.unlink(path)
        except OSError:
            pass
