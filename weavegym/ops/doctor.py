"""Host checks behind `weavegym doctor`: each says what is wrong, why, and the command that fixes it.

Every check is bounded (subprocess timeouts, a probe deadline, an overall budget) and turns its own
failures into a failing ``Check``: doctor exists to diagnose broken hosts, so it must never hang or
raise on one.
"""

from __future__ import annotations

import grp
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from weavegym.core.deadline import Deadline
from weavegym.core.paths import default_cache_dir
from weavegym.machine.kvm_probe import choose_accelerator

BUDGET_S = 30.0
TOOL_TIMEOUT_S = 5.0
LIBVIRT_TIMEOUT_S = 8.0
DISK_WARN_GIB = 10.0
DISK_FAIL_GIB = 3.0
_SBIN = os.pathsep.join(["/usr/local/sbin", "/usr/sbin", "/sbin"])
_SUDO = "" if os.geteuid() == 0 else "sudo "


@dataclass
class Check:
    """One verdict. ``warn`` marks an ok check that still deserves attention (TCG fallback, low disk)."""

    name: str
    ok: bool
    required: bool
    detail: str
    fix: str = ""
    warn: bool = False

    @property
    def status(self) -> str:
        if not self.ok:
            return "✗" if self.required else "!"
        return "!" if self.warn else "✓"


def _which(name: str) -> str | None:
    """Like shutil.which, but also looks in sbin dirs, which are often off a normal user's PATH."""
    return shutil.which(name) or shutil.which(name, path=_SBIN)


def _run(argv: list[str], timeout: float = TOOL_TIMEOUT_S) -> tuple[int | None, str]:
    """Run briefly; (exit code or None on timeout/OS error, stdout+stderr). Never raises."""
    try:
        done = subprocess.run(
            argv, capture_output=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:g}s"
    except OSError as exc:
        return None, str(exc)
    text = (done.stdout + done.stderr).decode("utf-8", "replace").strip()
    return done.returncode, text


def _first_line(text: str) -> str:
    return text.splitlines()[0].strip() if text.strip() else "(no version output)"


def check_tool(name: str, version_args: list[str], package: str, *, required: bool = True) -> Check:
    """Present on PATH (or sbin) and answers its version flag."""
    binary = _which(name)
    fix = f"{_SUDO}apt-get install -y {package}"
    if binary is None:
        return Check(name, False, required, f"{name} not found on PATH or in sbin", fix)
    code, out = _run([binary, *version_args])
    if code is None:
        return Check(name, False, required, f"{binary} did not answer {' '.join(version_args)}: {out}", fix)
    if code != 0:  # some tools (Xvfb) have no version flag; the package manager knows the version
        pcode, pout = _run(["dpkg-query", "-W", "-f", "${Version}", package])
        out = f"{package} {pout}" if pcode == 0 and pout else "present (version unknown)"
    return Check(name, True, required, f"{binary}: {_first_line(out)}")


def check_accelerator(cache_dir: Path, *, refresh: bool = False) -> Check:
    """KVM only if a guest really runs under it (see kvm_probe); TCG is an acceptable, slower fallback."""
    result = choose_accelerator(cache_dir, refresh=refresh, kvm_timeout_s=10.0, tcg_timeout_s=12.0)
    cached = " (cached verdict; `weavegym doctor --refresh` re-probes)" if result.from_cache else ""
    kvm = result.fallback_from
    if result.works and kvm is None:
        return Check("accelerator", True, True, f"KVM works: {result.reason} in {result.seconds:.2f}s{cached}")
    kvm_reason = kvm.reason if kvm else "not probed"
    if result.works:
        return Check(
            "accelerator", True, True,
            f"KVM unusable: {kvm_reason}; using TCG (probe took {result.seconds:.2f}s, "
            f"guests run several times slower){cached}",
            _kvm_hint(kvm_reason), warn=True,
        )
    fix = f"{_SUDO}apt-get install -y --reinstall qemu-system-x86"
    if "qemu not found" in result.reason:
        fix = f"{_SUDO}apt-get install -y qemu-system-x86"
    return Check("accelerator", False, True, f"no accelerator works. KVM: {kvm_reason}; TCG: {result.reason}", fix)


def _kvm_hint(kvm_reason: str) -> str:
    """What, if anything, would make KVM usable; TCG already works when this is shown."""
    if "missing" in kvm_reason:
        return f"enable VT-x/AMD-V in firmware, then: {_SUDO}modprobe kvm_intel || {_SUDO}modprobe kvm_amd"
    if "not accessible" in kvm_reason:
        return f"{_SUDO}usermod -aG kvm $USER   # then log in again"
    return "none needed for TCG; on a host with working (non-nested) KVM, re-probe: weavegym doctor --refresh"


_LIBVIRT_SCRIPT = """
import sys
try:
    import libvirt
except ImportError as exc:
    print(exc); sys.exit(3)
try:
    conn = libvirt.openReadOnly(sys.argv[1])
except libvirt.libvirtError as exc:
    print(exc); sys.exit(2)
v = conn.getLibVersion()
print(f"{v // 1000000}.{v // 1000 % 1000}.{v % 1000}")
conn.close()
"""


def _running(names: tuple[str, ...]) -> set[str]:
    """Which of ``names`` have a live process (from /proc, so no ps/pgrep is needed)."""
    found: set[str] = set()
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            name = comm.read_text().strip()
        except OSError:
            continue  # the process exited while we looked
        if name in names:
            found.add(name)
    return found


def check_libvirt() -> Check:
    """The default backend needs a reachable daemon and the python binding; probed in a subprocess
    with a timeout so a wedged daemon cannot hang doctor."""
    uri = "qemu:///system" if os.geteuid() == 0 else "qemu:///session"
    daemons = ("libvirtd", "virtlogd")
    up = _running(daemons)
    procs = ", ".join(f"{d} {'running' if d in up else 'not running'}" for d in daemons)
    systemd = Path("/proc/1/comm").exists() and Path("/proc/1/comm").read_text().strip() == "systemd"
    missing = [d for d in daemons if d not in up]
    if systemd:
        start = f"{_SUDO}systemctl start {' '.join(missing or daemons)}"
    else:  # no systemd as PID 1 (containers, CI): the daemons must be started by hand
        start = " && ".join(f"{_SUDO}{d} -d" for d in reversed(missing or daemons))
    install = (
        f"{_SUDO}apt-get install -y libvirt-daemon-system libvirt-clients libvirt-dev pkg-config gcc"
        f" && {sys.executable} -m pip install libvirt-python"
    )
    code, out = _run([sys.executable, "-c", _LIBVIRT_SCRIPT, uri], timeout=LIBVIRT_TIMEOUT_S)
    if code == 0:
        return Check("libvirt", True, True, f"{uri} reachable (libvirt {_first_line(out)}); {procs}")
    if code == 3:  # no python binding: still tell the user whether the daemon itself answers
        virsh = _which("virsh")
        if virsh is None:
            detail = f"python module libvirt missing ({out}) and virsh not installed; {procs}"
            return Check("libvirt", False, True, detail, install + (" && " + start if missing else ""))
        vcode, vout = _run([virsh, "-c", uri, "version"], timeout=LIBVIRT_TIMEOUT_S)
        state = "reachable" if vcode == 0 else f"unreachable ({_first_line(vout)})"
        detail = f"python module libvirt missing ({out}); {uri} {state} via virsh; {procs}"
        fix = f"{sys.executable} -m pip install libvirt-python   # needs libvirt-dev pkg-config gcc"
        return Check("libvirt", False, True, detail, fix if vcode == 0 else f"{start} && {fix}")
    why = "timed out (daemon wedged?)" if code is None else _first_line(out)
    detail = f"cannot open {uri}: {why}; {procs}"
    if not systemd:
        detail += "; without systemd, start them yourself with `virtlogd -d` and `libvirtd -d`"
    fix = start if _which("libvirtd") else f"{install} && {start}"
    return Check("libvirt", False, True, detail, fix)


def check_disk(path: Path) -> Check:
    """Images and overlays live under the cache dir: fail below 3 GiB free, warn below 10 GiB."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent  # the cache dir may not exist yet; measure the disk it will land on
    try:
        free_gib = shutil.disk_usage(probe).free / 2**30
    except OSError as exc:
        return Check("disk space", False, True, f"cannot stat {probe}: {exc}", f"mkdir -p {path}")
    detail = f"{free_gib:.1f} GiB free at {probe}"
    fix = f"weavegym gc && weavegym image list   # then `weavegym image rm` unused images; du -sh {path}"
    if free_gib < DISK_FAIL_GIB:
        return Check("disk space", False, True, f"{detail} (need ≥ {DISK_FAIL_GIB:g} GiB)", fix)
    if free_gib < DISK_WARN_GIB:
        return Check("disk space", True, True, f"{detail} (below {DISK_WARN_GIB:g} GiB)", fix, warn=True)
    return Check("disk space", True, True, detail)


def check_kvm_device(device: Path = Path("/dev/kvm")) -> Check:
    """libvirt re-probes QEMU for ~60 s per domain start when its QEMU user cannot open /dev/kvm.

    It probes capabilities with KVM, then finds "KVM … is not available now" (checked as the
    libvirt-qemu user), discards the cache and probes again, 15 times. Seen on these machines,
    where /dev/kvm came with a foreign group instead of udev's root:kvm 0660.
    """
    if not device.exists():
        return Check("kvm device", True, False, f"{device} absent: libvirt uses TCG without probing KVM")
    st = device.stat()
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    mode = stat.S_IMODE(st.st_mode)
    group_ok = group == "kvm" and (mode & 0o060) == 0o060
    if group_ok or (mode & 0o006) == 0o006:
        return Check("kvm device", True, False, f"{device} is {group} {mode:o}: libvirt's QEMU user can open it")
    return Check("kvm device", False, False,
                 f"{device} is group {group} mode {mode:o}: libvirt's QEMU user cannot open it, so every domain "
                 f"start re-probes QEMU for about 60 s", f"chgrp kvm {device} && chmod 660 {device}")


def run_checks(cache_dir: Path | None = None, *, refresh: bool = False) -> list[Check]:
    """All host checks, concurrently, within BUDGET_S. Never raises; order is stable."""
    cache = cache_dir or default_cache_dir()
    plan: list[tuple[str, bool, Callable[[], Check]]] = [
        ("accelerator", True, lambda: check_accelerator(cache, refresh=refresh)),
        ("qemu-system-x86_64", True, lambda: check_tool("qemu-system-x86_64", ["--version"], "qemu-system-x86")),
        ("qemu-img", True, lambda: check_tool("qemu-img", ["--version"], "qemu-utils")),
        ("libvirt", True, check_libvirt),
        ("kvm device", False, check_kvm_device),
        ("Xvfb", False, lambda: check_tool("Xvfb", ["-version"], "xvfb", required=False)),
        ("debootstrap", True, lambda: check_tool("debootstrap", ["--version"], "debootstrap")),
        ("mkfs.ext4", True, lambda: check_tool("mkfs.ext4", ["-V"], "e2fsprogs")),
        ("disk space", True, lambda: check_disk(cache)),
    ]
    deadline = Deadline(BUDGET_S)
    pool = ThreadPoolExecutor(max_workers=len(plan), thread_name_prefix="doctor")
    futures = [pool.submit(fn) for _, _, fn in plan]
    checks: list[Check] = []
    for (name, required, _), future in zip(plan, futures, strict=True):
        try:
            checks.append(future.result(timeout=deadline.remaining()))
        except FutureTimeout:
            checks.append(Check(name, False, required, f"check did not finish within {BUDGET_S:g}s budget",
                                "re-run `weavegym doctor`; if it repeats, the tool behind this check hangs"))
        except Exception as exc:  # a bug in one check must not hide the others
            checks.append(Check(name, False, required, f"check crashed: {type(exc).__name__}: {exc}",
                                "report this as a weavegym bug"))
    pool.shutdown(wait=False, cancel_futures=True)
    return checks


def all_required_ok(checks: list[Check]) -> bool:
    """What `weavegym doctor` should turn into its exit status."""
    return all(c.ok for c in checks if c.required)


def render_checks(checks: list[Check], console: Console) -> None:
    """A table a person can act on: status, why, and the command to run."""
    table = Table(title="weavegym doctor", show_lines=False)
    table.add_column("check", style="bold")
    table.add_column("status", justify="center")
    table.add_column("detail", overflow="fold")
    table.add_column("fix", overflow="fold", style="cyan")
    colour = {"✓": "green", "✗": "red", "!": "yellow"}
    for c in checks:  # Text, not markup: details contain brackets such as "[Errno 2]"
        table.add_row(Text(c.name), Text(c.status, style=colour[c.status]), Text(c.detail), Text(c.fix))
    console.print(table)


def checks_to_json(checks: list[Check]) -> str:
    """Machine-readable form for CI and bug reports."""
    return json.dumps([{**asdict(c), "status": c.status} for c in checks], indent=2, ensure_ascii=False)
