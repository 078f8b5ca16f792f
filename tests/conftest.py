"""Shared fixtures: a real Xvfb display and a real guest agent process serving it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from weavegym.machine.guest_client import GuestClient
from weavegym.testing.local_agent import LocalAgent, LocalAgentConfig
from weavegym.testing.xvfb import XvfbDisplay


def pytest_configure(config: pytest.Config) -> None:
    if shutil.which("Xvfb") is None:
        raise pytest.UsageError("Xvfb is missing: run the tests through `make test`, which installs it")


@pytest.fixture(scope="module")
def xvfb() -> Iterator[XvfbDisplay]:
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
