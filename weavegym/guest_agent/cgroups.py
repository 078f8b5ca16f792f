"""The episode's shell commands in a cgroup of their own, out of the agent's way (cgroup v2).

Why: every command the agent starts used to share the agent unit's cgroup and so its TasksMax. A fork
bomb from the shell then left the agent unable to start anything, itself included. The guest image runs
a placeholder unit, ``weavegym-episode.service`` (TasksMax=256), whose only job is to own a cgroup; the
agent moves each command of a no-display account (the workspace) into it before the command runs. A
runaway shell then hits that unit's ceiling while the agent, the checker (root) and the desktop keep
working. The group has no children and no controllers enabled below it, so cgroup v2's rule against
processes in inner groups never applies, and systemd keeps managing both units as usual.

Where that unit does not exist (a host Xvfb in tests, a machine reached by ssh), ``episode_cgroup``
returns None and the agent falls back to a per-account RLIMIT_NPROC (see execution.py).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

EPISODE_UNIT_CGROUP = Path("/sys/fs/cgroup/system.slice/weavegym-episode.service")

log = logging.getLogger("weavegym.guest_agent.cgroups")


def episode_cgroup(folder: Path = EPISODE_UNIT_CGROUP, wait_s: float = 20.0) -> str | None:
    """The ``cgroup.procs`` file episode commands join (a process joins by writing 0 to it), or None.

    The unit is ordered before the agent, but it may still be starting: wait for its folder, with a deadline.
    """
    procs = folder / "cgroup.procs"
    deadline = time.monotonic() + wait_s
    while not procs.exists():
        if time.monotonic() > deadline:
            log.warning("no cgroup at %s: the episode's commands are limited by RLIMIT_NPROC only", folder)
            return None
        time.sleep(0.1)  # polling for systemd to create the unit's cgroup, bounded by the deadline above
    if os.geteuid() != 0 or not os.access(procs, os.W_OK):
        log.warning("cannot write %s: the episode's commands are limited by RLIMIT_NPROC only", procs)
        return None
    log.info("the episode's commands run in %s", folder)
    return str(procs)
