"""A VM that dies with its owner: one small watchdog process per domain destroys it when the owner is gone.

libvirt's own answer, ``VIR_DOMAIN_START_AUTODESTROY``, ties a domain to one libvirt connection, so a
libvirtd restart (which the backend survives by reconnecting) would kill the VM as well. The watchdog
instead holds the read end of a pipe whose write end only the owner has. The kernel closes that end when
the owner exits, however it exits (SIGKILL, the OOM killer, ``terminate()`` on a timeout), and the
watchdog then destroys the domain and removes its run folder. A normal ``close()`` first tears the VM down
itself and then releases the lease, so the watchdog exits without touching anything.

Run as a script (``python lease.py URI NAME [RUN_DIR]``), not as ``-m``: it must start in milliseconds and
import nothing but libvirt, because there is one per VM.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

RELEASE = b"release\n"


class DomainLease:
    def __init__(self, uri: str, name: str, run_dir: str = "") -> None:
        read_end, self._write_end = os.pipe()  # not inheritable (PEP 446): no other child keeps it open
        try:
            # Its own session: a Ctrl-C or a killpg aimed at the owner's group must not take it down first.
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), uri, name, run_dir], stdin=read_end,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        finally:
            os.close(read_end)

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def release(self) -> None:
        """The owner tore the VM down itself: let the watchdog go without doing anything. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            os.write(self._write_end, RELEASE)
        except OSError:
            pass  # the watchdog is already gone
        os.close(self._write_end)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _watch(uri: str, name: str, run_dir: str) -> None:
    # The lease ends only through its pipe: a `pkill -f weavegym` or a Ctrl-C meant for the owner must not
    # end it first and leave the VM behind (SIGKILL still can; `weavegym gc` then finds the domain).
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    received = b""
    while chunk := os.read(0, 64):
        received += chunk
    if received.startswith(RELEASE):
        return
    import libvirt

    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    try:
        conn = libvirt.open(uri)
        try:
            conn.lookupByName(name).destroy()
        finally:
            conn.close()
    except libvirt.libvirtError:
        pass  # already gone, or libvirtd is down (then `weavegym gc` finds the domain later)
    if run_dir:
        shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    _watch(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
