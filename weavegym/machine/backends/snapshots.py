"""In-process VM snapshots (HMP savevm/loadvm): the one place that issues them.

libvirt 9.0's ``revertToSnapshot`` on a running domain kills QEMU and starts a
new one with ``-loadvm`` (3-8 s measured here, VNC clients dropped, autoports may
move). ``loadvm`` through the monitor keeps the same QEMU process, so port
forwards and VNC survive, and takes about 0.5-0.7 s here. libvirt does not see
these snapshots; they live inside the VM's qcow2 overlay and die with it.
"""

from __future__ import annotations

import time

from weavegym.core.errors import SnapshotError
from weavegym.core.extras import missing_extra

try:
    import libvirt
    import libvirt_qemu
except ModuleNotFoundError as _missing:  # an optional extra (core/extras.py)
    raise missing_extra(_missing) from None


class InternalSnapshots:
    def __init__(self, domain: libvirt.virDomain) -> None:
        self._domain = domain

    def hmp(self, command: str) -> str:
        try:
            return libvirt_qemu.qemuMonitorCommand(
                self._domain, command, libvirt_qemu.VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP)
        except libvirt.libvirtError as exc:
            raise SnapshotError(f"monitor command {command!r} failed: {exc}") from None

    def _checked(self, command: str) -> None:
        out = self.hmp(command).strip()
        # HMP reports failures as text with a normal return, e.g. "Error: Snapshot 'x' does not exist".
        if "rror" in out or "does not exist" in out or "No space" in out:
            if "No space left" in out:
                raise SnapshotError(f"{command!r}: the disk holding the VM overlay is full: {out}")
            raise SnapshotError(f"{command!r}: {out}")

    def save(self, name: str) -> float:
        start = time.monotonic()
        self._checked(f"savevm {name}")
        return time.monotonic() - start

    def load(self, name: str) -> float:
        start = time.monotonic()
        self._checked(f"loadvm {name}")
        return time.monotonic() - start

    def delete(self, name: str) -> None:
        self._checked(f"delvm {name}")

    def rebind(self, domain: libvirt.virDomain) -> None:
        """Point at a new QEMU process of the same VM (after a crash recovery)."""
        self._domain = domain
