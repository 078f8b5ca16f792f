"""`weavegym prepare`: set task variants up once per host, as prepared states every env here restores.

One env per task (``EnvConfig.prepared_states``) resets to each variant in turn. A variant that is not in
the host's store yet is set up and frozen there (under its cross-process lock, so two workers or two
`prepare` runs never build the same one); one that is there costs a restore. The first task on a host
also builds the booted desktop that every variant starts from.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from weavegym.envs.weave_env import WeaveEnv


def prepare_task(task_id: str, variants: list[int],
                 on_variant: Callable[[int, dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Reset ``task_id``'s env to every variant; per variant: whether it was built now, and the seconds."""
    results = []
    env = WeaveEnv(task_id, prepared_states=True, on_env_failure="raise")
    try:
        for variant in variants:
            start = time.monotonic()
            _obs, info = env.reset(options={"task_seed": variant})
            backend = env.backend
            result = {"task_id": task_id, "variant": variant, "built": info["snapshot"] == "created",
                      "seconds": round(time.monotonic() - start, 1),
                      "setup_s": round(backend.timings.get("last_setup_s", 0.0), 1) if backend else 0.0}
            if backend is not None:
                backend.timings.pop("last_setup_s", None)
            results.append(result)
            if on_variant is not None:
                on_variant(variant, result)
    finally:
        env.close()
    return results


def prepare_by_id(task_id: str, variants: list[int]) -> list[dict[str, Any]]:
    """For worker processes (spawned): the same, with nothing to call back."""
    return prepare_task(task_id, variants)
