"""gRPC to the real agent through the byte relay that carries vsock transports.

vsock itself cannot be exercised on these machines (no /dev/vhost-vsock, and this kernel offers no
vsock loopback), so the relay is tested with TCP on both legs: the relay code is family-agnostic and
the vsock legs differ only in the socket constructor.
"""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path

import pytest

from weavegym.core.errors import AgentUnavailableError
from weavegym.guest_agent.relay import Relay, tcp_connector, tcp_listener
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.local_agent import LocalAgent


def test_grpc_through_the_relay(agent: LocalAgent, tmp_path: Path) -> None:
    relay = Relay(tcp_listener(), tcp_connector("127.0.0.1", agent.port)).start()
    port = relay.listener.getsockname()[1]
    client = GuestClient(f"127.0.0.1:{port}", agent.token)
    try:
        assert client.exec("echo through-relay").stdout == "through-relay\n"
        assert client.screenshot().image.shape == (720, 1280, 3)  # a 2.7 MB message
        payload = os.urandom(8 << 20)
        remote = str(tmp_path / "relayed.bin")
        client.upload(payload, remote)
        assert hashlib.sha256(client.download(remote)).digest() == hashlib.sha256(payload).digest()
        streamed = client.exec("for i in 1 2 3; do echo $i; done; exit 4")
        assert (streamed.stdout, streamed.exit_code) == ("1\n2\n3\n", 4)
    finally:
        client.close()
        relay.stop()
    with GuestClient(f"127.0.0.1:{port}", agent.token) as after, pytest.raises(AgentUnavailableError):
        after.health(timeout=3)


def test_relay_survives_an_unreachable_upstream() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]  # closed again when the block ends: nothing listens there
    relay = Relay(tcp_listener(), tcp_connector("127.0.0.1", dead_port, timeout=2)).start()
    port = relay.listener.getsockname()[1]
    try:
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
                conn.settimeout(5)
                assert conn.recv(1) == b""  # the relay closes the client when it cannot reach upstream
    finally:
        relay.stop()
