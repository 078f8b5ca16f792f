"""Host-wide prepared states: a VM frozen in a ready state that any new QEMU on this host starts from.

A state is a folder of four files, written once by the VM that prepared it and read-only afterwards:

- ``ram.bin``: guest RAM, the file that backed the preparing VM's memory (``memory-backend-file``,
  ``share=on``). Every VM restored from it maps it ``share=off``, so its pages are shared copy-on-write
  by all of them and nothing is copied at restore;
- ``device.state``: QEMU's migration stream without RAM (the ``x-ignore-shared`` capability), a few MB;
- ``disk.qcow2``: the preparing VM's overlay, frozen; each restored VM gets a new overlay on top of it;
- ``payload.bin``: what the state's maker wants back (the env keeps a task's parameters and truth there).

Two processes never build one state twice: building holds an exclusive ``flock`` on the state's lock file,
and a builder that got the lock first checks whether another process published the state meanwhile. A
state is built in a staging folder and published by one ``rename``, so a half-built one is never used.
The folder is root's (or the user's) alone: the RAM image holds what the preparing guest held in memory.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from weavegym.core.deadline import Deadline
from weavegym.core.errors import SnapshotError

RAM_FILE = "ram.bin"
DEVICE_STATE = "device.state"
DISK = "disk.qcow2"
PAYLOAD = "payload.bin"
META = "meta.json"


@dataclass(frozen=True)
class PreparedState:
    name: str
    folder: Path

    @property
    def ram(self) -> Path:
        return self.folder / RAM_FILE

    @property
    def device_state(self) -> Path:
        return self.folder / DEVICE_STATE

    @property
    def disk(self) -> Path:
        return self.folder / DISK

    def payload(self) -> bytes:
        path = self.folder / PAYLOAD
        return path.read_bytes() if path.exists() else b""

    def meta(self) -> dict[str, object]:
        return json.loads((self.folder / META).read_text())


def machine_shape(memory_mib: int, vcpus: int, screen: tuple[int, int]) -> str:
    """A state fits only a machine of the same memory, CPUs and screen: part of where it is kept."""
    return f"{memory_mib}m-{vcpus}c-{screen[0]}x{screen[1]}"


class PreparedStore:
    """The states of one image and machine shape, under ``root`` (one folder per state)."""

    def __init__(self, root: Path, min_free_bytes: int = 0) -> None:
        """``min_free_bytes``: refuse to start a build with less free space than that under ``root`` (a state
        holds the guest's touched RAM, up to its whole memory size)."""
        self.root = root
        self.min_free_bytes = min_free_bytes

    def _folder(self, name: str) -> Path:
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"not a state name: {name!r}")
        return self.root / name

    def find(self, name: str) -> PreparedState | None:
        folder = self._folder(name)
        return PreparedState(name, folder) if (folder / META).is_file() else None

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / META).is_file())

    @contextlib.contextmanager
    def building(self, name: str, timeout_s: float) -> Iterator[StateBuild]:
        """Hold ``name``'s build lock (waiting up to ``timeout_s`` for another builder); yields a build whose
        ``existing`` is set if the state is there already, else whose ``staging`` folder is to be filled and
        then ``publish``-ed. A build that is not published is removed."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        for folder in (self.root, self.root.parent, self.root.parent.parent):  # <cache>/states/<image>/<shape>
            os.chmod(folder, 0o700)
        lock_path = self.root / f".{name}.lock"
        with open(lock_path, "a+b") as lock:
            _lock_within(lock.fileno(), timeout_s, name)
            build = StateBuild(self, name)
            try:
                yield build
            finally:
                if build.staging.exists():
                    shutil.rmtree(build.staging, ignore_errors=True)


class StateBuild:
    def __init__(self, store: PreparedStore, name: str) -> None:
        self.store = store
        self.name = name
        self.existing = store.find(name)
        self.staging = store.root / f".{name}.staging-{os.getpid()}"
        if self.existing is None:
            free = shutil.disk_usage(store.root).free
            if free < store.min_free_bytes:
                raise SnapshotError(
                    f"only {free >> 20} MiB free under {store.root}, and a prepared state needs up to "
                    f"{store.min_free_bytes >> 20} MiB: free some space, or remove old states (`weavegym gc` "
                    "removes those of deleted images; the folders under states/ can be deleted when no env runs)")
            shutil.rmtree(self.staging, ignore_errors=True)
            self.staging.mkdir(mode=0o700)

    def publish(self, payload: bytes, meta: dict[str, object]) -> PreparedState:
        for required in (RAM_FILE, DEVICE_STATE, DISK):
            if not (self.staging / required).is_file():
                raise FileNotFoundError(f"state {self.name}: {required} was not written")
        (self.staging / PAYLOAD).write_bytes(payload)
        (self.staging / META).write_text(json.dumps({**meta, "created": time.time(), "name": self.name}))
        for path in self.staging.iterdir():
            path.chmod(0o400)  # never written again: restored VMs map ram.bin and back their disks on disk.qcow2
        final = self.store._folder(self.name)
        self.staging.rename(final)
        self.existing = PreparedState(self.name, final)
        return self.existing


def _lock_within(fd: int, timeout_s: float, name: str) -> None:
    deadline = Deadline(timeout_s)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if deadline.expired():
                raise SnapshotError(f"another process has been building state {name} for over {timeout_s:.0f} s"
                                    ) from None
            time.sleep(0.2)  # polling a lock another process holds, bounded by the deadline


def code_hash(*paths: Path) -> str:
    """A short hash of every .py file and fixture under ``paths``: a state built by other code is not reused."""
    digest = hashlib.sha256()
    for root in paths:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()
                                                     and "__pycache__" not in p.parts)
        for path in files:
            digest.update(str(path.relative_to(root.parent)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def stale_states(states_root: Path, images_root: Path) -> list[Path]:
    """What `weavegym gc` may remove under ``states_root``: the states of images no longer in ``images_root``,
    and staging folders whose builder (the pid in the name) is dead."""
    stale: list[Path] = []
    if not states_root.is_dir():
        return stale
    for image_folder in sorted(states_root.iterdir()):
        if not (images_root / image_folder.name).is_dir():
            stale.append(image_folder)
            continue
        for staging in image_folder.glob("*/.*.staging-*"):
            pid = staging.name.rsplit("-", 1)[1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                stale.append(staging)
    return stale
