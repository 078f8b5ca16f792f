"""Which task variant a reset plays: the pool, its train/test split, and seeds that draw from it."""

from __future__ import annotations

import numpy as np
import pytest

from weavegym.core.config import EnvConfig, variant_pool
from weavegym.envs.task_session import TaskSession
from weavegym.envs.tasks import get_task

TASK = get_task("Weave-DevOps-1")


def _session(**config) -> TaskSession:
    return TaskSession(TASK, EnvConfig(**config))


def _pick(session: TaskSession, seed: int | None, options: dict | None = None) -> int:
    rng = np.random.default_rng(seed)  # what gymnasium's reset(seed=...) does to env.np_random
    return session.pick_seed(seed, options or {}, rng)


def test_the_split_is_fixed_disjoint_and_covers_the_pool() -> None:
    train, test = variant_pool(20, "train"), variant_pool(20, "test")
    assert test == [4, 9, 14, 19] and not set(train) & set(test)
    assert sorted(train + test) == variant_pool(20) == list(range(20))


def test_by_default_a_seed_is_the_variant_and_no_seed_replays_the_last() -> None:
    session = _session(task_variants=8)
    assert _pick(session, 1234) == 1234
    assert _pick(session, None, {"task_seed": 77}) == 77
    single = _session()
    single.seed = 5
    assert _pick(single, None) == 5


def test_seeds_draw_from_the_pool_deterministically_when_asked() -> None:
    session = _session(task_variants=8, seed_draws_variant=True)
    drawn = [_pick(session, s) for s in range(200)]
    assert set(drawn) == set(range(8)), "200 seeds should reach every variant of a pool of 8"
    assert drawn == [_pick(session, s) for s in range(200)], "the same seed must play the same variant"
    assert _pick(session, None, {"task_seed": 1000}) == 1000, "an explicit task_seed is taken as it is"


@pytest.mark.parametrize("split", ["train", "test"])
def test_a_split_keeps_every_draw_on_its_side(split: str) -> None:
    session = _session(task_variants=25, variant_split=split, seed_draws_variant=True)
    side = set(variant_pool(25, split))
    assert {_pick(session, s) for s in range(300)} == side
    assert {_pick(session, None) for _ in range(50)} <= side, "an unseeded reset draws from the split too"


def test_bad_pools_are_refused_when_configured() -> None:
    with pytest.raises(ValueError, match="variant_split"):
        EnvConfig(variant_split="validation")
    with pytest.raises(ValueError, match="test split needs task_variants >= 5"):
        EnvConfig(task_variants=4, variant_split="test")
