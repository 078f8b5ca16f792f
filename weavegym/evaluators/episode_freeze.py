"""Stop every process of the episode's accounts before the checker reads anything, and let them go after.

Why: a checker reads a deliverable's content and then, later, its provenance. A background job left by the
episode (either account's; one a desktop-side runner started has no terminal and no parent the env knows)
could swap a file between those two reads, or between two clauses, so that each read sees a different,
convenient file. Scoring a frozen machine makes the evaluation one instant.

How: SIGSTOP, which no process can catch or ignore, sent to every process whose real or effective uid is one
of the accounts, in rounds until a round finds none still running (a process forked meanwhile is caught by the
next round). Uids are read from ``/proc/PID/status``, not from the owner of ``/proc/PID``, which a process that
made itself undumpable shows as root. The X server and the agent run as root and keep running, so windows,
screenshots and the probes still work. Clauses that talk to a service the episode keeps running (an HTTP
server the shell restarted, the desktop's settings daemon) are marked ``live`` and scored before the freeze.

Only the processes this freeze stopped are continued afterwards: one that was stopped before (a job the
episode suspended, the agent's own parked shell copy) stays as it was.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from weavegym.core.errors import AgentInternalError, WeaveGymError
from weavegym.machine.guest_client import GuestClient

log = logging.getLogger("weavegym.evaluators.episode_freeze")

FREEZE_DEADLINE_S = 10.0
MAX_PIDS_OUTPUT = 1 << 20

# Runs in the guest as root: argv = stop|cont, comma-separated uids (stop) or pids (cont), deadline seconds.
# Prints one JSON line: {"ok": bool, "stopped": [pids], "rounds": n, "running": [pids still running]}.
FREEZE_SCRIPT = r"""
import json, os, signal, sys, time
what, items, deadline = sys.argv[1], sys.argv[2], time.monotonic() + float(sys.argv[3])
me = os.getpid()

def scan(uids):
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
            with open(f"/proc/{name}/status") as fh:
                ids = next(line for line in fh if line.startswith("Uid:")).split()[1:3]
        except (OSError, StopIteration, IndexError):
            continue
        if any(int(u) in uids for u in ids):
            found[int(name)] = state
    return found

if what == "cont":
    for pid in (int(p) for p in items.split(",") if p):
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass
    print(json.dumps({"ok": True, "stopped": [], "rounds": 0, "running": []}))
    sys.exit(0)
uids = {int(u) for u in items.split(",") if u}
stopped, rounds = [], 0
while True:
    rounds += 1
    running = [pid for pid, state in scan(uids).items() if state not in (b"T", b"t", b"Z", b"X")]
    if not running:
        print(json.dumps({"ok": True, "stopped": stopped, "rounds": rounds, "running": []}))
        break
    if time.monotonic() > deadline:
        print(json.dumps({"ok": False, "stopped": stopped, "rounds": rounds, "running": running[:50]}))
        break
    for pid in running:
        try:
            os.kill(pid, signal.SIGSTOP)
            if pid not in stopped:
                stopped.append(pid)
        except OSError:
            pass
"""


@dataclass(frozen=True)
class FreezeResult:
    ok: bool  # every process of the accounts stopped within the deadline
    stopped: tuple[int, ...]
    rounds: int
    still_running: tuple[int, ...] = ()


class EpisodeFreeze:
    """``freeze()`` before the first probe, ``thaw()`` once the evaluation is done (also after it failed)."""

    def __init__(self, client: GuestClient, accounts: Iterable[str], deadline_s: float = FREEZE_DEADLINE_S) -> None:
        self.client = client
        self.accounts = tuple(sorted(set(accounts)))
        self.deadline_s = deadline_s
        self.result: FreezeResult | None = None

    def freeze(self) -> FreezeResult:
        uids = [self._uid(a) for a in self.accounts]
        data = self._run("stop", ",".join(str(u) for u in uids if u is not None))
        self.result = FreezeResult(bool(data["ok"]), tuple(int(p) for p in data["stopped"]), int(data["rounds"]),
                                   tuple(int(p) for p in data["running"]))
        return self.result

    def thaw(self) -> None:
        """Continue what the freeze stopped. Best effort: it runs after the evaluation, also one that failed
        because the VM died, and must not hide that failure; the next reset discards the processes anyway."""
        if self.result is None or not self.result.stopped:
            return
        stopped, self.result = self.result.stopped, None
        try:
            self._run("cont", ",".join(str(p) for p in stopped))
        except WeaveGymError as exc:
            log.warning("could not continue the episode's processes after scoring: %s", exc)

    def _uid(self, account: str) -> int | None:
        result = self.client.exec(["id", "-u", "--", account], timeout=15)
        text = result.stdout.strip()
        return int(text) if result.exit_code == 0 and text.isdigit() else None  # no such account on this guest

    def _run(self, what: str, items: str) -> dict:
        result = self.client.exec(["python3", "-c", FREEZE_SCRIPT, what, items, f"{self.deadline_s:g}"],
                                  timeout=self.deadline_s + 20, max_output_bytes=MAX_PIDS_OUTPUT)
        if result.timed_out or result.exit_code != 0 or result.truncated:
            raise AgentInternalError(f"episode {what} failed (exit {result.exit_code}): {result.stderr[-300:]}",
                                     method="Exec")
        try:
            return dict(json.loads(result.stdout.strip().splitlines()[-1]))
        except (ValueError, IndexError) as exc:
            raise AgentInternalError(f"episode {what}: unreadable answer {result.stdout[-200:]!r}",
                                     method="Exec") from exc
