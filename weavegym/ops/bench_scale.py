"""`weavegym bench scale`: env-steps per second with 1, 2 and 4 envs on this host, in one run.

Each size is a fresh ``gym.make_vec(..., vectorization_mode="async")`` with
shared memory; its VMs boot, reset to the task snapshot, then all step together
with cheap GUI actions (a pointer move plus a settled frame), which measures
the env machinery rather than any one app. It also records what each VM costs
the host: QEMU's resident memory and CPU time per env-step.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np

from weavegym.envs.registration import register_tasks


@dataclass(frozen=True)
class ScaleBenchConfig:
    task_id: str = "Weave-Productivity-1"
    sizes: tuple[int, ...] = (1, 2, 4)
    steps: int = 20
    prepared_states: bool = False  # EnvConfig.prepared_states: envs restore the host's states, RAM shared


def qemu_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().startswith("qemu-system"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def memory_mib(pid: int, field: str) -> float:
    """A process's ``Rss`` or ``Pss`` in MiB (smaps_rollup). PSS splits each shared page among its users, so
    it is what one more env costs when envs share memory (the image's page cache, KSM-merged guest RAM)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_scale_bench(config: ScaleBenchConfig, progress: Callable[[str], None] | None = None) -> dict[str, object]:
    register_tasks()
    say = progress or (lambda _msg: None)
    before = set(qemu_pids())
    result: dict[str, object] = {"bench": "scale", "task": config.task_id, "host_cpus": os.cpu_count(),
                                 "prepared_states": config.prepared_states,
                                 "steps_per_size": config.steps, "sizes": {}}
    for n in config.sizes:
        say(f"{n} env(s): boot + task setup")
        envs = gym.make_vec(config.task_id, num_envs=n, vectorization_mode="async",
                            vector_kwargs={"shared_memory": True}, prepared_states=config.prepared_states)
        try:
            start = time.monotonic()
            envs.reset(seed=list(range(n)))
            ready_s = time.monotonic() - start
            pids = [p for p in qemu_pids() if p not in before]
            cpu0 = sum(_cpu_s(p) for p in pids)
            say(f"{n} env(s): {config.steps} steps")
            start = time.monotonic()
            for i in range(config.steps):
                actions = {"kind": np.full(n, 0), "x": np.full(n, 100 + i % 2), "y": np.full(n, 100)}
                envs.step(_complete(envs, actions, n))
            elapsed = time.monotonic() - start
            cpu = sum(_cpu_s(p) for p in pids) - cpu0
            result["sizes"][str(n)] = {  # type: ignore[index]
                "boot_and_setup_s": round(ready_s, 1),
                "env_steps_per_s": round(n * config.steps / elapsed, 2),
                "step_wall_ms_mean": round(1000 * elapsed / config.steps, 1),
                "qemu_rss_mib_per_env": round(sum(memory_mib(p, "Rss") for p in pids) / max(1, len(pids)), 0),
                "qemu_pss_mib_per_env": round(sum(memory_mib(p, "Pss") for p in pids) / max(1, len(pids)), 0),
                "qemu_cpu_s_per_env_step": round(cpu / (n * config.steps), 3),
            }
        finally:
            envs.close()
    return result


def _complete(envs: object, partial: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """A batched action dict: every field of the Dict space, with ``partial`` overriding the sample."""
    sample = envs.action_space.sample()  # type: ignore[attr-defined]
    sample.update(partial)
    return sample
