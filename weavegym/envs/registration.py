"""Registers every task with Gymnasium, so `gym.make("Weave-DevOps-1")` works after `import weavegym`."""

from __future__ import annotations

import gymnasium

from weavegym.envs.tasks import all_tasks

ENTRY_POINT = "weavegym.envs.weave_env:WeaveEnv"


def register_tasks() -> None:
    for task in all_tasks():
        if task.id in gymnasium.registry:
            continue
        # nondeterministic: a desktop VM is not a pure function of (seed, actions); per-step wall-clock
        # timings in `info` and GUI rendering races make repeated steps differ slightly. Seeded resets
        # are pixel-identical (a snapshot load); tests/test_env_gym.py checks that directly.
        # No max_episode_steps: a TimeLimit wrapper would truncate without running the checker, so the
        # env truncates itself at `max_steps` and scores the final state.
        gymnasium.register(id=task.id, entry_point=ENTRY_POINT, kwargs={"task_id": task.id},
                           nondeterministic=True, disable_env_checker=False)
