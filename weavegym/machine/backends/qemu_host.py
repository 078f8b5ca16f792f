"""The machine QEMU runs on, for the libvirt backend: this host, or a remote one reached over SSH.

With ``qemu:///system`` everything is local. With ``qemu+ssh://user@host/system``
libvirt itself talks to the far daemon, but the files and ports a VM needs live
there too, so this module does, over one SSH connection:

* the image: copied once into ``remote_cache_dir/images/<name>/`` (manifest last,
  so a half-copied image is never used); or build it there with
  ``weavegym image build --cache-dir <remote_cache_dir>``;
* the VM's run directory (overlay, console log) and ``qemu-img create``;
* the agent and VNC ports, which QEMU binds on the far host's 127.0.0.1:
  forwarded back to local ports, so the env and VNC viewers use 127.0.0.1.
"""

from __future__ import annotations

import logging
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import parse_qs, urlsplit

from weavegym.core.errors import BackendError, HostSetupError
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


class QemuHost(Protocol):
    remote: bool

    def image_paths(self, image: BuiltImage) -> ImagePaths: ...
    def run_dir(self, name: str) -> str: ...
    def make_dir(self, path: str) -> None: ...
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

    def image_paths(self, image: BuiltImage) -> ImagePaths:
        return ImagePaths(str(image.disk), str(image.kernel), str(image.initrd))

    def run_dir(self, name: str) -> str:
        return str(self.cache_dir / "run" / name)

    def make_dir(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)

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

    def _copy_image(self, image: BuiltImage, remote: str) -> None:
        size = sum((image.path / name).stat().st_size for name in IMAGE_FILES)
        log.warning("copying image %s (%.1f GiB) to %s:%s", image.name, size / 2**30, self.target.host, remote)
        partial = f"{remote}.partial"
        self.link.check(f"rm -rf {shlex.quote(partial)} && mkdir -p {shlex.quote(partial)}", "preparing the copy")
        for name in IMAGE_FILES:
            self.link.upload_file(image.path / name, f"{partial}/{name}")
        with tempfile.TemporaryDirectory() as tmp:
            manifest = Path(tmp) / "manifest.json"
            shutil.copy(image.path / "manifest.json", manifest)
            self.link.upload_file(manifest, f"{partial}/manifest.json")
        self.link.check(f"rm -rf {shlex.quote(remote)} && mv {shlex.quote(partial)} {shlex.quote(remote)}",
                        "finishing the image copy")

    def run_dir(self, name: str) -> str:
        return f"{self.cache_dir}/run/{name}"

    def make_dir(self, path: str) -> None:
        self.link.check(f"mkdir -p {shlex.quote(path)}", f"creating {path}")

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
