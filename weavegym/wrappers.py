"""Wrappers for RL libraries that want plain arrays instead of WeaveEnv's Dict spaces.

Most RL libraries (Stable-Baselines3, CleanRL's PPO, RLlib's default models) take a ``Box`` observation and a
``Discrete``/``MultiDiscrete`` action. Shape the env first with ``gym.make`` options, then wrap it::

    env = gym.make("Weave-DevOps-1", action_kinds=["click", "key", "scroll"], observation_keys=["screen"],
                   observation_size=(128, 72), grayscale=True)
    env = MultiDiscreteActions(ScreenObservation(env))

``ScreenObservation`` also makes Gymnasium's image wrappers (``ResizeObservation``,
``GrayscaleObservation``, ``FrameStackObservation``) usable, since they refuse Dict observations.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box, Dict, Discrete, MultiDiscrete


class ScreenObservation(gym.ObservationWrapper[np.ndarray, Any, dict[str, Any]]):
    """The observation is the screen array alone (``Box`` of uint8, height x width x channels)."""

    def __init__(self, env: gym.Env[dict[str, Any], Any]) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, Dict) or not isinstance(space.spaces.get("screen"), Box):
            raise ValueError("ScreenObservation needs a Dict observation with a 'screen' Box (observation_keys must "
                             "include 'screen')")
        self.observation_space = space["screen"]

    def observation(self, observation: dict[str, Any]) -> np.ndarray:
        return observation["screen"]


class MultiDiscreteActions(gym.ActionWrapper[Any, np.ndarray, dict[str, Any]]):
    """The action is one integer per field of the env's Dict action space, in the Dict's key order.

    Every field must be ``Discrete``: choose ``action_kinds`` without free text (``type``, ``shell``,
    ``python``) or seconds (``wait``), and keep ``coordinates="discrete"``. ``fields`` names the columns.
    """

    def __init__(self, env: gym.Env[Any, dict[str, Any]]) -> None:
        super().__init__(env)
        space = env.action_space
        if not isinstance(space, Dict):
            raise ValueError(f"MultiDiscreteActions needs a Dict action space, got {type(space).__name__}")
        continuous = [name for name, sub in space.spaces.items() if not isinstance(sub, Discrete)]
        if continuous:
            raise ValueError(f"MultiDiscreteActions needs every action field Discrete; {', '.join(continuous)} is not "
                             "(leave out the kinds that use it with action_kinds=, and use coordinates='discrete')")
        subspaces: list[Discrete] = list(space.spaces.values())  # type: ignore[arg-type]
        self.fields: tuple[str, ...] = tuple(space.spaces)
        self.action_space = MultiDiscrete([int(s.n) for s in subspaces], dtype=np.int64,
                                          start=[int(s.start) for s in subspaces])

    def action(self, action: np.ndarray) -> dict[str, Any]:
        values = np.asarray(action).reshape(-1)
        if values.shape != (len(self.fields),):
            raise ValueError(f"expected {len(self.fields)} integers ({', '.join(self.fields)}), got shape "
                             f"{np.asarray(action).shape}")
        return {name: np.int64(value) for name, value in zip(self.fields, values, strict=True)}
