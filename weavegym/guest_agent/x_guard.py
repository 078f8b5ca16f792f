"""The desktop's X server, guarded for the whole episode.

Why: the workspace account (the episode's shell) has no X cookie and is on no access list, but a hybrid agent
can spend three GUI actions on a desktop-side command runner (a run dialog, an app's escape hatch) to run
``xhost +si:localuser:workspace``, then drive the display from its shell and take the grant back before
``done``. A check of the access list at the end sees nothing. So the root agent
looks all episode long: on a short timer and whenever a call comes in (``nudge``), it

- reads the access list: an entry for an account the task did not allow is removed at once, and access
  control switched off is switched back on;
- asks the X server (the X-Resource extension) which process holds each client connection: a client of any
  account but root, the desktop account and the task's allowed ones that is still connected at the next look
  (a refused attempt is gone by then) has its process killed, which closes the connection, whichever way it
  got in;

and records each of these as a crossing, which the evaluation turns into a zero score with the crossing named.
What it cannot promise: a grant given and taken back between two looks, used only by clients that also
finished in that time, leaves nothing to see (the exec record of the desktop account's programs is for that).

The arm state lives in a root-only file as well as in memory, so an agent restarted mid-episode goes on
guarding; a snapshot load brings back the file and the memory of the moment the snapshot was taken (disarmed,
for a task snapshot), and the host arms the guard again at every reset.
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from Xlib import X
from Xlib import display as xdisplay
from Xlib import error as xerror
from Xlib.ext import res

log = logging.getLogger("weavegym.guest_agent.x_guard")

CHECK_INTERVAL_S = 0.25
REPORT_WAIT_S = 3.0
MAX_CROSSINGS = 64  # kept in the report; the total counts every one
STATE_FILE = "/run/weavegym/x-guard.json"  # what the image's agent unit passes (--guard-state)
FAMILY_SERVER_INTERPRETED = 5  # X.FamilyServerInterpreted: "si:localuser:NAME" entries


@dataclass(frozen=True)
class Crossing:
    time: float
    kind: str  # "access-list" | "access-control-off" | "x-client"
    detail: str


@dataclass
class GuardState:
    armed: bool = False
    armed_at: float = 0.0
    allowed_accounts: tuple[str, ...] = ()
    crossings: list[Crossing] = field(default_factory=list)
    crossings_total: int = 0
    checks: int = 0
    error: str = ""


def entry_name(family: int, name: bytes) -> str:
    """An access-list entry as ``xhost`` prints it (``SI:localuser:user``), for the record."""
    if family == FAMILY_SERVER_INTERPRETED:
        kind, _, value = name.partition(b"\0")
        return f"SI:{kind.decode(errors='replace')}:{value.decode(errors='replace')}"
    return f"family {family}: {name.hex()}"


def process_uids(pid: int, proc: Path = Path("/proc")) -> tuple[int, ...]:
    """The real, effective, saved and filesystem uids of a process (empty when it is gone). From ``status``, not
    the owner of ``/proc/PID``, which a process that made itself undumpable shows as root."""
    try:
        for line in (proc / str(pid) / "status").read_text().splitlines():
            if line.startswith("Uid:"):
                return tuple(int(v) for v in line.split()[1:5])
    except (OSError, ValueError):
        pass
    return ()


def process_name(pid: int, proc: Path = Path("/proc")) -> str:
    try:
        return (proc / str(pid) / "comm").read_text().strip()[:32]
    except OSError:
        return "?"


def allowed_on_display(accounts: Iterable[str]) -> tuple[set[tuple[int, bytes]], set[int]]:
    """The access-list entries (``si:localuser:NAME``) and uids the accounts may hold; root may always."""
    entries = {(FAMILY_SERVER_INTERPRETED, b"localuser\0" + a.encode()) for a in accounts}
    uids = {0}
    for account in accounts:
        try:
            uids.add(pwd.getpwnam(account).pw_uid)
        except KeyError:
            pass
    return entries, uids


class XGuard:
    """``arm(accounts)``, then crossings come back from ``report()``; ``start()`` runs the timer thread.

    The accounts are every one that may hold an X client or an access-list entry (the desktop account, an
    app's own account); root always may."""

    def __init__(self, display_name: str, *, interval_s: float = CHECK_INTERVAL_S, state_file: Path | None = None,
                 clock: Callable[[], float] = time.time, kill: Callable[[int, int], None] = os.kill) -> None:
        self.display_name = display_name
        self.interval_s = interval_s
        self.state_file = state_file
        self._clock = clock
        self._kill = kill
        self._changed = threading.Condition()  # guards ``state``; notified after every look
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._display: xdisplay.Display | None = None
        self._foreign: set[tuple[int, int]] = set()  # (client, pid) of other accounts at the last look
        self.state = self._load()

    # -- control ------------------------------------------------------------------------------------
    def arm(self, allowed_accounts: Iterable[str]) -> GuardState:
        with self._changed:
            self.state = GuardState(armed=True, armed_at=self._clock(),
                                    allowed_accounts=tuple(sorted(set(allowed_accounts))))
            self._save()
        return self.report()

    def disarm(self) -> GuardState:
        with self._changed:
            self.state.armed = False
            self._save()
            return self._copy()

    def report(self, wait_s: float = REPORT_WAIT_S) -> GuardState:
        """What was recorded since the guard was armed, after one more look if the guard gets one within
        ``wait_s``. Only the timer thread talks to X (python-xlib blocks with no timeout while a client holds a
        server grab), so a stuck look leaves this call bounded and says so in ``error``."""
        with self._changed:
            if not self.state.armed:
                return self._copy()
            seen = self.state.checks
            self._wake.set()
            if not self._changed.wait_for(lambda: self.state.checks > seen or not self.state.armed, wait_s):
                copy = self._copy()
                copy.error = f"the guard could not look at the X server for {wait_s:g} s (held by a server grab?)"
                return copy
            return self._copy()

    def nudge(self) -> None:
        """Have the timer thread look now (a call came in: the agent's own latency is not spent on it)."""
        self._wake.set()

    def start(self) -> XGuard:
        self._thread = threading.Thread(target=self._run, name="x-guard", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._drop()

    # -- the check (the timer thread's, or a test's) -------------------------------------------------
    def check(self) -> list[Crossing]:
        """One look at the access list and the clients; what it found (and undid). No-op when disarmed."""
        with self._changed:
            if not self.state.armed:
                return []
            allowed, generation = self.state.allowed_accounts, self.state.armed_at
        error = ""
        try:
            found = self._look(allowed)
        except (xerror.DisplayError, xerror.ConnectionClosedError, OSError, xerror.XError) as exc:
            self._drop()
            error, found = f"{type(exc).__name__}: {exc}"[:300], []
        with self._changed:
            if self.state.armed_at != generation:  # re-armed while looking: this look was the last episode's
                return []
            self.state.error = error
            self.state.checks += 1
            if found:
                self.state.crossings_total += len(found)
                room = MAX_CROSSINGS - len(self.state.crossings)
                self.state.crossings.extend(found[:max(0, room)])
                self._save()
            self._changed.notify_all()
        for crossing in found:
            log.warning("channel crossing: %s: %s", crossing.kind, crossing.detail)
        return found

    def _look(self, allowed: tuple[str, ...]) -> list[Crossing]:
        d = self._connection()
        now = self._clock()
        found: list[Crossing] = []
        allowed_entries, allowed_uids = allowed_on_display(allowed)
        hosts = d.list_hosts()
        if hosts.mode != X.EnableAccess:
            d.set_access_control(X.EnableAccess)
            found.append(Crossing(now, "access-control-off", "X access control was switched off (xhost +)"))
        for host in hosts.hosts:
            name = bytes(host.name)
            if (host.family, name) in allowed_entries:
                continue
            d.change_hosts(X.HostDelete, host.family, name)
            found.append(Crossing(now, "access-list", f"{entry_name(host.family, name)} was granted X access"))
        own = os.getpid()
        ids = d.res_query_client_ids([{"client": 0, "mask": res.LocalClientPIDMask}])
        foreign: set[tuple[int, int]] = set()
        for client in ids.ids:
            if client.spec.mask != res.LocalClientPIDMask or not client.value:
                continue
            pid = int(client.value[0])
            uids = process_uids(pid)
            if pid == own or not uids or all(uid in allowed_uids for uid in uids):
                continue
            # The server lists a connection from the moment it is accepted, before it is authorised: a refused
            # attempt (the shell trying xclip) is there for a few milliseconds. A client still there at the next
            # look got in.
            foreign.add((client.spec.client, pid))
            if (client.spec.client, pid) not in self._foreign:
                continue
            name = process_name(pid)
            # Killing the process closes its connection. Not KillClient: it needs a resource the client made,
            # which a client that only injects input may not have (BadValue).
            try:
                self._kill(pid, signal.SIGKILL)
            except OSError:
                pass
            found.append(Crossing(now, "x-client", f"pid {pid} ({name}) of uid {uids[0]} was connected to the "
                                                   "X server"))
        self._foreign = foreign
        d.sync()
        return found

    def _connection(self) -> xdisplay.Display:
        if self._display is None:
            self._display = xdisplay.Display(self.display_name)
        return self._display

    def _drop(self) -> None:
        if self._display is not None:
            try:
                self._display.close()
            except Exception:
                pass
            self._display = None

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.check()
            except Exception:  # the guard must outlive anything the X server does to it
                log.exception("desktop guard check failed")

    # -- persistence (survives an agent restart, not a snapshot load) --------------------------------
    def _copy(self) -> GuardState:
        s = self.state
        return GuardState(s.armed, s.armed_at, s.allowed_accounts, list(s.crossings), s.crossings_total, s.checks,
                          s.error)

    def _save(self) -> None:
        if self.state_file is None:
            return
        s = self.state
        data = {"armed": s.armed, "armed_at": s.armed_at, "allowed_accounts": list(s.allowed_accounts),
                "crossings": [c.__dict__ for c in s.crossings], "crossings_total": s.crossings_total}
        try:
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.state_file.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh)
            os.replace(tmp, self.state_file)
        except OSError as exc:
            log.warning("cannot keep the desktop guard's state in %s: %s", self.state_file, exc)

    def _load(self) -> GuardState:
        if self.state_file is None:
            return GuardState()
        try:
            data = json.loads(self.state_file.read_text())
            return GuardState(armed=bool(data["armed"]), armed_at=float(data["armed_at"]),
                              allowed_accounts=tuple(str(a) for a in data["allowed_accounts"]),
                              crossings=[Crossing(float(c["time"]), str(c["kind"]), str(c["detail"]))
                                         for c in data["crossings"]][:MAX_CROSSINGS],
                              crossings_total=int(data["crossings_total"]))
        except FileNotFoundError:
            return GuardState()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring the desktop guard's unreadable state %s: %s", self.state_file, exc)
            return GuardState()
