"""`weavegym bench vm`: cold boot, snapshot save, and reset both ways, in one run on one VM.

The two reset paths compared:
- fast path: HMP ``loadvm`` inside the running QEMU (what LibvirtVM.reset uses);
- libvirt's ``revertToSnapshot`` of a snapshot libvirt manages itself, which on
  libvirt 9.0 kills QEMU and starts a new process with ``-loadvm``.
Each reset is timed until the agent answers again, since that is when an env
can take its next step.
"""

from __future__ import annotations

import contextlib
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from weavegym.core.extras import missing_extra
from weavegym.machine.backends.libvirt_vm import LibvirtConfig, LibvirtVM

try:
    import libvirt
except ModuleNotFoundError as _missing:  # an optional extra (core/extras.py)
    raise missing_extra(_missing) from None

LIBVIRT_SNAPSHOT_XML = "<domainsnapshot><name>wg-libvirt-ready</name><memory snapshot='internal'/></domainsnapshot>"


@dataclass(frozen=True)
class VMBenchConfig:
    resets: int = 10
    libvirt_resets: int = 3  # each costs ~10 s here, so fewer
    vm: LibvirtConfig = field(default_factory=LibvirtConfig)


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_s": round(statistics.median(ordered), 3), "p95_s": round(p95, 3),
            "min_s": round(ordered[0], 3), "max_s": round(ordered[-1], 3), "n": len(ordered)}


def run_vm_bench(config: VMBenchConfig, progress: Callable[[str], None] | None = None) -> dict[str, object]:
    say = progress or (lambda _msg: None)
    say("cold boot")
    with LibvirtVM(config.vm) as vm:
        assert vm.client is not None
        result: dict[str, object] = {
            "bench": "vm",
            "accelerator": "kvm" if "type='kvm'" in vm.domain.XMLDesc() else "tcg",
            "memory_mib": config.vm.memory_mib,
            "vcpus": config.vm.vcpus,
            "screen": f"{config.vm.screen[0]}x{config.vm.screen[1]}",
            "cold_boot_s": round(vm.timings["cold_boot_s"], 2),
            "snapshot_save_s": round(vm.timings["snapshot_save_s"], 2),
        }
        fast = []
        for i in range(config.resets):
            say(f"fast reset {i + 1}/{config.resets}")
            vm.client.exec("echo dirty > /tmp/dirty", timeout=10)
            fast.append(vm.reset())
        result["reset_fast_loadvm"] = _stats(fast)
        result["loadvm_only"] = _stats([_timed(lambda: vm.snapshots.load("ready")) for _ in range(3)])
        vm.reset()

        say("libvirt snapshot")
        start = time.monotonic()
        try:
            snap = vm.domain.snapshotCreateXML(LIBVIRT_SNAPSHOT_XML, 0)
        except libvirt.libvirtError as exc:
            result["reset_libvirt_revert"] = {"error": str(exc)}
            return result
        result["libvirt_snapshot_create_s"] = round(time.monotonic() - start, 2)
        slow = []
        for i in range(config.libvirt_resets):
            say(f"libvirt revert {i + 1}/{config.libvirt_resets}")
            start = time.monotonic()
            vm.domain.revertToSnapshot(snap, libvirt.VIR_DOMAIN_SNAPSHOT_REVERT_RUNNING)
            vm.client.reconnect()
            vm.client.wait_ready(config.vm.reset_timeout_s)
            slow.append(time.monotonic() - start)
        result["reset_libvirt_revert"] = _stats(slow)
        result["vnc_port_after_revert"] = _vnc_port(vm)
        result["vnc_port_configured"] = vm.vnc.port
        p50_fast = result["reset_fast_loadvm"]["p50_s"]  # type: ignore[index]
        result["speedup_p50"] = round(result["reset_libvirt_revert"]["p50_s"] / p50_fast, 1)  # type: ignore[index]
        with contextlib.suppress(libvirt.libvirtError):
            snap.delete(0)
        return result


def _timed(fn: Callable[[], object]) -> float:
    start = time.monotonic()
    fn()
    return time.monotonic() - start


def _vnc_port(vm: LibvirtVM) -> int:
    match = re.search(r"<graphics type='vnc' port='(\d+)'", vm.domain.XMLDesc())
    return int(match.group(1)) if match else -1
