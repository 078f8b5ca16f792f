"""Saving and loading a running VM's device state through QEMU's migration, over a file descriptor.

QEMU 7.2 has no ``file:`` migration target, and libvirt's seccomp sandbox (``spawn=deny``) kills a QEMU
that runs an ``exec:`` one, so the file goes to QEMU as a descriptor (``getfd`` through libvirt's
monitor passthrough with files) and the migration uses ``fd:``. With ``x-ignore-shared``, RAM that lives
in a shared file-backed memory object stays out of the stream: the stream is a few MB, and a restore maps
the RAM file instead of reading it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from weavegym.core.deadline import wait_for
from weavegym.core.errors import SnapshotError
from weavegym.core.extras import missing_extra

try:
    import libvirt
    import libvirt_qemu
except ModuleNotFoundError as _missing:  # an optional extra (core/extras.py)
    raise missing_extra(_missing) from None

_FD_NAME = "weavegym-state"


def _qmp(domain: libvirt.virDomain, command: str, files: list[int] | None = None, **arguments: Any) -> Any:
    message = json.dumps({"execute": command, "arguments": arguments} if arguments else {"execute": command})
    try:
        if files:
            out, _ = libvirt_qemu.qemuMonitorCommandWithFiles(domain, message, files, 0)
        else:
            out = libvirt_qemu.qemuMonitorCommand(domain, message, 0)
    except libvirt.libvirtError as exc:
        raise SnapshotError(f"QMP {command} failed: {exc}") from None
    reply = json.loads(out)
    if "error" in reply:
        raise SnapshotError(f"QMP {command}: {reply['error'].get('desc', reply['error'])}")
    return reply.get("return")


def _ignore_shared_ram(domain: libvirt.virDomain) -> None:
    _qmp(domain, "migrate-set-capabilities",
         capabilities=[{"capability": "x-ignore-shared", "state": True}])


def _await_migration(domain: libvirt.virDomain, timeout_s: float, what: str) -> None:
    def finished() -> bool:
        status = (_qmp(domain, "query-migrate") or {}).get("status", "")
        if status in ("failed", "cancelled"):
            raise SnapshotError(f"{what}: the migration {status}")
        return status == "completed"

    try:
        wait_for(finished, timeout_s, what=what, poll=0.02, max_poll=0.2)
    except TimeoutError as exc:
        raise SnapshotError(str(exc)) from None


def save_device_state(domain: libvirt.virDomain, path: Path, timeout_s: float = 120.0) -> float:
    """Write the VM's device state (not its shared RAM) to ``path``; the VM is left paused. Returns seconds."""
    start = time.monotonic()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        _qmp(domain, "getfd", files=[fd], fdname=_FD_NAME)
    finally:
        os.close(fd)  # QEMU holds its own copy now
    _ignore_shared_ram(domain)
    _qmp(domain, "migrate", uri=f"fd:{_FD_NAME}")
    _await_migration(domain, timeout_s, f"saving the device state to {path}")
    return time.monotonic() - start


def load_device_state(domain: libvirt.virDomain, path: Path, timeout_s: float = 60.0) -> float:
    """Feed ``path`` to a QEMU started with ``-incoming defer`` (and paused); returns seconds."""
    start = time.monotonic()
    fd = os.open(path, os.O_RDONLY)
    try:
        _qmp(domain, "getfd", files=[fd], fdname=_FD_NAME)
    finally:
        os.close(fd)
    _ignore_shared_ram(domain)
    _qmp(domain, "migrate-incoming", uri=f"fd:{_FD_NAME}")
    _await_migration(domain, timeout_s, f"restoring the device state from {path}")
    return time.monotonic() - start
