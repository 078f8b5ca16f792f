"""The episode's commands in a capped cgroup of their own, with a real agent and a real cgroup on this host.

In the guest the group is weavegym-episode.service's (cgroup v2, see test_libvirt_vm.py); here it is a
group made for the test in the host's pids hierarchy. Either way the agent moves each command of a
--no-display-for account into it before the command runs, so a fork bomb hits the group's pids.max and
the agent keeps serving.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from weavegym.core.deadline import wait_for
from weavegym.testing.local_agent import LocalAgent, LocalAgentConfig
from weavegym.testing.xvfb import XvfbDisplay

PIDS_HIERARCHY = Path("/sys/fs/cgroup/pids")  # cgroup v1 on these hosts; a guest has v2 (same files used)
CAP = 40


def _members(group: Path) -> list[int]:
    return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]


@pytest.fixture()
def group() -> Iterator[Path]:
    if not os.access(PIDS_HIERARCHY, os.W_OK):
        pytest.fail(f"{PIDS_HIERARCHY} is not writable: these tests need root and the pids cgroup controller")
    path = PIDS_HIERARCHY / f"weavegym-test-{os.getpid()}"
    path.mkdir()
    (path / "pids.max").write_text(f"{CAP}\n")
    try:
        yield path
    finally:
        def emptied() -> bool:
            for pid in _members(path):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            return not _members(path)

        wait_for(emptied, 30, what="the test cgroup to empty")
        path.rmdir()


def test_a_capped_accounts_commands_run_in_the_group_and_a_fork_bomb_stops_there(
        xvfb: XvfbDisplay, group: Path, throwaway_account: str) -> None:
    account = throwaway_account  # an account of its own: per-user process counts are host-wide
    args = ("--no-display-for", account, "--episode-cgroup", str(group))
    with LocalAgent(LocalAgentConfig(display=xvfb.display, extra_args=args)) as agent, agent.client() as client:
        client.wait_ready(20)
        where = client.exec("cat /proc/self/cgroup; id -un", user=account, cwd="/tmp", timeout=20).stdout
        assert f"pids:/{group.name}" in where and where.split()[-1] == account, where
        assert f"pids:/{group.name}" not in client.exec("cat /proc/self/cgroup", timeout=20).stdout  # root's: not
        bomb = ("python3 -c 'import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass'"
                " &> /dev/null & sleep 3; echo started")
        assert client.exec(bomb, user=account, cwd="/tmp", timeout=20).stdout.strip() == "started"
        assert int((group / "pids.events").read_text().split()[-1]) > 0  # the cap was reached
        # The agent, outside the group, still starts commands while the bomb's leftovers hold the cap.
        assert client.exec("echo served", timeout=20).stdout.strip() == "served"
        assert len(_members(group)) <= CAP
