"""The worker processes of `validate --workers N` and `prepare --workers N` do not outlive a killed parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from weavegym.core.deadline import wait_for

# A parent that starts a pool the way the CLI does, gives each worker an hour-long job, prints their pids.
_PARENT = textwrap.dedent("""
    import multiprocessing as mp, os, sys, time
    from concurrent.futures import ProcessPoolExecutor
    from weavegym.cli import _unwind_on_sigterm
    pool = ProcessPoolExecutor(max_workers=2, mp_context=mp.get_context("spawn"), initializer=_unwind_on_sigterm,
                               initargs=(os.getpid(),))
    futures = [pool.submit(time.sleep, 3600) for _ in range(2)]
    while len(pool._processes) < 2:
        time.sleep(0.05)
    print(" ".join(str(pid) for pid in pool._processes), flush=True)
    time.sleep(3600)
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][:1] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def test_workers_unwind_when_their_parent_is_killed_outright() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True)
    try:
        workers = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(workers) == 2 and all(_alive(pid) for pid in workers)
        wait_for(lambda: all(os.path.exists(f"/proc/{pid}") for pid in workers), 5, what="the workers running")
        os.kill(parent.pid, signal.SIGKILL)  # no handler runs: only the kernel can tell the workers
        parent.wait()
        wait_for(lambda: not any(_alive(pid) for pid in workers), 30, what="the orphaned workers to exit")
    finally:
        parent.kill()
        parent.wait()
