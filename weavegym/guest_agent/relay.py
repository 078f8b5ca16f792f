"""A byte relay between two socket families, for running the agent's gRPC over vsock.

The grpcio wheels we pin are built without vsock support ("VSOCK is not
supported" when binding ``vsock:…``), so gRPC always speaks TCP and vsock is
carried by a relay at each end:

- in the guest, ``--vsock-port`` relays AF_VSOCK connections to the agent's TCP port;
- on the host, the backend relays 127.0.0.1 connections to the guest's (CID, port).

Lives in the guest package because the guest may not import host code, while
the host may import this.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
from collections.abc import Callable

log = logging.getLogger("weavegym.guest_agent.relay")
CHUNK = 256 * 1024


def _pump(a: socket.socket, b: socket.socket) -> None:
    """Copy both directions until either side closes; half-closes are propagated."""
    sel = selectors.DefaultSelector()
    sel.register(a, selectors.EVENT_READ, b)
    sel.register(b, selectors.EVENT_READ, a)
    open_sides = 2
    try:
        while open_sides:
            for key, _ in sel.select():
                src, dst = key.fileobj, key.data
                try:
                    data = src.recv(CHUNK)  # type: ignore[union-attr]
                except OSError:
                    data = b""
                if data:
                    dst.sendall(data)
                    continue
                sel.unregister(src)
                open_sides -= 1
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
    except OSError as exc:
        log.debug("relay connection ended: %s", exc)
    finally:
        sel.close()
        a.close()
        b.close()


class Relay:
    """Accept on ``listener``; for each connection, open ``connect()`` and pump bytes both ways."""

    def __init__(self, listener: socket.socket, connect: Callable[[], socket.socket], name: str = "relay") -> None:
        self.listener = listener
        self._connect = connect
        self._stopped = threading.Event()
        self._active: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)

    def start(self) -> Relay:
        self._thread.start()
        return self

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                if self._stopped.is_set():
                    return
                continue
            try:
                upstream = self._connect()
            except OSError as exc:
                log.warning("relay could not reach its upstream: %s", exc)
                client.close()
                continue
            with self._lock:
                self._active.update((client, upstream))
            threading.Thread(target=self._pump_and_forget, args=(client, upstream), daemon=True).start()

    def _pump_and_forget(self, client: socket.socket, upstream: socket.socket) -> None:
        try:
            _pump(client, upstream)
        finally:
            with self._lock:
                self._active.difference_update((client, upstream))

    def stop(self) -> None:
        """Stop accepting and cut live connections too: their far end (e.g. a VM) is going away."""
        self._stopped.set()
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        with self._lock:
            active, self._active = list(self._active), set()
        for sock in active:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def tcp_listener(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(64)
    return sock


def vsock_listener(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    sock.bind((socket.VMADDR_CID_ANY, port))
    sock.listen(64)
    return sock


def tcp_connector(host: str, port: int, timeout: float = 10.0) -> Callable[[], socket.socket]:
    def connect() -> socket.socket:
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.settimeout(None)
        return sock

    return connect


def vsock_connector(cid: int, port: int, timeout: float = 10.0) -> Callable[[], socket.socket]:
    def connect() -> socket.socket:
        sock = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.connect((cid, port))
        sock.settimeout(None)
        return sock

    return connect
