"""Run the guest agent as a host process on a local X display (Xvfb), for tests and benchmarks.

This is the development path of the agent: the same code that runs inside a
VM, started with a fresh token on an ephemeral loopback port. Readiness is the
agent's "listening" line on stdout, read with a deadline.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from weavegym.core.deadline import Deadline
from weavegym.core.errors import HostSetupError
from weavegym.guest_agent.auth import TlsIdentity, new_token
from weavegym.machine.agent_identity import new_agent_identity
from weavegym.machine.guest_client import ClientConfig, GuestClient


@dataclass(frozen=True)
class LocalAgentConfig:
    display: str
    port: int = 0  # 0: an ephemeral port; fixed ports let a restarted agent keep its address
    token: str = ""  # empty: a fresh random token
    start_timeout_s: float = 20.0
    python: str = sys.executable
    extra_args: tuple[str, ...] = ()
    tls: bool = False  # serve TLS with a fresh identity, as a VM's agent does; client() pins its certificate


class LocalAgent:
    def __init__(self, config: LocalAgentConfig) -> None:
        self.config = config
        self.token = config.token or new_token()
        self.port = config.port
        self.identity = new_agent_identity() if config.tls else None
        self._dir = tempfile.TemporaryDirectory(prefix="weavegym-agent-")
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def is_alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> LocalAgent:
        token_file = Path(self._dir.name) / "token"
        token_file.write_text(self.token)
        token_file.chmod(0o600)
        tls_args: list[str] = []
        if self.identity is not None:
            identity_file = Path(self._dir.name) / "identity.pem"
            identity_file.write_bytes(self.identity.bundle())
            identity_file.chmod(0o600)
            tls_args = ["--tls-file", str(identity_file)]
        log_path = Path(self._dir.name) / "agent.log"
        self._log = log_path.open("wb")
        self._proc = subprocess.Popen(
            [self.config.python, "-m", "weavegym.guest_agent", "--display", self.config.display,
             "--listen", f"127.0.0.1:{self.config.port}", "--token-file", str(token_file), *tls_args,
             *self.config.extra_args],
            stdout=subprocess.PIPE, stderr=self._log, start_new_session=True,
        )
        try:
            self.port = self._await_listening()
        except BaseException:
            self.stop()
            raise
        return self

    def _await_listening(self) -> int:
        assert self._proc is not None and self._proc.stdout is not None
        deadline = Deadline(self.config.start_timeout_s)
        fd = self._proc.stdout.fileno()
        buf = b""
        while b"\n" not in buf:
            ready, _, _ = select.select([fd], [], [], deadline.remaining())
            if not ready:
                raise HostSetupError(f"the agent did not start within {self.config.start_timeout_s}s; "
                                     f"log: {self.log_tail()}")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise HostSetupError(f"the agent exited during start-up; log: {self.log_tail()}")
            buf += chunk
        return int(json.loads(buf.split(b"\n", 1)[0])["port"])

    def log_tail(self, limit: int = 2000) -> str:
        path = Path(self._dir.name) / "agent.log"
        return path.read_text(errors="replace")[-limit:] if path.exists() else ""

    def rekey(self) -> tuple[str, TlsIdentity | None]:
        """Give the running agent's sources a new token (and identity), as a clone restored from a shared
        prepared state sees its own QEMU's fw_cfg; returns the old ones. The agent reads them live."""
        old = (self.token, self.identity)
        self.token = new_token()
        folder = Path(self._dir.name)
        (folder / "token.new").write_text(self.token)
        (folder / "token.new").replace(folder / "token")
        if self.identity is not None:
            self.identity = new_agent_identity()
            (folder / "identity.new").write_bytes(self.identity.bundle())
            (folder / "identity.new").replace(folder / "identity.pem")
        return old

    def client(self, config: ClientConfig | None = None) -> GuestClient:
        return GuestClient(self.target, self.token, config,
                           tls_cert=self.identity.cert_pem if self.identity is not None else None)

    def kill(self) -> None:
        """SIGKILL, as a crash would; for robustness tests."""
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(timeout=10)

    def stop(self) -> None:
        """Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
            if proc.stdout:
                proc.stdout.close()
        if getattr(self, "_log", None):
            self._log.close()

    def __enter__(self) -> LocalAgent:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._dir.cleanup()
