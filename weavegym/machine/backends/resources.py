"""Names, ports and records that make parallel envs safe, and that let `weavegym gc` clean up.

Every live VM holds an exclusive ``flock`` on one lock file per port it uses
and on its own record file. The kernel drops those locks when the owning
process dies, however it dies, so "the lock is free" is the reliable test
that a record belongs to a crashed process. Ports are chosen from fixed
ranges (not autoport) so that a VM keeps its VNC port across resets.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path

VNC_PORTS = range(5910, 6000)
AGENT_PORTS = range(17600, 17800)
SSH_PORTS = range(17800, 17900)
NAME_PREFIX = "weavegym-"


@dataclass
class VMRecord:
    """What gc needs to find and remove a VM's leftovers."""

    name: str
    uri: str
    owner_pid: int
    overlay: str
    run_dir: str
    vnc_port: int
    agent_port: int
    extra: dict[str, str] = field(default_factory=dict)


class HeldLock:
    """An open file with an exclusive flock; released on close() or when the process dies."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self._fd = path, fd

    def write(self, data: bytes) -> None:
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def release(self, unlink: bool = True) -> None:
        if self._fd >= 0:
            if unlink:
                with contextlib.suppress(OSError):
                    self.path.unlink()
            os.close(self._fd)
            self._fd = -1


def try_lock(path: Path) -> HeldLock | None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    # The file may have been unlinked by its previous holder between our open and flock.
    try:
        if os.fstat(fd).st_ino != os.stat(path).st_ino:
            os.close(fd)
            return None
    except FileNotFoundError:
        os.close(fd)
        return None
    return HeldLock(path, fd)


def is_locked(path: Path) -> bool:
    """True while some live process holds the lock on ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def port_free(port: int) -> bool:
    """Whether a TCP port on the loopback can be bound now. A remote host runs this source too (socket only)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def allocate_port(lock_dir: Path, ports: range, kind: str) -> tuple[int, HeldLock]:
    """A port in ``ports`` that no other weavegym process holds and nothing else listens on."""
    start = secrets.randbelow(len(ports))
    for i in range(len(ports)):
        port = ports[(start + i) % len(ports)]
        lock = try_lock(lock_dir / f"{kind}-{port}.lock")
        if lock is None:
            continue
        if port_free(port):
            return port, lock
        lock.release()
    raise OSError(f"no free {kind} port in {ports.start}-{ports.stop - 1}")


def new_vm_name() -> str:
    return f"{NAME_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"


def write_record(records_dir: Path, record: VMRecord) -> HeldLock:
    """Write the record and hold its lock for the VM's lifetime."""
    path = records_dir / f"{record.name}.json"
    lock = try_lock(path)
    if lock is None:
        raise OSError(f"record {path} is held by another process")
    lock.write(json.dumps(asdict(record), indent=2).encode())
    return lock


def read_records(records_dir: Path) -> list[tuple[Path, VMRecord]]:
    found = []
    for path in sorted(records_dir.glob(f"{NAME_PREFIX}*.json")) if records_dir.is_dir() else []:
        try:
            found.append((path, VMRecord(**json.loads(path.read_text() or "{}"))))
        except (OSError, TypeError, json.JSONDecodeError):
            found.append((path, VMRecord(name=path.stem, uri="", owner_pid=0, overlay="", run_dir="",
                                         vnc_port=0, agent_port=0)))
    return found
