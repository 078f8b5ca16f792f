"""``weavegym debug``: one episode live, over VNC, stepped by hand.

It boots the env, prints where to watch (VNC address and password) and then
either steps an agent one action at a time (Enter: do it, ``h``: hand the
desktop to a human, ``q``: stop) or, without an agent, lets a human drive the
desktop over VNC. Either way the final state is scored by the task's checker,
exactly as at the end of a normal episode.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TextIO

import gymnasium as gym

from weavegym.baselines.factory import make_policy
from weavegym.baselines.policy import EpisodeStart
from weavegym.envs.registration import register_tasks


def debug_episode(task_id: str, agent_name: str | None, seed: int, read_line: Callable[[], str],
                  out: TextIO, env_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run one supervised episode; returns the evaluation. ``read_line`` is the operator's input."""
    register_tasks()

    env = gym.make(task_id, **(env_options or {}))
    agent = None

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    try:
        say(f"booting {task_id} (seed {seed}) …")
        obs, info = env.reset(seed=seed)
        vnc = env.unwrapped.backend.vnc
        say(f"VNC: vnc://{vnc.host}:{vnc.port} password: {vnc.password}")
        say(f"instruction: {obs['instruction']}")
        if agent_name is None:
            say("Drive the desktop over VNC. Press Enter to score the final state, or q to quit unscored.")
            return _finish(env, read_line().strip().lower(), say)
        agent = make_policy(agent_name)
        agent.start(EpisodeStart.from_env(env.unwrapped, obs, info, seed,
                                          privileged=getattr(agent, "privileged", False)))
        while True:
            action = agent.act(obs, info)
            say(f"next action: {_describe(action)}   [Enter] do it · [h] hand over to a human · [q] stop")
            choice = read_line().strip().lower()
            if choice in ("q", "h"):
                if choice == "h":
                    say("Your turn over VNC. Press Enter to score the final state, or q to quit unscored.")
                    choice = read_line().strip().lower()
                return _finish(env, choice, say)
            obs, _reward, terminated, truncated, info = env.step(action)
            say(f"step {info.get('step')}: error={info['action_error']!r} exit={int(obs['exit_code'])} "
                f"terminal={obs['terminal'][-300:]!r}")
            if terminated or truncated:
                return _report(info["evaluation"], say)
    finally:
        if agent is not None:
            agent.close()
        env.close()


def _finish(env: Any, choice: str, say: Callable[[str], None]) -> dict[str, Any]:
    if choice == "q":
        say("stopped without scoring")
        return {}
    _obs, _reward, _terminated, _truncated, info = env.step({"kind": "done"})
    return _report(info["evaluation"], say)


def _report(evaluation: dict[str, Any], say: Callable[[str], None]) -> dict[str, Any]:
    for clause in evaluation["clauses"]:
        say(f"  {clause['outcome']:>9}  {clause['name']}: {clause['evidence']}")
    for flag in evaluation["flags"]:
        say(f"  flag ({flag['confidence']}) {flag['rule']}: {flag['message']}")
    say(f"score: {evaluation['score']:.2f} ({'passed' if evaluation['passed'] else 'not passed'})")
    return evaluation


def _describe(action: Any) -> str:
    return action if isinstance(action, str) else json.dumps(action, ensure_ascii=False, default=str)[:300]
