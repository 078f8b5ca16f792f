"""In-process VM snapshots (HMP savevm/loadvm), and the one place that keeps track of them.

libvirt 9.0's ``revertToSnapshot`` on a running domain kills QEMU and starts a
new one with ``-loadvm`` (9-10 s here, VNC clients dropped, autoports may
move). ``loadvm`` through the monitor keeps the same QEMU process, so port
forwards and VNC survive, and takes 1.1-1.5 s. libvirt does not see these
snapshots, so this class is their bookkeeping.
"""

from __future__ import annotations

import time

import libvirt
import libvirt_qemu

from weavegym.envs.errors import SnapshotError


class InternalSnapshots:
    def __init__(self, domain: libvirt.virDomain) -> None:
        self._domain = domain
        self._known: dict[str, float] = {}  # name -> when it was saved (monotonic)

    def hmp(self, command: str) -> str:
        try:
            return libvirt_qemu.qemuMonitorCommand(
                self._domain, command, libvirt_qemu.VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP)
        except libvirt.libvirtError as exc:
            raise SnapshotError(f"monitor command {command!r} failed: {exc}") from None

    def _checked(self, command: str) -> None:
        out = self.hmp(command).strip()
        # HMP reports failures as text with a normal return, e.g. "Error: Snapshot 'x' does not exist".
        if out and ("rror" in out or "not" in out.lower()):
            if "No space left" in out:
                raise SnapshotError(f"{command!r}: the disk holding the VM overlay is full: {out}")
            raise SnapshotError(f"{command!r}: {out}")

    def save(self, name: str) -> float:
        start = time.monotonic()
        self._checked(f"savevm {name}")
        self._known[name] = time.monotonic()
        return time.monotonic() - start

    def load(self, name: str) -> float:
        start = time.monotonic()
        self._checked(f"loadvm {name}")
        return time.monotonic() - start

    def delete(self, name: str) -> None:
        self._checked(f"delvm {name}")
        self._known.pop(name, None)

    def names(self) -> list[str]:
        """Snapshots stored in the disk image (what `info snapshots` lists), not just this session's."""
        names = []
        for line in self.hmp("info snapshots").splitlines():
            parts = line.split()
            if (len(parts) >= 2 and parts[0].isdigit()) or (len(parts) >= 2 and parts[0] == "--"):
                names.append(parts[1])
        return names

    def has(self, name: str) -> bool:
        return name in self._known or name in self.names()

    def rebind(self, domain: libvirt.virDomain) -> None:
        """Point at a new QEMU process of the same VM (after a crash recovery)."""
        self._domain = domain
