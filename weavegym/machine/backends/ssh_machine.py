"""The ``ssh`` backend: attach to an existing Debian or Ubuntu desktop machine over SSH (paramiko).

``start()`` logs in, installs or updates the guest agent there (wheels built on
this host and uploaded, so the machine needs no network), starts it on the
machine's 127.0.0.1 and tunnels its port back over the same SSH connection.

**There are no snapshots.** ``reset()`` cannot put the machine back the way it
was. What it does instead: it stops the programs the previous task setup
launched on the desktop and empties the task's private directory; the env then
runs the task's setup again on the live machine. Files and processes the agent
created stay unless the setup overwrites them, so use this backend for tasks
whose setup rewrites everything it depends on, and expect less isolation than
with VMs.

The machine needs: sshd, python3 (the version the uploaded wheels are fetched for), an X display (``:0``)
with the desktop user ``user`` logged in (as weavegym images have), and root
(log in as root, or allow the user passwordless sudo): setups write root-only
answer files and run programs as the desktop user.
"""

from __future__ import annotations

import secrets
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from weavegym.core.errors import AgentError, BackendError, HostSetupError, SnapshotError
from weavegym.core.guest_layout import DESKTOP_USER, LAUNCH_MARKER, PRIVATE_DIR
from weavegym.core.paths import default_cache_dir
from weavegym.machine.backends.ssh_link import SshLink, SshTarget
from weavegym.machine.guest_client import ClientConfig, GuestClient

INSTALL_DIR = "/opt/weavegym-ssh-agent"
RUN_DIR = "/run/weavegym-ssh-agent"


@dataclass(frozen=True)
class SshConfig:
    host: str = ""
    user: str = "root"
    port: int = 22
    key_file: Path | None = None
    connect_timeout_s: float = 15.0
    host_keys: str = "known"  # "known" | "accept-new" | "any": see SshTarget
    known_hosts: Path | None = None  # None: ~/.ssh/known_hosts
    display: str = ":0"
    xauthority: str = ""  # XAUTHORITY for the agent, if the display needs one
    agent_port: int = 7611  # on the machine's 127.0.0.1; weavegym images already run their own agent on 7600
    # The account shell/python actions run as. Empty: the desktop account, i.e. no channel split, since a
    # machine not built from weavegym's image has no workspace account without X access (README).
    workspace_user: str = ""
    ready_timeout_s: float = 60.0
    screen: tuple[int, int] = (1280, 720)
    profile: str = "base"  # documentation only: the machine has whatever apps it has
    cache_dir: Path = field(default_factory=default_cache_dir)

    @property
    def target(self) -> SshTarget:
        if not self.host:
            raise ValueError("the ssh backend needs backend_options={'host': ..., 'user': ..., 'key_file': ...}")
        key = Path(self.key_file).expanduser() if self.key_file else None
        known = Path(self.known_hosts).expanduser() if self.known_hosts else None
        return SshTarget(self.host, self.user, self.port, key, self.connect_timeout_s, self.host_keys, known)


class SshMachine:
    supports_snapshots = False
    shares_snapshots = False

    @property
    def workspace_user(self) -> str:
        return self.config.workspace_user or DESKTOP_USER

    @property
    def separate_accounts(self) -> bool:
        return self.workspace_user != DESKTOP_USER

    def __init__(self, config: SshConfig) -> None:
        self.config = config
        self.target = config.target  # validates the host early, before any connection
        self.token = secrets.token_hex(24)
        self.client: GuestClient | None = None
        self.timings: dict[str, float] = {}
        self._link: SshLink | None = None
        self._sudo = ""

    # -- Backend ---------------------------------------------------------------------------------
    @property
    def vnc(self) -> None:
        """No VNC: the machine's own remote desktop, if any, is outside weavegym."""
        return None

    def start(self) -> SshMachine:
        t0 = time.monotonic()
        try:
            self._link = SshLink(self.target).connect()
            self._sudo = self._root_prefix()
            self._install_agent()
            self._start_agent()
        except BaseException:
            self.close()
            raise
        self.timings["cold_boot_s"] = time.monotonic() - t0
        return self

    def reset(self, snapshot: str) -> float:
        """No snapshot to load: stop the last setup's desktop programs and clear the task's private dir."""
        start = time.monotonic()
        self._link_or_raise().check(
            f"{self._sudo}sh -c {shlex.quote(_STOP_LAUNCHED + f'; rm -rf {PRIVATE_DIR}')}",
            "stopping the previous task's programs", timeout=30)
        assert self.client is not None
        self.client.wait_ready(self.config.ready_timeout_s)
        return time.monotonic() - start

    def save_snapshot(self, name: str) -> float:
        raise SnapshotError("the ssh backend cannot save snapshots (it attaches to a live machine)")

    def delete_snapshot(self, name: str) -> None:
        raise SnapshotError("the ssh backend has no snapshots to delete")

    def find_snapshot(self, name: str) -> bytes | None:
        return None

    def make_snapshot(self, name: str, base: str, setup: Callable[[], bytes]) -> bytes:
        raise SnapshotError("the ssh backend cannot save snapshots (it attaches to a live machine)")

    def grab_frame(self) -> np.ndarray:
        assert self.client is not None
        return self.client.screenshot().image

    def is_running(self) -> bool:
        if self._link is None or not self._link.is_active() or self.client is None:
            return False
        try:
            self.client.wait_ready(5.0)
        except AgentError:
            return False
        return True

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._link is not None:
            if self._link.is_active():
                self._link.run(f"{self._sudo}sh -c {shlex.quote(_stop_agent(self.config.agent_port))}", timeout=15)
            self._link.close()
            self._link = None

    # -- steps -----------------------------------------------------------------------------------
    def _link_or_raise(self) -> SshLink:
        if self._link is None or not self._link.is_active():
            raise BackendError(f"ssh {self.target}: the connection is gone; make a new env")
        return self._link

    def _root_prefix(self) -> str:
        link = self._link_or_raise()
        if link.run("id -u", timeout=15).stdout.strip() == "0":
            return ""
        if link.run("sudo -n true", timeout=15).ok:
            return "sudo -n "
        raise HostSetupError(f"ssh {self.target}: the ssh backend needs root on the machine (task setups write "
                             f"root-only files): log in as root, or allow {self.target.user} passwordless sudo")

    def _install_agent(self) -> None:
        """Install the agent unless the same version is already there (``VERSION`` holds its digest)."""
        from weavegym.vm_images.builder import build_agent_wheels
        from weavegym.vm_images.recipe import agent_version

        link, version = self._link_or_raise(), agent_version()
        installed = link.run(f"cat {INSTALL_DIR}/VERSION 2>/dev/null", timeout=15).stdout.strip()
        if installed == version:
            return
        t0 = time.monotonic()
        python = link.check("python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'",
                            "finding python3 (the agent needs it)", timeout=15).strip()
        wheels = self.config.cache_dir / "agent-wheels" / f"py{python}-{version}"
        if not (wheels / ".complete").is_file():
            build_agent_wheels(python, wheels)
            (wheels / ".complete").touch()
        # A fresh private folder: a fixed /tmp name could be made first by any account there, with wheels
        # of its own in it, which root would then unpack and run.
        staging = link.check("mktemp -d /tmp/weavegym-agent-wheels-XXXXXXXXXX", "making a staging folder",
                             timeout=15).strip()
        link.upload_dir(wheels, staging)
        # Wheels are zip files of ready-to-import trees (grpcio's is prebuilt): unpacking them is the whole
        # install. No pip and no venv module needed there, and seconds instead of minutes under emulation.
        unpack = ("import glob, sys, zipfile; "
                  "[zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sorted(glob.glob(sys.argv[2] + '/*.whl'))]")
        script = (f"set -e; rm -rf {INSTALL_DIR}; mkdir -p {INSTALL_DIR}; "
                  f"python3 -c {shlex.quote(unpack)} {INSTALL_DIR}/lib {staging}; "
                  f"PYTHONPATH={INSTALL_DIR}/lib python3 -c 'import weavegym.guest_agent.server'; "
                  f"echo {version} > {INSTALL_DIR}/VERSION; rm -rf {staging}")
        link.check(f"{self._sudo}sh -c {shlex.quote(script)}", "installing the guest agent", timeout=300)
        self.timings["agent_install_s"] = time.monotonic() - t0

    def _start_agent(self) -> None:
        link, port = self._link_or_raise(), self.config.agent_port
        env = f"XAUTHORITY={shlex.quote(self.config.xauthority)} " if self.config.xauthority else ""
        workspace = self.config.workspace_user
        no_display = f"--no-display-for {shlex.quote(workspace)} " if workspace else ""
        # A separate command: the start script's own command line would match the pkill pattern.
        link.run(f"{self._sudo}sh -c {shlex.quote(_stop_agent(port))}", timeout=15)
        script = (f"mkdir -p {RUN_DIR}; chmod 700 {RUN_DIR}; umask 077; "
                  f"cat > {RUN_DIR}/token; "
                  f"{env}PYTHONPATH={INSTALL_DIR}/lib setsid -f python3 -m weavegym.guest_agent "
                  f"--display {shlex.quote(self.config.display)} --listen 127.0.0.1:{port} "
                  f"--token-file {RUN_DIR}/token --python /usr/bin/python3 {no_display}"
                  f"> {RUN_DIR}/agent-{port}.log 2>&1 < /dev/null")
        result = link.run(f"{self._sudo}sh -c {shlex.quote(script)}", stdin=self.token.encode(), timeout=30)
        if not result.ok:
            raise BackendError(f"ssh {self.target}: could not start the agent (exit {result.exit_code}): "
                               f"{result.stderr.strip()[-400:]}")
        # Wait there until the agent listens, so the tunnel's first connections are not refused.
        listening = link.run(f"python3 -c {shlex.quote(_WAIT_LISTENING)} {port} {self.config.ready_timeout_s}",
                             timeout=self.config.ready_timeout_s + 15)
        if not listening.ok:
            log = link.run(f"{self._sudo}tail -n 20 {RUN_DIR}/agent-{port}.log", timeout=15).stdout
            raise BackendError(f"ssh {self.target}: the agent did not start listening on 127.0.0.1:{port} within "
                               f"{self.config.ready_timeout_s:.0f} s; its log:\n{log}")
        local_port = link.forward("127.0.0.1", port)
        self.client = GuestClient(f"127.0.0.1:{local_port}", self.token, ClientConfig())
        try:
            self.client.wait_ready(self.config.ready_timeout_s)
        except AgentError as exc:
            log = link.run(f"{self._sudo}tail -n 20 {RUN_DIR}/agent-{port}.log", timeout=15).stdout
            raise BackendError(f"ssh {self.target}: the agent did not answer through the tunnel: {exc}; "
                               f"its log:\n{log}") from None


def _stop_agent(port: int) -> str:
    # The bracket keeps the pattern from matching the very shell that runs this pkill.
    return f"pkill -f 'guest_agent .*[-]-listen 127.0.0.1:{port}' 2>/dev/null; true"


# argv: port, timeout. Exits 0 once something accepts on 127.0.0.1:port.
_WAIT_LISTENING = """import socket, sys, time
port, deadline = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", port)) == 0:
            sys.exit(0)
    time.sleep(0.1)
sys.exit(1)"""

# Processes started by SetupContext.launch_gui carry LAUNCH_MARKER in their environment.
_STOP_LAUNCHED = (f"for e in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $e 2>/dev/null | grep -qx '{LAUNCH_MARKER}' "
                  "&& p=${e#/proc/} && kill -9 ${p%/environ} 2>/dev/null; done; true")
