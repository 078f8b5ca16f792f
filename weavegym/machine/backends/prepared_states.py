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

The states other than the booted desktop are bounded (``max_bytes``): every task variant an env plays leaves
one behind (about 1 GiB), so before a new one is built the least recently used are removed, passing by those
a VM holds (it restored one, maps its RAM, backs its disk on it and restores it again at every reset: a
shared ``flock`` on the state's use file) and those being built.
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
READY = "ready"  # the booted desktop every other state starts from: never removed to make room


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


class StateHold:
    """A VM's claim on the state it runs from; released when it moves on to another state or closes."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops its flock
            self._fd = None


class PreparedStore:
    """The states of one image and machine shape, under ``root`` (one folder per state)."""

    def __init__(self, root: Path, min_free_bytes: int = 0, max_bytes: int | None = None) -> None:
        """``min_free_bytes``: refuse to start a build with less free space than that under ``root`` (a state
        holds the guest's touched RAM, up to its whole memory size); it is also what a new state is expected to
        take. ``max_bytes``: what the states other than READY may take together, the new one included (None: no
        bound)."""
        self.root = root
        self.min_free_bytes = min_free_bytes
        self.max_bytes = max_bytes

    def hold(self, name: str) -> StateHold:
        """Claim ``name`` for a VM that restores it (taken before the restore, so that it cannot be removed in
        between); the claim also records the use that eviction ranks by."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self._use_file(name)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while an evictor decides (it never blocks holding this)
            os.utime(fd)
        except BaseException:
            os.close(fd)
            raise
        return StateHold(fd)

    def note_use(self, name: str) -> None:
        """Record a use of ``name`` without holding it (an env that found it is about to restore it)."""
        self.hold(name).release()

    def make_room(self, need: int) -> list[str]:
        """Remove the least recently used states that nobody holds or builds until the others and ``need`` more
        bytes fit in ``max_bytes``; returns the names removed (fewer, or none, if the rest are in use)."""
        if self.max_bytes is None:
            return []
        sizes = {name: _disk_usage(self._folder(name)) for name in self.names() if name != READY}
        total = sum(sizes.values())
        removed: list[str] = []
        for name in sorted(sizes, key=self._last_used):
            if total + need <= self.max_bytes:
                break
            if self._remove_unless_busy(name):
                total -= sizes[name]
                removed.append(name)
        return removed

    def _use_file(self, name: str) -> Path:
        return self.root / f".{self._folder(name).name}.use"

    def _last_used(self, name: str) -> float:
        for path in (self._use_file(name), self._folder(name) / META):
            with contextlib.suppress(FileNotFoundError):
                return path.stat().st_mtime
        return 0.0

    def _remove_unless_busy(self, name: str) -> bool:
        """Remove ``name`` if no VM holds it (this process's own holds count) and no process is building it."""
        locks: list[int] = []
        try:
            for path in (self._use_file(name), self.root / f".{name}.lock"):
                locks.append(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
                try:
                    fcntl.flock(locks[-1], fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return False
            doomed = self.root / f".{name}.evicted-{os.getpid()}"
            try:
                self._folder(name).rename(doomed)  # one step: find() no longer sees it
            except FileNotFoundError:
                return False
            shutil.rmtree(doomed, ignore_errors=True)
            return True
        finally:
            for fd in locks:
                os.close(fd)

    def _folder(self, name: str) -> Path:
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"not a state name: {name!r}")
        return self.root / name

    def find(self, name: str) -> PreparedState | None:
        folder = self._folder(name)
        return PreparedState(name, folder) if (folder / META).is_file() else None

    def names(self) -> list[str]:
        """The published states. A folder another process is evicting (``.<name>.evicted-<pid>``) or publishing
        (``.<name>.staging-<pid>``, its meta already written) holds a meta file too, but is not a state: listing
        it once failed a suite validation ("not a state name") while the other worker removed it."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if not p.name.startswith(".") and (p / META).is_file())

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
            store.make_room(store.min_free_bytes)
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


def _disk_usage(folder: Path) -> int:
    """Bytes the folder's files take on disk (the RAM file is sparse: its size says little); 0 for a folder
    that another process evicts meanwhile."""
    try:
        return sum(p.stat().st_blocks * 512 for p in folder.iterdir() if p.is_file())
    except FileNotFoundError:
        return 0


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
    and the staging or half-removed folders of processes (the pid in the name) that are dead."""
    stale: list[Path] = []
    if not states_root.is_dir():
        return stale
    for image_folder in sorted(states_root.iterdir()):
        if not (images_root / image_folder.name).is_dir():
            stale.append(image_folder)
            continue
        for staging in [*image_folder.glob("*/.*.staging-*"), *image_folder.glob("*/.*.evicted-*")]:
            pid = staging.name.rsplit("-", 1)[1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                stale.append(staging)
    return stale
