"""The reference points every score is read against: chance (random), doing nothing (noop) and the oracle.

Random and noop bound a task from below (they must score ~0), the oracle from above (it must score 1.0); an
LLM agent's score means something only between the two.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import numpy as np

from weavegym.baselines.policy import EpisodeStart
from weavegym.envs.space_layout import action_space
from weavegym.envs.task import ActionLike, OracleContext
from weavegym.envs.tasks import get_task

DONE: dict[str, Any] = {"kind": "done"}


class RandomAgent:
    """Samples the flat Gym action space; reproducible because it is seeded with ``seed`` + the episode's seed."""

    name = "random"
    privileged = False

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)
        self._space: Any = None

    def start(self, episode: EpisodeStart) -> None:
        # A private copy: seeding the env's own space would change what other users of it sample.
        space = copy.deepcopy(episode.action_space) if episode.action_space is not None else None
        self._space = space if space is not None else action_space(episode.screen)
        self._space.seed(self.seed + int(episode.seed))

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> ActionLike:
        if self._space is None:
            raise RuntimeError("call start() before act()")
        sample = self._space.sample()
        return {key: _plain(value) for key, value in sample.items()} if isinstance(sample, dict) else sample

    def transcript(self) -> list[dict[str, Any]] | None:
        return None

    def close(self) -> None:
        self._space = None


class NoopAgent:
    """Says ``done`` at once: any score it gets is a task that rewards doing nothing."""

    name = "noop"
    privileged = False

    def start(self, episode: EpisodeStart) -> None:
        pass

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> ActionLike:
        return dict(DONE)

    def transcript(self) -> list[dict[str, Any]] | None:
        return None

    def close(self) -> None:
        pass


class OracleAgent:
    """Replays the task's reference solution; privileged, because the solution reads the ground truth."""

    name = "oracle"
    privileged = True

    def __init__(self) -> None:
        self._context: OracleContext | None = None
        self._actions: Iterator[ActionLike] | None = None

    def start(self, episode: EpisodeStart) -> None:
        if episode.oracle_context is None:
            raise ValueError("the oracle is privileged: start it with EpisodeStart.oracle_context (the task's truth)")
        self.close()
        self._context = episode.oracle_context
        self._actions = iter(get_task(episode.task_id).oracle(self._context))

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> ActionLike:
        if self._context is None or self._actions is None:
            raise RuntimeError("call start() before act()")
        # The oracle's generator reads ctx.obs/ctx.info lazily, at its next yield, so update them first.
        self._context.obs, self._context.info = obs, info
        action = next(self._actions, None)
        return dict(DONE) if action is None else action

    def transcript(self) -> list[dict[str, Any]] | None:
        return None

    def close(self) -> None:
        close = getattr(self._actions, "close", None)
        if close is not None:
            close()  # runs the generator's finally blocks now rather than at garbage collection
        self._context, self._actions = None, None


def _plain(value: Any) -> Any:
    """Numpy scalars and 0-d arrays as Python values, so sampled actions can be logged as JSON."""
    if isinstance(value, np.ndarray | np.generic):
        return value.item() if value.ndim == 0 else value.tolist()
    return value
