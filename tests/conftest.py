"""Shared fixtures (a real Xvfb display and a real guest agent serving it) and the test tiers.

Every test gets exactly one tier marker, so a tier can run alone (``pytest -m unit``):

- ``unit``: pure Python, no display, no VM (``make test-unit``, under two minutes);
- ``xvfb``: a host Xvfb and the real guest agent as a local process (any test that uses the
  ``xvfb``/``agent``/``client`` fixtures, or whose module says ``pytestmark = pytest.mark.xvfb``);
- ``vm``: boots VMs under libvirt (modules say ``pytestmark = pytest.mark.vm``);
- ``full_image``: needs the ``full`` image (``make test-full``), a kind of ``vm``;
- ``heavy``: a long multi-VM scenario on the base image (``make test-heavy``), a kind of ``vm`` that
  ``make test`` leaves out to stay well inside CI's time (Ray's killed actor, a killed and resumed run).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from weavegym.core.deadline import wait_for
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.local_agent import LocalAgent, LocalAgentConfig
from weavegym.testing.xvfb import XvfbDisplay

_XVFB_FIXTURES = frozenset({"xvfb", "agent", "client"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("full_image") or item.get_closest_marker("heavy"):
            item.add_marker(pytest.mark.vm)
        elif item.get_closest_marker("vm") or item.get_closest_marker("xvfb"):
            continue
        elif _XVFB_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xvfb)
        else:
            item.add_marker(pytest.mark.unit)


@pytest.fixture(scope="module")
def xvfb() -> Iterator[XvfbDisplay]:
    if shutil.which("Xvfb") is None:
        pytest.fail("Xvfb is missing: run the tests through `make test`, which installs it")
    with XvfbDisplay() as display:
        yield display


@pytest.fixture(scope="module")
def agent(xvfb: XvfbDisplay) -> Iterator[LocalAgent]:
    with LocalAgent(LocalAgentConfig(display=xvfb.display)) as running:
        yield running


@pytest.fixture()
def client(agent: LocalAgent) -> Iterator[GuestClient]:
    with agent.client() as c:
        c.wait_ready(20)
        yield c


def _unused_uid(low: int = 61000, high: int = 64999) -> int:
    """A uid no account has and no process runs as, zombies included.

    A killed fork bomb's children are reparented to PID 1, and on hosts whose PID 1 does not reap, their
    zombies stay and keep counting against RLIMIT_NPROC for that uid: a reused uid would inherit them.
    """
    in_use = {entry.pw_uid for entry in pwd.getpwall()}
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            uid_line = next(line for line in status.read_text().splitlines() if line.startswith("Uid:"))
        except (OSError, StopIteration):
            continue  # the process ended while we looked
        in_use.add(int(uid_line.split()[1]))
    free = next((uid for uid in range(low, high + 1) if uid not in in_use), None)
    if free is None:
        pytest.fail(f"no free uid in {low}..{high} for a throwaway account")
    return free


@pytest.fixture()
def throwaway_account() -> Iterator[str]:
    """A system account made for one test and removed after it, with every process it left killed.

    Per-user limits (RLIMIT_NPROC) count every process of the uid on the host, zombies included, so a
    test that caps an account must own that account instead of borrowing a shared one like ``nobody``.
    """
    if os.getuid() != 0:
        pytest.skip("creating an account needs root")
    name = f"wgtest{os.getpid()}"

    def created() -> bool:  # another test worker may take the same free uid first: useradd then exits 4
        made = subprocess.run(["useradd", "--system", "--uid", str(_unused_uid()), "--no-create-home", "--home-dir",
                               "/nonexistent", "--shell", "/usr/sbin/nologin", name], capture_output=True, text=True)
        if made.returncode not in (0, 4):
            pytest.fail(f"useradd {name} exited {made.returncode}: {made.stderr.strip()}")
        return made.returncode == 0

    wait_for(created, 30, what=f"a free uid for the test account {name}")
    try:
        yield name
    finally:
        def removed() -> bool:  # userdel refuses (exit 8) while a process of the account is still exiting
            subprocess.run(["pkill", "-KILL", "-u", name], check=False)
            return subprocess.run(["userdel", name], check=False, capture_output=True).returncode in (0, 6)

        wait_for(removed, 30, what=f"the test account {name} to be removed")
