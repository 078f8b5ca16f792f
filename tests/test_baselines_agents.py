"""The simple baselines: make_policy, random (valid-or-rejected, reproducible), noop, and the oracle's replay."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from weavegym.baselines import POLICY_NAMES, EpisodeStart, Policy, make_policy
from weavegym.baselines import simple_agents as simple_agents_module
from weavegym.baselines.llm_agent import LLMAgent
from weavegym.baselines.simple_agents import NoopAgent, OracleAgent, RandomAgent
from weavegym.core.errors import InvalidActionError
from weavegym.envs.actions import KINDS, Action, parse_action
from weavegym.envs.space_layout import action_space
from weavegym.envs.task import OracleContext
from weavegym.envs.tasks import get_task
from weavegym.envs.tasks.devops import inventory_service

SCREEN = (320, 200)


def _episode(seed: int = 0, task_id: str = "Weave-DevOps-1", **kw: Any) -> EpisodeStart:
    return EpisodeStart(task_id=task_id, domain=task_id.split("-")[1], instruction="do the task", screen=SCREEN,
                        seed=seed, **kw)


def _obs(terminal: str = "", exit_code: int = -1) -> dict[str, Any]:
    return {"screen": np.zeros((SCREEN[1], SCREEN[0], 3), np.uint8), "terminal": terminal,
            "exit_code": np.array(exit_code, dtype=np.int64), "instruction": "do the task"}


def _run(agent: Policy, steps: int) -> list[Any]:
    return [agent.act(_obs(), {"action_error": None}) for _ in range(steps)]


# -- make_policy ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "cls"), [("random", RandomAgent), ("noop", NoopAgent), ("oracle", OracleAgent)])
def test_make_policy_builds_each_simple_agent(name: str, cls: type) -> None:
    agent = make_policy(name)
    assert isinstance(agent, cls) and isinstance(agent, Policy)
    assert agent.name == name
    assert agent.privileged is (name == "oracle")


def test_make_policy_llm_takes_config_fields() -> None:
    agent = make_policy("llm", base_url="http://127.0.0.1:9/v1", model="m", max_images=2)
    try:
        assert isinstance(agent, LLMAgent) and isinstance(agent, Policy)
        assert agent.config.max_images == 2 and not agent.privileged
    finally:
        agent.close()


def test_make_policy_passes_options_through() -> None:
    agent = make_policy("random", seed=7)
    assert isinstance(agent, RandomAgent) and agent.seed == 7


def test_make_policy_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown agent 'gpt'") as info:
        make_policy("gpt")
    for name in POLICY_NAMES:
        assert name in str(info.value)
    assert set(POLICY_NAMES) == {"random", "noop", "oracle", "llm"}


# -- random ----------------------------------------------------------------------------------------
def test_random_actions_parse_or_are_rejected_cleanly() -> None:
    agent = RandomAgent(seed=3)
    agent.start(_episode(seed=11))
    kinds, accepted = set(), 0
    for action in _run(agent, 300):
        json.dumps(action)  # plain Python values, so a runner can log them
        try:
            parsed = parse_action(action, SCREEN)
        except InvalidActionError:
            continue  # the only exception allowed: the env reports it in info
        assert isinstance(parsed, Action)
        kinds.add(parsed.kind)
        accepted += 1
    assert accepted > 100
    assert len(kinds) >= len(KINDS) - 2  # it explores the whole vocabulary


def test_random_is_reproducible_per_seed_and_episode_seed() -> None:
    def actions(seed: int, episode_seed: int) -> list[Any]:
        agent = RandomAgent(seed=seed)
        agent.start(_episode(seed=episode_seed))
        return _run(agent, 20)

    assert actions(1, 5) == actions(1, 5)
    assert actions(1, 5) != actions(2, 5)
    assert actions(1, 5) != actions(1, 6)
    agent = RandomAgent(seed=1)  # start() reseeds, so a second episode with the same seed repeats itself
    agent.start(_episode(seed=5))
    first = _run(agent, 5)
    agent.start(_episode(seed=5))
    assert _run(agent, 5) == first


def test_random_uses_the_given_space_without_touching_it() -> None:
    space = action_space(SCREEN)
    space.seed(42)
    expected = space.sample()
    space.seed(42)
    agent = RandomAgent()
    agent.start(_episode(action_space=space))
    _run(agent, 3)
    assert json.dumps(space.sample(), default=str) == json.dumps(expected, default=str)


def test_random_needs_start() -> None:
    with pytest.raises(RuntimeError, match="start"):
        RandomAgent().act(_obs(), {})


# -- noop ------------------------------------------------------------------------------------------
def test_noop_is_done_at_once() -> None:
    agent = NoopAgent()
    agent.start(_episode())
    actions = _run(agent, 2)
    assert actions == [{"kind": "done"}, {"kind": "done"}]
    assert parse_action(actions[0], SCREEN).kind == "done"
    assert agent.transcript() is None


# -- oracle ----------------------------------------------------------------------------------------
TRUTH = {"port": 8123, "window": [100, 40, 200, 120]}  # all Weave-DevOps-1's oracle gets: the rest is withheld


def test_oracle_replays_the_task_oracle_then_says_done() -> None:
    """The oracle takes the data file and the build from what its shell steps printed, then says done for good."""
    ctx = OracleContext({"port": 8123}, TRUTH, SCREEN, _obs(), {})
    agent = OracleAgent()
    agent.start(_episode(oracle_context=ctx))
    listing = f"FATAL: cannot open {inventory_service.APP}/stokc.json\nDATA FILES\n{inventory_service.APP}/stock.json\n"
    actions = [agent.act(_obs(), {}), agent.act(_obs(listing, 0), {}), agent.act(_obs("build-4242.9f3a\n", 0), {}),
               *_run(agent, 6)]
    parsed = [parse_action(a, SCREEN) for a in actions]
    assert [p.kind for p in parsed] == ["shell", "shell", "click", "type", "key", "shell", "done", "done", "done"]
    assert "tail" in parsed[0].command and "server.log" in parsed[0].command
    assert f"file = {inventory_service.APP}/stock.json|" in parsed[1].command and "8123" in parsed[1].command
    assert (parsed[2].x, parsed[2].y) == (200, 100)  # the middle of the deploy console window
    assert parsed[3].text == "build-4242.9f3a"  # what the restarted service reported
    assert parsed[4].keys == "Return"
    assert "pgrep -x zenity" in parsed[5].command
    assert agent.transcript() is None


@pytest.mark.parametrize("listing", ["DATA FILES\n",
                                     "DATA FILES\n/home/user/inventory/a.json\n/home/user/inventory/b.json\n"])
def test_the_oracle_fails_rather_than_guess_when_its_shell_shows_no_single_data_file(listing: str) -> None:
    ctx = OracleContext({"port": 8123}, TRUTH, SCREEN, _obs(), {})
    agent = OracleAgent()
    agent.start(_episode(oracle_context=ctx))
    agent.act(_obs(), {})
    assert agent.act(_obs(listing.replace("/home/user/inventory", inventory_service.APP), 0), {})["kind"] == "fail"


def test_oracle_matches_a_fresh_run_of_the_same_oracle() -> None:
    """Same actions, same order, as driving the task's generator directly (what `weavegym validate` does)."""
    task = get_task("Weave-Productivity-1")
    truth = {"travel_total": "123.45", "approver": "finance", "reference": "R-ACDE34", "window": [50, 60, 300, 200]}
    expected = list(task.oracle(OracleContext({"approver": "finance"}, truth, SCREEN)))
    agent = OracleAgent()
    agent.start(_episode(task_id=task.id, oracle_context=OracleContext({"approver": "finance"}, truth, SCREEN)))
    assert _run(agent, len(expected)) == expected
    assert agent.act(_obs(), {}) == {"kind": "done"}


def test_oracle_sees_each_new_observation(monkeypatch: pytest.MonkeyPatch) -> None:
    def oracle(ctx: OracleContext) -> Iterator[Any]:
        yield {"kind": "shell", "command": "echo hi"}
        assert ctx.info is not None
        yield {"kind": "type", "text": f"{ctx.obs['terminal'].strip()}/{ctx.info['step']}"}

    fake = SimpleNamespace(oracle=oracle)
    monkeypatch.setattr(simple_agents_module, "get_task", lambda task_id: fake)
    ctx = OracleContext({}, {}, SCREEN)
    agent = OracleAgent()
    agent.start(_episode(oracle_context=ctx))
    assert agent.act(_obs(), {"step": 0})["kind"] == "shell"
    assert agent.act(_obs("hi\n", 0), {"step": 1}) == {"kind": "type", "text": "hi/1"}
    assert ctx.info == {"step": 1}
    assert agent.act(_obs(), {"step": 2}) == {"kind": "done"}


def test_oracle_is_privileged_and_refuses_to_run_without_the_truth() -> None:
    agent = OracleAgent()
    assert agent.privileged
    with pytest.raises(ValueError, match="privileged"):
        agent.start(_episode())


def test_episode_start_from_env_hides_the_truth_unless_privileged() -> None:
    prepared = SimpleNamespace(params={"port": 1}, truth={"secret": 2})
    env = SimpleNamespace(prepared=prepared, task=get_task("Weave-DevOps-1"), action_space=action_space(SCREEN),
                          config=SimpleNamespace(screen_size=SCREEN))
    info = {"instruction": "fix it"}
    public = EpisodeStart.from_env(env, _obs(), info, 3)  # type: ignore[arg-type]
    assert (public.task_id, public.domain, public.instruction, public.screen, public.seed) == (
        "Weave-DevOps-1", "DevOps", "fix it", SCREEN, 3)
    assert public.oracle_context is None and public.action_space is env.action_space
    private = EpisodeStart.from_env(env, _obs(), info, 3, privileged=True)  # type: ignore[arg-type]
    assert private.oracle_context is not None and private.oracle_context.truth == {"secret": 2}
