"""Shared fixtures (a real Xvfb display and a real guest agent serving it) and the test tiers.

Every test gets exactly one tier marker, so a tier can run alone (``pytest -m unit``):

- ``unit``: pure Python, no display, no VM (``make test-unit``, under two minutes);
- ``xvfb``: a host Xvfb and the real guest agent as a local process (any test that uses the
  ``xvfb``/``agent``/``client`` fixtures, or whose module says ``pytestmark = pytest.mark.xvfb``);
- ``vm``: boots VMs under libvirt (modules say ``pytestmark = pytest.mark.vm``);
- ``full_image``: needs the ``full`` image (``make test-full``), a kind of ``vm``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from weavegym.machine.guest_client import GuestClient
from weavegym.testing.local_agent import LocalAgent, LocalAgentConfig
from weavegym.testing.xvfb import XvfbDisplay

_XVFB_FIXTURES = frozenset({"xvfb", "agent", "client"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("full_image"):
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
