"""A ``Backend`` on this host: a private Xvfb display and the guest agent as a local process.

It lets ``WeaveEnv`` run whole episodes (parse, execute, settle, record, evaluate) in seconds without an
image or libvirt, which is what the fast test tier needs. It is not a sandbox: both channels run as the
host's own account (no provenance), there are no snapshots (every reset re-runs the task's setup), and a
task's setup must only use what this host has. Inject it: ``WeaveEnv(task, backend=LocalBackend())``.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from typing import Any

import numpy as np

from weavegym.core.errors import BackendError
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.local_agent import LocalAgent, LocalAgentConfig
from weavegym.testing.xvfb import XvfbConfig, XvfbDisplay


class LocalBackend:
    supports_snapshots = False  # the env re-runs the task's setup on every reset
    shares_snapshots = False
    separate_accounts = False  # one account for both channels: provenance cannot be told apart here
    vnc: Any = None

    def __init__(self, screen: tuple[int, int] = (640, 480), ready_timeout_s: float = 20.0) -> None:
        self.screen = screen
        self.ready_timeout_s = ready_timeout_s
        self.client: GuestClient | None = None
        self.timings: dict[str, float] = {}
        self.workspace_user = getpass.getuser()
        self.display: XvfbDisplay | None = None
        self.agent: LocalAgent | None = None

    def start(self) -> LocalBackend:
        width, height = self.screen
        try:
            self.display = XvfbDisplay(XvfbConfig(width=width, height=height)).start()
            self.agent = LocalAgent(LocalAgentConfig(display=self.display.display)).start()
            self.client = self.agent.client()
            self.client.wait_ready(self.ready_timeout_s)
        except BaseException:
            self.close()
            raise
        return self

    def reset(self, snapshot: str) -> float:
        """Nothing to restore; the env runs the task's setup again, which must make its own clean state.

        A killed agent or display is started afresh here, as the libvirt backend recovers a dead VM on reset.
        """
        if self.is_running():
            return 0.0
        self.close()
        self.start()
        self.timings["recoveries"] = self.timings.get("recoveries", 0.0) + 1
        return 0.0

    def save_snapshot(self, name: str) -> float:
        raise BackendError("the local backend has no snapshots")

    def delete_snapshot(self, name: str) -> None:
        raise BackendError("the local backend has no snapshots")

    def find_snapshot(self, name: str) -> bytes | None:
        return None

    def make_snapshot(self, name: str, base: str, setup: Callable[[], bytes]) -> bytes:
        raise BackendError("the local backend has no snapshots")

    def grab_frame(self) -> np.ndarray:
        if self.client is None:
            raise BackendError("the local backend is not started")
        return self.client.screenshot().image

    def is_running(self) -> bool:
        return self.agent is not None and self.agent.is_alive() and self.display is not None and self.display.is_alive()

    def close(self) -> None:
        """Idempotent."""
        client, agent, display = self.client, self.agent, self.display
        self.client = self.agent = self.display = None
        if client is not None:
            client.close()
        if agent is not None:
            agent.stop()
        if display is not None:
            display.stop()
