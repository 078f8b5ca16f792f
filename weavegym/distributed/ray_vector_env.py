"""Many hosts through Ray: one actor per env, a Gymnasium ``VectorEnv`` that fans out to them.

``pip install weavegym[ray]``. RL stacks (verl, SkyRL, ROLL) already run on Ray,
so scaling out means placing env actors on the nodes that can run VMs, not a
scheduler of our own:

* Each actor holds one ``gym.make(env_id)`` (one VM) and asks for the custom
  resource ``weavegym_vm`` (start VM hosts with ``ray start --resources='{"weavegym_vm": 8}'``),
  so actors land only on nodes that advertise it.
* Before any actor is created the cluster's resources are checked, and actors
  must come up within ``placement_timeout_s``: a cluster without the resource
  gives a clear error instead of actors pending forever.
* Observations come back as actor return values, which Ray keeps in its object
  store (screens are numpy arrays, read zero-copy) and copies into the batch.
* An actor that dies (node lost, OOM, killed) is replaced by a fresh one that
  resumes its slot's seed. The step reports that env as truncated with
  ``info["actor_restarted"]`` giving the reason, and its next step resets it
  (Gymnasium's next-step autoreset). An exception inside an env costs only
  that episode (truncated, ``info["env_failure"]``); the actor stays.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from weavegym.core.errors import BackendError, HostSetupError
from weavegym.core.extras import missing_extra
from weavegym.envs.registration import register_tasks

RESOURCE = "weavegym_vm"


@dataclass(frozen=True)
class RayVectorConfig:
    env_id: str
    num_envs: int
    make_kwargs: dict[str, Any] = field(default_factory=dict)
    resource: str = RESOURCE
    resource_per_env: float = 1.0
    # QEMU, not the actor's Python, burns the CPU; asking Ray for none keeps actors placeable next to it.
    num_cpus_per_env: float = 0.0
    placement_timeout_s: float = 120.0
    call_timeout_s: float = 900.0  # one step or reset, VM boot included


class EnvWorker:
    """The actor body: one env, with next-step autoreset kept here so a replaced actor simply starts fresh.

    An exception inside the env (an error that ``on_env_failure="truncate"`` does not cover, or any bug)
    costs that episode, not the actor or the batch: the step reports it truncated with ``info["env_failure"]``
    and the next step resets. ``first_seed`` is the seed of the first reset, so an actor that replaces a
    lost one resumes its slot's seed instead of drawing a fresh variant.
    """

    def __init__(self, env_id: str, make_kwargs: dict[str, Any], first_seed: int | None = None) -> None:
        register_tasks()  # in the actor's own process
        self.env = gym.make(env_id, **make_kwargs)
        self.needs_reset = True
        self.next_seed = first_seed
        self.last_obs: Any = None

    def ready(self) -> int:
        return os.getpid()

    def task_seed(self) -> int | None:
        return self.env.unwrapped.task_seed  # type: ignore[attr-defined]

    def reset(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.needs_reset, self.next_seed, self.last_obs = False, None, obs
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self.needs_reset:
            obs, info = self.reset(self.next_seed, None)
            return obs, 0.0, False, False, info
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except Exception as exc:  # reported in info, not swallowed: the episode ends with it
            self.needs_reset = True
            return self.last_obs, 0.0, False, True, {"env_failure": f"{type(exc).__name__}: {exc}",
                                                     "end_reason": "env_failure"}
        self.needs_reset, self.last_obs = bool(terminated or truncated), obs
        return obs, float(reward), bool(terminated), bool(truncated), info

    def close(self) -> None:
        self.env.close()


class RayVectorEnv(VectorEnv):
    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, env_id: str, num_envs: int, *, config: RayVectorConfig | None = None,
                 **make_kwargs: Any) -> None:
        try:
            import ray
        except ModuleNotFoundError as exc:
            raise missing_extra(exc) from None
        self._ray = ray
        self.config = config or RayVectorConfig(env_id, num_envs, make_kwargs)
        self.num_envs = self.config.num_envs
        probe = gym.make(self.config.env_id, **self.config.make_kwargs)  # cheap: the VM boots on reset
        self.single_observation_space = probe.observation_space
        self.single_action_space = probe.action_space
        probe.close()
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._last_obs: list[Any] = [None] * self.num_envs
        self._seeds: list[int | None] = [None] * self.num_envs  # each slot's last reset seed
        self.restarts = 0
        if not ray.is_initialized():
            ray.init()
        self._check_resources()
        self._actors = [self._new_actor(None) for _ in range(self.num_envs)]
        self._await_placement(self._actors)

    # -- placement -------------------------------------------------------------------------------
    def _check_resources(self) -> None:
        c = self.config
        need = c.resource_per_env * c.num_envs
        have = self._ray.cluster_resources().get(c.resource, 0.0)
        if have < need:
            raise HostSetupError(
                f"the Ray cluster advertises {have:g} of resource {c.resource!r}, but {c.num_envs} envs need "
                f"{need:g}. Start each VM host with `ray start --resources='{{\"{c.resource}\": N}}'` "
                f"(N = VMs it can run), or ray.init(resources={{'{c.resource}': N}}) locally")

    def _new_actor(self, first_seed: int | None) -> Any:
        c = self.config
        actor_cls = self._ray.remote(EnvWorker).options(
            num_cpus=c.num_cpus_per_env, resources={c.resource: c.resource_per_env}, max_restarts=0)
        return actor_cls.remote(c.env_id, c.make_kwargs, first_seed)

    def _await_placement(self, actors: Sequence[Any]) -> None:
        refs = [a.ready.remote() for a in actors]
        done, pending = self._ray.wait(refs, num_returns=len(refs), timeout=self.config.placement_timeout_s)
        if pending:
            for actor in actors:
                self._ray.kill(actor)
            raise HostSetupError(
                f"{len(pending)} of {len(refs)} env actors were not placed within {self.config.placement_timeout_s:.0f}"
                f" s: no node has a free {self.config.resource!r} (others' actors may hold them)")
        self._ray.get(done)

    # -- Gymnasium -------------------------------------------------------------------------------
    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        seeds = list(seed) if isinstance(seed, Sequence) else \
            [None if seed is None else seed + i for i in range(self.num_envs)]
        if len(seeds) != self.num_envs:
            raise ValueError(f"reset got {len(seeds)} seeds for {self.num_envs} envs")
        self._seeds = seeds
        refs = [a.reset.remote(s, options) for a, s in zip(self._actors, seeds, strict=True)]
        observations, infos = [], {}
        for i, ref in enumerate(refs):
            try:
                obs, info = self._ray.get(ref, timeout=self.config.call_timeout_s)
            except self._ray.exceptions.RayActorError as exc:
                raise BackendError(f"env actor {i} died during reset: {exc}") from None
            self._last_obs[i] = obs
            observations.append(obs)
            infos = self._add_info(infos, info, i)
        return self._batch(observations), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        per_env = list(actions) if isinstance(actions, list | tuple) else list(iterate(self.action_space, actions))
        if len(per_env) != self.num_envs:
            raise ValueError(f"step got {len(per_env)} actions for {self.num_envs} envs")
        refs = [a.step.remote(act) for a, act in zip(self._actors, per_env, strict=True)]
        observations, infos = [], {}
        rewards = np.zeros(self.num_envs)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        for i, ref in enumerate(refs):
            try:
                obs, rewards[i], terminated[i], truncated[i], info = self._ray.get(
                    ref, timeout=self.config.call_timeout_s)
            except (self._ray.exceptions.RayActorError, self._ray.exceptions.GetTimeoutError,
                    self._ray.exceptions.RayTaskError) as exc:  # died, hung, or failed to reset its env
                obs, info = self._replace_actor(i, exc)
                truncated[i] = True
            self._last_obs[i] = obs
            observations.append(obs)
            infos = self._add_info(infos, info, i)
        return self._batch(observations), rewards, terminated, truncated, infos

    def _replace_actor(self, i: int, exc: BaseException) -> tuple[Any, dict[str, Any]]:
        """The episode in slot ``i`` is lost: report it truncated with the reason; a fresh actor takes over."""
        self._ray.kill(self._actors[i])
        self._actors[i] = self._new_actor(self._seeds[i])  # the slot's seed, not a fresh variant
        self._await_placement([self._actors[i]])
        self.restarts += 1
        reason = f"env actor died, hung or failed ({type(exc).__name__}): {str(exc).splitlines()[0][:300]}"
        if self._last_obs[i] is None:
            raise BackendError(f"env actor {i} was lost before its first reset: {reason}")
        # The lost episode's final observation is unknowable; the last one the actor returned stands in.
        return self._last_obs[i], {"actor_restarted": reason, "end_reason": "actor_restarted"}

    def _batch(self, observations: list[Any]) -> Any:
        out = create_empty_array(self.single_observation_space, self.num_envs, fn=np.zeros)
        return concatenate(self.single_observation_space, observations, out)

    def actor(self, i: int) -> Any:
        """The Ray actor of env ``i`` (for tests and for users who need direct access)."""
        return self._actors[i]

    def close_extras(self, **kwargs: Any) -> None:
        refs = [a.close.remote() for a in self._actors]
        self._ray.wait(refs, num_returns=len(refs), timeout=60)
        for actor in self._actors:
            self._ray.kill(actor)
        self._actors = []
