"""`weavegym image build`: debootstrap a guest, provision it in a chroot, and pack it as qcow2.

The result lands in ``<cache>/images/<profile>-<distro>-<key>/`` (disk.qcow2,
vmlinuz, initrd.img, manifest.json). The VM boots the kernel directly, so the
image needs no bootloader and ``mkfs.ext4 -d`` builds the disk without
mounting anything. A build works in a temporary directory next to the cache
and is renamed into place only when complete, so a failed or interrupted
build leaves nothing that looks like an image.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from weavegym.core.errors import HostSetupError
from weavegym.core.version import __version__
from weavegym.vm_images.recipe import GUEST_FILES, PACKAGE_ROOT, ImageRecipe, guest_pins

MIN_FREE_BYTES = 6 << 30
STEPS = ("check", "debootstrap", "wheels", "provision", "kernel", "disk", "finish")
Progress = Callable[[str, str], None]  # (step, detail)


@dataclass(frozen=True)
class BuiltImage:
    name: str
    path: Path
    manifest: dict

    @property
    def disk(self) -> Path:
        return self.path / "disk.qcow2"

    @property
    def kernel(self) -> Path:
        return self.path / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.path / "initrd.img"


def images_dir(cache_dir: Path) -> Path:
    return cache_dir / "images"


def find_image(recipe: ImageRecipe, cache_dir: Path) -> BuiltImage | None:
    path = images_dir(cache_dir) / recipe.name
    manifest = path / "manifest.json"
    if not manifest.is_file():
        return None
    return BuiltImage(recipe.name, path, json.loads(manifest.read_text()))


def require_image(recipe: ImageRecipe, cache_dir: Path) -> BuiltImage:
    """The cached image for ``recipe``, or a HostSetupError that says how to build it."""
    image = find_image(recipe, cache_dir)
    if image is None:
        raise HostSetupError(
            f"no {recipe.profile!r} image for {recipe.distro} (key {recipe.key()}) in {images_dir(cache_dir)}; "
            f"build it with: weavegym image build --profile {recipe.profile} --distro {recipe.distro}"
        )
    return image


def list_images(cache_dir: Path) -> list[BuiltImage]:
    root = images_dir(cache_dir)
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.iterdir()):
        manifest = path / "manifest.json"
        if manifest.is_file():
            found.append(BuiltImage(path.name, path, json.loads(manifest.read_text())))
    return found


def remove_image(name: str, cache_dir: Path) -> Path:
    path = images_dir(cache_dir) / name
    if not (path / "manifest.json").is_file():
        raise HostSetupError(f"no image named {name!r}; see `weavegym image list`")
    shutil.rmtree(path)
    return path


def build_image(recipe: ImageRecipe, cache_dir: Path, progress: Progress | None = None,
                force: bool = False) -> BuiltImage:
    """Build (or reuse) the image for ``recipe``; returns it."""
    report = progress or (lambda step, detail: None)
    existing = find_image(recipe, cache_dir)
    if existing and not force:
        report("finish", f"cached: {existing.path}")
        return existing
    report("check", "prerequisites")
    _check_prerequisites(cache_dir)
    root = images_dir(cache_dir)
    root.mkdir(parents=True, exist_ok=True)
    _sweep_dead_builds(root)
    name, key = recipe.name, recipe.key()  # once: the guest files must not change under a build
    work = root / f".build-{name}-{os.getpid()}"
    started = time.monotonic()
    try:
        shutil.rmtree(work, ignore_errors=True)
        rootfs = work / "rootfs"
        rootfs.mkdir(parents=True)
        _debootstrap(recipe, rootfs, cache_dir, report)
        report("wheels", "agent wheels for the guest")
        wheels = rootfs / "tmp" / "weavegym-wheels"
        build_agent_wheels(recipe.distribution.python_version, wheels)
        _install_guest_files(rootfs)
        report("provision", f"{len(recipe.packages)} packages in the chroot")
        with _chroot_mounts(rootfs, cache_dir / "debs" / recipe.distribution.name):
            _run(["chroot", str(rootfs), "/bin/bash", "/tmp/provision.sh", recipe.desktop_user,
                  " ".join(recipe.packages), recipe.session_command, recipe.workspace_user, recipe.shared_group],
                 "provisioning the guest", report, "provision")
        (rootfs / "tmp" / "provision.sh").unlink()
        report("kernel", "kernel and initrd")
        kernel_version = _copy_kernel(rootfs, work)
        report("disk", "mkfs.ext4 -d and qemu-img convert")
        raw = work / "disk.raw"
        # Inode tables and journal zeroed now, once: left lazy, the guest kernel's ext4lazyinit thread zeroes
        # them on every boot (each boot starts from this same image), writing ~100 MB into the overlay while
        # the desktop comes up under TCG.
        _run(["mkfs.ext4", "-q", "-F", "-L", "weavegym-root", "-E", "lazy_itable_init=0,lazy_journal_init=0",
              "-d", str(rootfs), str(raw), f"{recipe.disk_gb}G"],
             "making the root filesystem", report, "disk")
        _run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(work / "disk.qcow2")],
             "converting to qcow2", report, "disk")
        raw.unlink()
        shutil.rmtree(rootfs)
        manifest = {
            "name": name, "key": key, "profile": recipe.profile, "distro": recipe.distro,
            "packages": list(recipe.packages), "desktop_user": recipe.desktop_user,
            "workspace_user": recipe.workspace_user, "shared_group": recipe.shared_group,
            "kernel_version": kernel_version, "build_seconds": round(time.monotonic() - started, 1),
            "disk_bytes": (work / "disk.qcow2").stat().st_size, "created": time.time(),
            "agent_port": 760, "ready_window_classes": list(recipe.ready_window_classes),
            # The agent serves TLS with the key the host passes by fw_cfg (weavegym-agent.service).
            "agent_tls": True,
        }
        (work / "manifest.json").write_text(json.dumps(manifest, indent=2))
        final = root / name
        if final.exists():
            shutil.rmtree(final)
        work.rename(final)
        report("finish", str(final))
        return BuiltImage(name, final, manifest)
    except BaseException:
        _unmount_all(work / "rootfs")
        shutil.rmtree(work, ignore_errors=True)
        raise


def _sweep_dead_builds(root: Path) -> None:
    """Remove work dirs of builds whose process died (SIGKILL, power loss), unmounting first."""
    for work in root.glob(".build-*"):
        pid = work.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            _unmount_all(work / "rootfs")
            shutil.rmtree(work, ignore_errors=True)


def _check_prerequisites(cache_dir: Path) -> None:
    if os.geteuid() != 0:
        raise HostSetupError("building an image needs root (debootstrap and chroot); run it with sudo")
    for tool, package in (("debootstrap", "debootstrap"), ("mkfs.ext4", "e2fsprogs"), ("qemu-img", "qemu-utils")):
        if shutil.which(tool) is None:
            raise HostSetupError(f"{tool} is missing; install it with: apt-get install {package}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(cache_dir).free
    if free < MIN_FREE_BYTES:
        raise HostSetupError(f"only {free / 2**30:.1f} GiB free in {cache_dir}; an image build needs "
                             f"{MIN_FREE_BYTES / 2**30:.0f} GiB. Free space or pass --cache-dir elsewhere")


def _debootstrap(recipe: ImageRecipe, rootfs: Path, cache_dir: Path, report: Progress) -> None:
    distro = recipe.distribution
    debs = cache_dir / "debs" / distro.name
    debs.mkdir(parents=True, exist_ok=True)
    cmd = ["debootstrap", "--variant=minbase", f"--components={','.join(distro.components)}",
           f"--cache-dir={debs}", "--include=ca-certificates"]
    if distro.keyring:
        if not Path(distro.keyring).is_file():
            raise HostSetupError(f"{distro.name} needs the keyring {distro.keyring} "
                                 f"(Debian package ubuntu-archive-keyring) and access to {distro.mirror}")
        cmd.append(f"--keyring={distro.keyring}")
    _run([*cmd, distro.suite, str(rootfs), distro.mirror], "debootstrap", report, "debootstrap")
    sources = f"deb {distro.mirror} {distro.suite} {' '.join(distro.components)}\n"
    (rootfs / "etc" / "apt" / "sources.list").write_text(sources)


GUEST_WHEEL = "weavegym-guest"

# The guest wheel's own top-level module: the host package's __init__ would pull in (lazily, but
# still) names of host modules that do not exist in the guest.
_GUEST_INIT = '''"""weavegym's guest side: the agent (weavegym.guest_agent) and its protocol (weavegym.agent.v1).

This distribution is all that enters a guest. Task code, oracles, checkers and fixtures stay on the host.
"""
'''


def build_agent_wheels(python_version: str, dest: Path) -> None:
    """The guest agent and its pinned dependencies as wheels for ``python_version`` (e.g. "3.11").

    Guests may have no network, so everything they install comes from this directory:
    image builds copy it into the chroot, the ssh backend uploads it. The agent's wheel holds only
    ``weavegym.guest_agent`` and ``weavegym.agent`` (see ``guest_wheel_tree``).
    """
    dest.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    with tempfile.TemporaryDirectory(prefix="weavegym-guest-src-") as tmp:
        src = guest_wheel_tree(Path(tmp) / "src")
        _run([*pip, "wheel", "--no-deps", "-w", str(dest), str(src)],
             "building the guest wheel")
    _run([*pip, "download", "--only-binary=:all:", "--python-version", python_version, "--implementation", "cp",
          "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64", "-d", str(dest),
          *guest_pins().values(), "six"], "downloading the agent's wheels")


def guest_wheel_tree(src: Path) -> Path:
    """A source tree for the guest-only wheel: the agent, the generated protocol, a stub top module."""
    package = src / "weavegym"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(PACKAGE_ROOT / "guest_agent", package / "guest_agent", ignore=ignore)
    shutil.copytree(PACKAGE_ROOT / "agent", package / "agent", ignore=ignore)
    (package / "__init__.py").write_text(_GUEST_INIT)
    (src / "pyproject.toml").write_text(
        "[build-system]\nrequires = [\"setuptools>=69\", \"wheel\"]\nbuild-backend = \"setuptools.build_meta\"\n\n"
        f"[project]\nname = \"{GUEST_WHEEL}\"\nversion = \"{__version__}\"\nrequires-python = \">=3.9\"\n"
        f"dependencies = {json.dumps(sorted(guest_pins().values()))}\n\n"
        "[tool.setuptools.packages.find]\ninclude = [\"weavegym*\"]\n")
    return src


def _install_guest_files(rootfs: Path) -> None:
    units = rootfs / "etc" / "systemd" / "system"
    units.mkdir(parents=True, exist_ok=True)
    for unit in GUEST_FILES.glob("*.service"):
        shutil.copy(unit, units / unit.name)
    (rootfs / "etc" / "systemd" / "network").mkdir(parents=True, exist_ok=True)
    for script, dest in (("weavegym-session", "usr/local/bin"), ("weavegym-read-settings", "usr/local/sbin"),
                         ("weavegym-xauth", "usr/local/sbin")):
        target = rootfs / dest / script
        shutil.copy(GUEST_FILES / script, target)
        target.chmod(0o755)
    shutil.copy(GUEST_FILES / "provision.sh", rootfs / "tmp" / "provision.sh")
    shutil.copy("/etc/resolv.conf", rootfs / "etc" / "resolv.conf")


# Character devices package scripts need. The chroot gets these on a private tmpfs, never the host's
# /dev: with a bind mount, udev's postinst ran `chgrp kvm /dev/kvm` with the *chroot's* kvm gid and
# silently broke the host's /dev/kvm (which makes libvirt re-probe QEMU for 60 s per domain start).
_DEV_NODES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9), "tty": (5, 0)}


@contextmanager
def _chroot_mounts(rootfs: Path, debs: Path) -> Iterator[None]:
    """proc, sys, a private /dev for package scripts; the persistent .deb cache so rebuilds download nothing."""
    debs.mkdir(parents=True, exist_ok=True)
    dev = rootfs / "dev"
    mounts = [("proc", rootfs / "proc", ["-t", "proc"]), ("sysfs", rootfs / "sys", ["-t", "sysfs", "-o", "ro"]),
              ("tmpfs", dev, ["-t", "tmpfs", "-o", "mode=755,size=16m"]),
              (str(debs), rootfs / "var" / "cache" / "apt" / "archives", ["--bind"])]
    try:
        for source, target, opts in mounts:
            target.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", *opts, source, str(target)], check=True)
        for name, (major, minor) in _DEV_NODES.items():
            os.mknod(dev / name, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        (dev / "pts").mkdir()
        (dev / "shm").mkdir(mode=0o1777)
        subprocess.run(["mount", "-t", "devpts", "-o", "newinstance,ptmxmode=0666", "devpts", str(dev / "pts")],
                       check=True)
        (dev / "ptmx").symlink_to("pts/ptmx")
        (dev / "fd").symlink_to("/proc/self/fd")
        yield
    finally:
        _unmount_all(rootfs)


def _unmount_all(rootfs: Path) -> None:
    """Unmount everything below ``rootfs``, deepest first; never leave a bind mount of /dev behind."""
    if not rootfs.exists():
        return
    prefix = str(rootfs.resolve()) + "/"
    with open("/proc/mounts") as fh:
        points = [line.split()[1] for line in fh if line.split()[1].startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False)


def _copy_kernel(rootfs: Path, work: Path) -> str:
    boot = rootfs / "boot"
    kernels = sorted(boot.glob("vmlinuz-*"))
    if not kernels:
        raise HostSetupError("the image has no kernel in /boot; the kernel package did not install")
    version = kernels[-1].name.removeprefix("vmlinuz-")
    initrd = boot / f"initrd.img-{version}"
    if not initrd.is_file():
        raise HostSetupError(f"the image has no initrd for kernel {version}")
    shutil.copy(kernels[-1], work / "vmlinuz")
    shutil.copy(initrd, work / "initrd.img")
    return version


def _run(cmd: list[str], what: str, report: Progress | None = None, step: str = "") -> None:
    """Run a build command, streaming its last output line into the progress display."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        if line:
            tail = [*tail[-40:], line]
            if report and step:
                report(step, line[:100])
    if proc.wait() != 0:
        joined = "\n".join(tail[-15:])
        raise HostSetupError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd[:4])}…\n{joined}")
