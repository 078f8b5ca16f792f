"""The machine QEMU runs on, for the libvirt backend: this host, or a remote one reached over SSH.

With ``qemu:///system`` everything is local. With ``qemu+ssh://user@host/system``
libvirt itself talks to the far daemon, but the files and ports a VM needs live
there too, so this module does, over one SSH connection:

* the image: copied once into ``remote_cache_dir/images/<name>/``, each client into
  a folder of its own that is renamed into place only when complete (so a
  half-copied image is never used, and two clients copying at once never delete
  each other's files); or build it there with
  ``weavegym image build --cache-dir <remote_cache_dir>``;
* the VM's run directory (overlay, console log) and ``qemu-img create``;
* the agent and VNC ports, which QEMU binds on the far host's 127.0.0.1: reserved
  on the far host (``remote_cache_dir/ports/``, shared by every client of that
  host, not in this client's lock folder) and forwarded back to local ports, so
  the env and VNC viewers use 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import secrets
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import parse_qs, urlsplit

from weavegym.core.errors import BackendError, HostSetupError
from weavegym.machine.backends import resources
from weavegym.machine.backends.ssh_link import SshLink, SshTarget
from weavegym.vm_images.builder import BuiltImage

log = logging.getLogger("weavegym.backends.qemu_host")
IMAGE_FILES = ("disk.qcow2", "vmlinuz", "initrd.img")


@dataclass(frozen=True)
class ImagePaths:
    """An image's files as the QEMU host sees them."""

    disk: str
    kernel: str
    initrd: str


class PortReservation(Protocol):
    """A port held for one VM until ``release``."""

    def release(self) -> None: ...


class QemuHost(Protocol):
    remote: bool

    def reserve_port(self, kind: str, ports: range) -> tuple[int, PortReservation]: ...
    def image_paths(self, image: BuiltImage) -> ImagePaths: ...
    def run_dir(self, name: str) -> str: ...
    def make_dir(self, path: str) -> None: ...
    def write_private_file(self, path: str, data: bytes) -> None: ...
    def free_bytes(self) -> int: ...
    def create_overlay(self, base: str, overlay: str) -> None: ...
    def read_tail(self, path: str, limit: int) -> str: ...
    def remove_tree(self, path: str) -> None: ...
    def reach(self, port: int) -> int: ...
    def close(self) -> None: ...


def is_remote_uri(uri: str) -> bool:
    return "+ssh://" in uri


def ssh_target_of(uri: str, connect_timeout_s: float = 15.0) -> SshTarget:
    """``qemu+ssh://user@host:port/system?keyfile=K`` -> the SSH login libvirt itself uses.

    The host key is checked as libvirt checks it: against ``known_hosts=`` (or ~/.ssh/known_hosts), not
    at all with ``no_verify=1``.
    """
    parts = urlsplit(uri)
    if not parts.hostname:
        raise ValueError(f"libvirt URI {uri!r} names no host")
    query = parse_qs(parts.query)
    keyfile = query.get("keyfile", [None])[0]
    known_hosts = query.get("known_hosts", [None])[0]
    return SshTarget(parts.hostname, parts.username or "root", parts.port or 22,
                     Path(keyfile) if keyfile else None, connect_timeout_s,
                     host_keys="any" if query.get("no_verify", ["0"])[0] == "1" else "known",
                     known_hosts=Path(known_hosts) if known_hosts else None)


class LocalQemuHost:
    remote = False

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir

    def reserve_port(self, kind: str, ports: range) -> tuple[int, PortReservation]:
        """A lock file per port in this cache's lock folder (held while the VM lives), and nothing listening."""
        return resources.allocate_port(self.cache_dir / "locks", ports, kind)

    def image_paths(self, image: BuiltImage) -> ImagePaths:
        return ImagePaths(str(image.disk), str(image.kernel), str(image.initrd))

    def run_dir(self, name: str) -> str:
        return str(self.cache_dir / "run" / name)

    def make_dir(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)

    def write_private_file(self, path: str, data: bytes) -> None:
        """A new file readable by its owner only (created 0600, never over an existing one or a symlink)."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)

    def free_bytes(self) -> int:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        return shutil.disk_usage(self.cache_dir).free

    def create_overlay(self, base: str, overlay: str) -> None:
        result = subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base, overlay],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise BackendError(f"qemu-img could not create the overlay {overlay}: {result.stderr.strip()}")

    def read_tail(self, path: str, limit: int) -> str:
        try:
            return Path(path).read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def remove_tree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def reach(self, port: int) -> int:
        return port

    def close(self) -> None:
        pass


class SshQemuHost:
    remote = True

    def __init__(self, target: SshTarget, remote_cache_dir: str) -> None:
        self.target = target
        self.cache_dir = remote_cache_dir.rstrip("/")
        self.link = SshLink(target).connect()

    def image_paths(self, image: BuiltImage) -> ImagePaths:
        """The image on the far host, copied there first if it is not complete yet."""
        remote = f"{self.cache_dir}/images/{image.name}"
        if not self.link.remote_is_file(f"{remote}/manifest.json"):
            self._copy_image(image, remote)
        return ImagePaths(*(f"{remote}/{name}" for name in IMAGE_FILES))

    def reserve_port(self, kind: str, ports: range) -> tuple[int, PortReservation]:
        """A port on the far host that no client of it holds and nothing there listens on.

        Reservations are folders under ``remote_cache_dir/ports/`` made with mkdir, which is atomic, so two
        clients (each with its own local lock folder) never get the same port. One whose VM is gone (the port
        is free again) is taken over once it is older than ``STALE_RESERVATION_S``, which covers clients that
        died without releasing.
        """
        root = f"{self.cache_dir}/ports"
        out = self.link.run(f"python3 -c {shlex.quote(_RESERVE_PORT)} {shlex.quote(root)} {shlex.quote(kind)} "
                            f"{ports.start} {ports.stop} {STALE_RESERVATION_S}", timeout=60)
        if out.exit_code != 0 or not out.stdout.strip().isdigit():
            raise HostSetupError(f"{self.target.host}: no free {kind} port in {ports.start}-{ports.stop - 1} "
                                 f"(reservations in {root}): {(out.stderr or out.stdout).strip()[-300:]}")
        port = int(out.stdout.strip())
        return port, RemotePortReservation(self.link, f"{root}/{kind}-{port}")

    def _copy_image(self, image: BuiltImage, remote: str) -> None:
        size = sum((image.path / name).stat().st_size for name in IMAGE_FILES)
        log.warning("copying image %s (%.1f GiB) to %s:%s", image.name, size / 2**30, self.target.host, remote)
        partial = f"{remote}.partial-{secrets.token_hex(6)}"  # this client's own: another may be copying too
        self.link.check(f"mkdir -p {shlex.quote(partial)}", "preparing the copy")
        for name in IMAGE_FILES:
            self.link.upload_file(image.path / name, f"{partial}/{name}")
        with tempfile.TemporaryDirectory() as tmp:
            manifest = Path(tmp) / "manifest.json"
            shutil.copy(image.path / "manifest.json", manifest)
            self.link.upload_file(manifest, f"{partial}/manifest.json")
        # Renamed into place as a whole; if another client finished first, its complete copy is kept. A folder
        # without a manifest there is a copy an older version left half-done: moved aside and removed.
        r, p, stale = shlex.quote(remote), shlex.quote(partial), shlex.quote(f"{partial}.stale")
        self.link.check(f"if [ -d {r} ] && [ ! -f {r}/manifest.json ]; then mv -T {r} {stale} && rm -rf {stale}; fi; "
                        f"mv -T {p} {r} 2>/dev/null || {{ test -f {r}/manifest.json && rm -rf {p}; }}",
                        "finishing the image copy")

    def run_dir(self, name: str) -> str:
        return f"{self.cache_dir}/run/{name}"

    def make_dir(self, path: str) -> None:
        self.link.check(f"mkdir -p {shlex.quote(path)}", f"creating {path}")

    def write_private_file(self, path: str, data: bytes) -> None:
        """A new 0600 file on the far host, its content sent on stdin (never on a command line)."""
        result = self.link.run(f"umask 077 && set -C && cat > {shlex.quote(path)}", stdin=data, timeout=30)
        if not result.ok:
            raise BackendError(f"ssh {self.target}: could not write {path}: {result.stderr.strip()[-200:]}")

    def free_bytes(self) -> int:
        self.make_dir(self.cache_dir)
        out = self.link.check(f"df -B1 --output=avail {shlex.quote(self.cache_dir)} | tail -n 1", "checking disk space")
        try:
            return int(out.strip())
        except ValueError:
            raise HostSetupError(f"{self.target.host}: cannot read free space of {self.cache_dir}: {out!r}") from None

    def create_overlay(self, base: str, overlay: str) -> None:
        self.link.check(f"qemu-img create -q -f qcow2 -F qcow2 -b {shlex.quote(base)} {shlex.quote(overlay)}",
                        f"creating the overlay {overlay} (is qemu-utils installed there?)")

    def read_tail(self, path: str, limit: int) -> str:
        if not self.link.is_active():
            return ""
        return self.link.run(f"tail -c {int(limit)} {shlex.quote(path)} 2>/dev/null", timeout=15).stdout

    def remove_tree(self, path: str) -> None:
        if self.link.is_active():
            self.link.run(f"rm -rf {shlex.quote(path)}", timeout=60)

    def reach(self, port: int) -> int:
        return self.link.forward("127.0.0.1", port)

    def close(self) -> None:
        self.link.close()


STALE_RESERVATION_S = 600  # a reservation whose port is free again after this long belongs to a VM that is gone


class RemotePortReservation:
    """A port reservation folder on the far host; released over the same SSH link."""

    def __init__(self, link: SshLink, path: str) -> None:
        self.link, self.path = link, path

    def release(self) -> None:
        """Best effort: a reservation left behind (link gone) is taken over once its port is free and it is stale."""
        if self.link.is_active():
            with contextlib.suppress(BackendError, OSError):
                self.link.run(f"rm -rf {shlex.quote(self.path)}", timeout=30)


# argv: reservations folder, kind, first port, end port (exclusive), stale seconds. Prints the reserved port.
# The remote host runs the same free-port test as a local one: resources.port_free's own source.
_RESERVE_PORT = "import os, random, shutil, socket, sys, time\n" + inspect.getsource(resources.port_free) + """
free = port_free
root, kind, first, end, stale = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
os.makedirs(root, exist_ok=True)
ports = list(range(first, end))
start = random.randrange(len(ports))
for i in range(len(ports)):
    port = ports[(start + i) % len(ports)]
    path = f"{root}/{kind}-{port}"
    try:
        os.mkdir(path)
    except FileExistsError:
        try:
            age = time.time() - os.stat(path).st_mtime
        except FileNotFoundError:
            continue
        if age < stale or not free(port):
            continue
        aside = f"{path}.stale-{os.getpid()}"
        try:
            os.rename(path, aside)  # only one client wins this rename
        except OSError:
            continue
        shutil.rmtree(aside, ignore_errors=True)
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
    if not free(port):
        os.rmdir(path)
        continue
    with open(f"{path}/owner", "w") as out:
        out.write(f"{os.environ.get('SSH_CLIENT', '?')} {time.time()}\\n")
    print(port)
    sys.exit(0)
sys.exit(3)
"""
