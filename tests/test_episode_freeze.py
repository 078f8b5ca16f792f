"""The evaluation's freeze, through the real agent on the host (xvfb tier), on a throwaway account's processes:
every one is stopped (a job that forks on, one that made itself undumpable), only those are continued, and one
the episode had stopped itself stays stopped. The VM end (a whole episode scored frozen) is in
test_channel_crossings.py."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from weavegym.core.deadline import wait_for
from weavegym.evaluators.episode_freeze import EpisodeFreeze
from weavegym.machine.guest_client import GuestClient

pytestmark = pytest.mark.xvfb

# Forks a short-lived child every few milliseconds, for ever: a freeze must catch the children too.
FORKER = "while :; do sleep 0.01 & wait; done"
UNDUMPABLE = "import ctypes, time; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); time.sleep(600)"  # PR_SET_DUMPABLE 0


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"  # gone: a child of the forker that ended between the listing and the read


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # the forker's children come and go
        return b""


def _pids(account: str) -> list[int]:
    out = subprocess.run(["pgrep", "-u", account], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


@pytest.fixture()
def processes(throwaway_account: str) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    def start(*argv: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(["runuser", "-u", throwaway_account, "--", *argv], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)

    procs = {"forker": start("sh", "-c", FORKER), "undumpable": start("python3", "-c", UNDUMPABLE),
             "parked": start("sleep", "600")}
    try:
        wait_for(lambda: len(_pids(throwaway_account)) >= 3, 20, what="the account's processes")
        yield procs
    finally:
        subprocess.run(["pkill", "-KILL", "-u", throwaway_account], check=False)
        for proc in procs.values():
            proc.kill()
            proc.wait()


def test_every_process_of_the_accounts_stops_and_only_those_go_on(client: GuestClient, throwaway_account: str,
                                                                  processes: dict) -> None:
    parked = [p for p in _pids(throwaway_account) if _cmdline(p) == b"sleep\x00600\x00"]
    assert len(parked) == 1
    for pid in parked:
        subprocess.run(["kill", "-STOP", str(pid)], check=True)  # the episode stopped this one itself
    freezer = EpisodeFreeze(client, [throwaway_account, "no-such-account-here"])
    result = freezer.freeze()
    assert result.ok and result.stopped, result
    pids = _pids(throwaway_account)
    assert pids and all(_state(p) in "TZX" for p in pids), {p: _state(p) for p in pids}  # X: gone meanwhile
    assert not set(parked) & set(result.stopped)  # already stopped: not the freeze's to continue
    freezer.thaw()
    wait_for(lambda: all(_state(p) not in "T" for p in _pids(throwaway_account) if p not in parked), 20,
             what="the frozen processes to go on")
    assert all(_state(p) == "T" for p in parked)
    freezer.thaw()  # twice is harmless
    for pid in parked:
        subprocess.run(["kill", "-CONT", str(pid)], check=False)


def test_a_freeze_that_cannot_finish_says_so(client: GuestClient, throwaway_account: str, processes: dict) -> None:
    # A deadline of zero: the first round finds running processes and there is no time for a second.
    result = EpisodeFreeze(client, [throwaway_account], deadline_s=0.0).freeze()
    assert not result.ok and result.still_running
    assert all(_state(p) not in "T" for p in result.still_running if Path(f"/proc/{p}").exists())
