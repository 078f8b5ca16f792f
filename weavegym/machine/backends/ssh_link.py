"""One SSH connection (paramiko): remote commands, file uploads and local port forwards.

Shared by the ``ssh`` backend (an existing desktop machine) and remote libvirt
(``qemu+ssh://``), which both need the same three things from a far host. Every
failure to reach or log in to the host becomes a ``HostSetupError`` that names
the host and says what to check, within ``connect_timeout_s``.
"""

from __future__ import annotations

import contextlib
import shlex
import socket
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from weavegym.core.errors import BackendError, HostSetupError
from weavegym.core.extras import missing_extra
from weavegym.guest_agent.relay import Relay, tcp_listener

try:
    import paramiko
except ModuleNotFoundError as _missing:  # an optional extra (core/extras.py)
    raise missing_extra(_missing) from None

HOST_KEY_POLICIES = ("known", "accept-new", "any")


class _RecordNewHostKey(paramiko.MissingHostKeyPolicy):
    """accept-new: trust a host seen for the first time and write its key to known_hosts for next time."""

    def __init__(self, known_hosts: Path) -> None:
        self.known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        self.known_hosts.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with self.known_hosts.open("a") as out:  # hostname is "[host]:port" off port 22, as OpenSSH writes it
            out.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)


@dataclass(frozen=True)
class SshTarget:
    host: str
    user: str = "root"
    port: int = 22
    key_file: Path | None = None  # None: the ssh-agent and ~/.ssh/id_* keys
    connect_timeout_s: float = 15.0
    # How the host's key is checked (as OpenSSH's StrictHostKeyChecking): "known" – it must already be in
    # known_hosts; "accept-new" – a host seen for the first time is recorded there, a changed key is still
    # refused; "any" – no check at all (what libvirt's no_verify=1 asks for; an explicit opt-in).
    host_keys: str = "known"
    known_hosts: Path | None = None  # None: ~/.ssh/known_hosts (and the system's, read only)

    def __post_init__(self) -> None:
        if self.host_keys not in HOST_KEY_POLICIES:
            raise ValueError(f"host_keys must be one of {HOST_KEY_POLICIES}, not {self.host_keys!r}")

    def __str__(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


@dataclass(frozen=True)
class RemoteResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class SshLink:
    def __init__(self, target: SshTarget) -> None:
        self.target = target
        self._client: paramiko.SSHClient | None = None
        self._forwards: list[Relay] = []
        self._lock = threading.Lock()

    def connect(self) -> SshLink:
        t = self.target
        pkey = None
        if t.key_file is not None:
            if not Path(t.key_file).is_file():
                raise HostSetupError(f"ssh {t}: key file {t.key_file} does not exist")
            try:
                pkey = paramiko.PKey.from_path(str(t.key_file))  # RSA, ECDSA or Ed25519, PEM or OpenSSH format
            except (paramiko.SSHException, OSError, ValueError) as exc:
                raise HostSetupError(f"ssh {t}: cannot read the private key {t.key_file}: {exc}") from None
        client = paramiko.SSHClient()
        known_hosts = Path(t.known_hosts or Path.home() / ".ssh" / "known_hosts").expanduser()
        if t.host_keys == "any":  # nothing loaded: a recorded key that differs is not checked either
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        else:
            if t.known_hosts is None:
                client.load_system_host_keys()
            elif known_hosts.is_file():
                client.load_host_keys(str(known_hosts))
            policy = _RecordNewHostKey(known_hosts) if t.host_keys == "accept-new" else paramiko.RejectPolicy()
            client.set_missing_host_key_policy(policy)
        timeout = t.connect_timeout_s
        try:
            client.connect(t.host, port=t.port, username=t.user,
                           pkey=pkey, look_for_keys=pkey is None, allow_agent=pkey is None,
                           timeout=timeout, banner_timeout=timeout, auth_timeout=timeout, channel_timeout=timeout)
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostSetupError(f"ssh {t}: host key mismatch ({exc}); the machine was replaced or this is not "
                                 f"the host you think; check it, then fix {known_hosts}") from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise HostSetupError(f"ssh {t}: the host rejected the login ({exc}); check the user and that "
                                 f"{t.key_file or 'your key'}'s public half is in ~{t.user}/.ssh/authorized_keys"
                                 ) from None
        except paramiko.SSHException as exc:
            client.close()
            if "not found in known_hosts" not in str(exc):
                raise HostSetupError(f"ssh {t}: cannot connect ({exc}); check the host name, the port and that "
                                     "sshd runs there") from None
            raise HostSetupError(f"ssh {t}: the host's key is not in {known_hosts}. Check its fingerprint and add "
                                 f"it (ssh-keyscan -p {t.port} {t.host} >> {known_hosts}), or opt in with "
                                 "host_keys='accept-new'") from None
        except TimeoutError as exc:
            client.close()
            raise HostSetupError(f"ssh {t}: no answer within {timeout:.0f} s ({exc or 'timed out'}); check the "
                                 "host name, the port and any firewall") from None
        except OSError as exc:
            client.close()
            raise HostSetupError(f"ssh {t}: cannot connect ({exc}); check the host name, the port and that "
                                 "sshd runs there") from None
        transport = client.get_transport()
        assert transport is not None
        transport.set_keepalive(15)
        self._client = client
        return self

    @property
    def client(self) -> paramiko.SSHClient:
        if self._client is None:
            raise BackendError(f"ssh {self.target}: not connected")
        return self._client

    def is_active(self) -> bool:
        transport = self._client.get_transport() if self._client is not None else None
        return bool(transport and transport.is_active())

    def run(self, command: str, *, timeout: float = 120.0, stdin: bytes = b"") -> RemoteResult:
        """Run ``command`` through the remote user's shell; raises BackendError on a timeout or a lost link."""
        try:
            chan_in, chan_out, chan_err = self.client.exec_command(command, timeout=timeout)
            if stdin:
                chan_in.write(stdin)
            chan_in.channel.shutdown_write()
            out = chan_out.read().decode(errors="replace")
            err = chan_err.read().decode(errors="replace")
            code = chan_out.channel.recv_exit_status()
        except TimeoutError:
            raise BackendError(f"ssh {self.target}: {command[:80]!r} did not finish within {timeout:.0f} s") from None
        except (OSError, paramiko.SSHException) as exc:
            raise BackendError(f"ssh {self.target}: lost the connection running {command[:80]!r}: {exc}") from None
        return RemoteResult(code, out, err)

    def check(self, command: str, what: str, *, timeout: float = 120.0) -> str:
        result = self.run(command, timeout=timeout)
        if not result.ok:
            raise BackendError(f"ssh {self.target}: {what} failed (exit {result.exit_code}): "
                               f"{(result.stderr or result.stdout).strip()[-600:]}")
        return result.stdout

    def upload_dir(self, local: Path, remote: str) -> None:
        """Copy the files of ``local`` (flat) into ``remote``, creating it."""
        self.check(f"mkdir -p {shlex.quote(remote)}", f"creating {remote}")
        with self.client.open_sftp() as sftp:
            for path in sorted(local.iterdir()):
                if path.is_file() and not path.name.startswith("."):
                    sftp.put(str(path), f"{remote}/{path.name}")

    def upload_file(self, local: Path, remote: str, callback: object = None) -> None:
        with self.client.open_sftp() as sftp:
            sftp.put(str(local), remote, callback=callback)  # type: ignore[arg-type]

    def remote_is_file(self, remote: str) -> bool:
        with self.client.open_sftp() as sftp:
            try:
                return stat.S_ISREG(sftp.stat(remote).st_mode or 0)
            except OSError:
                return False

    def forward(self, remote_host: str, remote_port: int, local_port: int = 0) -> int:
        """Listen on 127.0.0.1:``local_port`` (0: any) and carry each connection to the remote's address."""
        listener = tcp_listener("127.0.0.1", local_port)
        transport = self.client.get_transport()
        assert transport is not None

        def open_channel() -> socket.socket:
            try:
                return transport.open_channel("direct-tcpip", (remote_host, remote_port), ("127.0.0.1", 0),
                                              timeout=self.target.connect_timeout_s)  # type: ignore[return-value]
            except (paramiko.SSHException, EOFError) as exc:  # the relay expects OSError from its connector
                raise OSError(f"ssh forward to {remote_host}:{remote_port}: {exc}") from exc

        relay = Relay(listener, open_channel, name=f"ssh-forward-{remote_port}").start()
        with self._lock:
            self._forwards.append(relay)
        return int(listener.getsockname()[1])

    def close(self) -> None:
        with self._lock:
            forwards, self._forwards = self._forwards, []
        for relay in forwards:
            relay.stop()
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None
