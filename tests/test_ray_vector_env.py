"""RayVectorEnv on a local Ray cluster (one head node) with real VMs: fan-out, autoreset, actor loss, placement."""

from __future__ import annotations

import time

import numpy as np
import pytest
import ray

from weavegym.core.errors import HostSetupError
from weavegym.distributed.ray_vector_env import RayVectorConfig, RayVectorEnv

pytestmark = pytest.mark.vm

TASK = "Weave-Productivity-1"


@pytest.fixture(scope="module")
def local_cluster():
    ray.init(num_cpus=2, resources={"weavegym_vm": 2}, include_dashboard=False, log_to_driver=False,
             object_store_memory=256 << 20)
    try:
        yield
    finally:
        ray.shutdown()


def test_a_cluster_without_the_resource_is_a_clear_error_not_a_hang(local_cluster) -> None:
    start = time.monotonic()
    with pytest.raises(HostSetupError, match="advertises 0 of resource 'weavegym_kvm_vm'"):
        RayVectorEnv(TASK, 2, config=RayVectorConfig(TASK, 2, resource="weavegym_kvm_vm"))
    with pytest.raises(HostSetupError, match="advertises 2 of resource 'weavegym_vm', but 3 envs need 3"):
        RayVectorEnv(TASK, 3)
    assert time.monotonic() - start < 30


def test_placement_gives_up_at_its_deadline_when_every_vm_slot_is_taken(local_cluster) -> None:
    holder = RayVectorEnv(TASK, 2)  # both slots held; the VMs boot only on reset, so this is cheap
    try:
        start = time.monotonic()
        with pytest.raises(HostSetupError, match="not placed within 5 s"):
            RayVectorEnv(TASK, 1, config=RayVectorConfig(TASK, 1, placement_timeout_s=5))
        assert time.monotonic() - start < 30
    finally:
        holder.close()


@pytest.mark.heavy  # three VM boots (two at once, then the replacement): `make test-heavy`
@pytest.mark.timeout(1500)
def test_two_envs_step_with_autoreset_and_survive_a_killed_actor(local_cluster) -> None:
    envs = RayVectorEnv(TASK, 2, max_steps=3)
    try:
        obs, _info = envs.reset(seed=[0, 1])
        assert obs["screen"].shape == (2, 720, 1280, 3) and obs["screen"].std() > 0
        assert all("Expense approval" in s for s in obs["instruction"])
        envs.action_space.seed(11)
        ended = 0
        for _ in range(8):
            obs, reward, terminated, truncated, _info = envs.step(envs.action_space.sample())
            assert obs in envs.observation_space
            done = terminated | truncated
            ended += int(done.sum())
            assert np.all(reward[~done] == 0.0)
        assert ended >= 2  # max_steps=3: episodes end, and the following steps autoreset them

        first_pid = ray.get(envs.actor(1).ready.remote())
        ray.kill(envs.actor(1), no_restart=True)
        obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
        assert truncated[1] and not terminated[1] and reward[1] == 0.0
        assert "died" in info["actor_restarted"][1] and info["_actor_restarted"].tolist() == [False, True]
        assert envs.restarts == 1 and ray.get(envs.actor(1).ready.remote()) != first_pid
        assert ray.get(envs.actor(1).task_seed.remote()) is None  # not reset yet: the next step does it
        # Next-step autoreset: the fresh actor boots its VM and resets; env 0 went on undisturbed.
        obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
        assert not truncated[1] and reward[1] == 0.0 and "Expense approval" in obs["instruction"][1]
        assert obs["screen"][1].std() > 0
        assert ray.get(envs.actor(1).task_seed.remote()) == 1  # the slot's seed, not a fresh variant 0
    finally:
        envs.close()
