"""bench scale's memory figures read the kernel's own accounting (smaps_rollup), here for real processes."""

from __future__ import annotations

import mmap
import os
import signal

from weavegym.core.deadline import wait_for
from weavegym.ops.bench_scale import memory_mib

SIZE = 64 << 20


def test_pss_splits_shared_pages_and_rss_does_not() -> None:
    """Two processes use one 64 MiB shared mapping: each counts all of it in RSS, half of it in PSS."""
    shared = mmap.mmap(-1, SIZE, flags=mmap.MAP_SHARED)
    shared.write(b"x" * SIZE)  # every page resident, in this process
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the second user: touches every page, says so, then waits to be killed
        total = sum(shared[i] for i in range(0, SIZE, 4096))
        os.write(ready_w, b"1" if total else b"0")
        while True:
            signal.pause()
    try:
        assert os.read(ready_r, 1) == b"1"
        wait_for(lambda: memory_mib(pid, "Rss") >= 60, 10, what="the child's RSS to hold the mapping")
        rss, pss = memory_mib(os.getpid(), "Rss"), memory_mib(os.getpid(), "Pss")
        assert rss - pss >= 28, f"RSS {rss:.0f} MiB, PSS {pss:.0f} MiB: the child's half is not split off"
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        shared.close()
        os.close(ready_r)
        os.close(ready_w)
