"""`weavegym bench prepared`: what host-wide prepared states buy, against a cold boot in the same run.

The run keeps its states in a store of its own (a temporary cache folder pointed at the built image), so it
pays the cold boot itself and every figure is relative to that boot:

- the first env boots, freezes the booted desktop, sets up variant 0 and freezes it (the old first reset);
- it then prepares the rest of the pool, one setup each;
- new envs' first resets, each to a variant from the pool (a restore of the boot state, then of the variant);
- resets with a new seed drawn from the pool, and with the same seed;
- PSS and RSS per QEMU with 1, 2 and 4 envs alive and busy on one variant, since they map one RAM image.
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weavegym.core.paths import default_cache_dir
from weavegym.envs.tasks import get_task
from weavegym.envs.weave_env import WeaveEnv
from weavegym.ops.bench_env import timed_samples
from weavegym.ops.bench_scale import memory_mib, qemu_pids
from weavegym.vm_images.builder import require_image
from weavegym.vm_images.recipe import ImageRecipe


@dataclass(frozen=True)
class PreparedBenchConfig:
    task_id: str = "Weave-DevOps-1"
    variants: int = 8
    new_envs: int = 5
    resets: int = 12
    sizes: tuple[int, ...] = (1, 2, 4)


def _p50(samples: list[float]) -> dict[str, float]:
    return {"p50_s": round(statistics.median(samples), 2), "min_s": round(min(samples), 2),
            "max_s": round(max(samples), 2), "n": len(samples)}


def run_prepared_bench(config: PreparedBenchConfig, progress: Callable[[str], None] | None = None
                       ) -> dict[str, Any]:
    say = progress or (lambda _msg: None)
    task = get_task(config.task_id)
    image = require_image(ImageRecipe(task.profile, "debian-12"), default_cache_dir())
    store = Path(tempfile.mkdtemp(prefix="weavegym-bench-states-"))
    rng = random.Random(0)

    def new_env() -> WeaveEnv:
        return WeaveEnv(config.task_id, prepared_states=True, on_env_failure="raise", max_steps=10_000,
                        time_budget_s=86_400, task_variants=config.variants, seed_draws_variant=True,
                        max_task_snapshots=config.variants,
                        backend_options={"cache_dir": store, "image_dir": image.path, "accel": "tcg"})

    result: dict[str, Any] = {"bench": "prepared", "task": config.task_id, "variants": config.variants}
    first = new_env()
    envs: list[WeaveEnv] = []
    try:
        say("cold boot, boot state, variant 0")
        start = time.monotonic()
        first.reset(options={"task_seed": 0})
        result["first_reset_cold_s"] = round(time.monotonic() - start, 1)
        assert first.backend is not None
        result["cold_boot_s"] = round(first.backend.timings.get("cold_boot_s", 0.0), 1)
        say(f"preparing variants 1..{config.variants - 1}")
        variants = iter(range(1, config.variants))
        result["prepare_variant"] = _p50(timed_samples(
            lambda: first.reset(options={"task_seed": next(variants)}), config.variants - 1))
        say("resets with a new seed from the pool")
        result["reset_new_seed_from_pool"] = _p50(timed_samples(
            lambda: first.reset(seed=rng.randrange(1 << 30)), config.resets))
        say("resets with the same seed")
        result["reset_same_seed"] = _p50(timed_samples(lambda: first.reset(options={"task_seed": 0}), config.resets))
        first.close()
        say("new envs' first resets")
        samples = []
        for _ in range(config.new_envs):
            env = new_env()
            try:
                start = time.monotonic()
                env.reset(options={"task_seed": rng.randrange(config.variants)})
                samples.append(time.monotonic() - start)
            finally:
                env.close()
        result["new_env_first_reset"] = _p50(samples)
        new_p50 = result["new_env_first_reset"]["p50_s"]
        result["cold_boot_over_new_env"] = round(result["cold_boot_s"] / max(new_p50, 0.01), 1)
        result["first_reset_cold_over_new_env"] = round(result["first_reset_cold_s"] / max(new_p50, 0.01), 1)
        result["memory"] = _memory(config, new_env, envs, say)
        return result
    finally:
        for env in [first, *envs]:
            env.close()
        shutil.rmtree(store, ignore_errors=True)


def _memory(config: PreparedBenchConfig, new_env: Callable[[], WeaveEnv], envs: list[WeaveEnv],
            say: Callable[[str], None]) -> dict[str, dict[str, float]]:
    """PSS and RSS per QEMU with 1, 2, 4... envs alive on one variant (as a vector env training on one task
    state), each after a reset and a few GUI steps: PSS splits the RAM image's pages they all map."""
    before = set(qemu_pids())
    sizes: dict[str, dict[str, float]] = {}
    for size in sorted(config.sizes):
        while len(envs) < size:
            env = new_env()
            env.reset(options={"task_seed": 0})
            envs.append(env)
        say(f"memory with {size} env(s)")
        for env in envs:
            for i in range(5):
                env.step({"kind": "move", "x": 100 + i, "y": 100})
        pids = [p for p in qemu_pids() if p not in before]
        sizes[str(size)] = {
            "qemu_pss_mib_per_env": round(sum(memory_mib(p, "Pss") for p in pids) / max(1, len(pids)), 0),
            "qemu_rss_mib_per_env": round(sum(memory_mib(p, "Rss") for p in pids) / max(1, len(pids)), 0),
        }
    return sizes
