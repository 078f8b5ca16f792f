"""``weavegym validate``: prove each task is solvable, not free, and needs both channels.

For every task, on one VM (resets are snapshot loads):

* ``oracle``   – the task's reference solution must score 1.0;
* ``noop``     – an agent that immediately says ``done`` must score 0;
* ``cli-only`` – the oracle with its GUI actions dropped must stay below the pass threshold;
* ``gui-only`` – the oracle with its CLI actions dropped must stay below the pass threshold.

Any action the oracle sends that the env rejects is itself a violation: an
oracle that only passes because of lenient parsing proves nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from weavegym.envs.actions import channel_of, parse_action
from weavegym.envs.task import ActionLike, OracleContext, Task
from weavegym.envs.weave_env import WeaveEnv

RUNS = ("oracle", "noop", "cli-only", "gui-only")
EPS = 1e-9


@dataclass
class EpisodeResult:
    run: str
    score: float
    steps: int
    seconds: float
    end_reason: str
    action_errors: list[str] = field(default_factory=list)
    evaluation: dict[str, Any] = field(default_factory=dict)
    reset_s: float = 0.0


@dataclass
class TaskValidation:
    task_id: str
    pass_threshold: float
    results: dict[str, EpisodeResult] = field(default_factory=dict)
    error: str | None = None  # the env itself failed (setup, VM); that is a violation too

    def violations(self) -> list[str]:
        if self.error is not None:
            return [f"error: {self.error}"]
        found = []
        for run, result in self.results.items():
            found.extend(f"{run}: rejected action: {err}" for err in result.action_errors)
        if (oracle := self.results.get("oracle")) and oracle.score < 1.0 - EPS:
            found.append(f"oracle scored {oracle.score:.3f}, not 1.0")
        if (noop := self.results.get("noop")) and noop.score > EPS:
            found.append(f"do-nothing agent scored {noop.score:.3f}, not 0")
        for run in ("cli-only", "gui-only"):
            if (res := self.results.get(run)) and res.score >= self.pass_threshold - EPS:
                found.append(f"{run} scored {res.score:.3f}, which passes (threshold {self.pass_threshold})")
        return found


def run_policy(env: WeaveEnv, run: str, policy: Callable[[OracleContext], Iterator[ActionLike]],
               channel: str | None, seed: int) -> EpisodeResult:
    """One episode: reset, feed the policy's actions (dropping other channels' ones), finish with done."""
    start = time.monotonic()
    obs, info = env.reset(seed=seed)
    reset_s = time.monotonic() - start
    assert env.prepared is not None
    ctx = OracleContext(env.prepared.params, env.prepared.truth, env.config.screen_size, obs, info)
    errors: list[str] = []
    steps, reward, ended, info_end = 0, 0.0, False, info
    for action in policy(ctx):
        if channel is not None and _channel(action, env) not in (channel, "control"):
            continue
        obs, reward_, terminated, truncated, info_end = env.step(action)
        steps += 1
        ctx.obs, ctx.info = obs, info_end
        if info_end.get("action_error"):
            errors.append(f"step {steps}: {info_end['action_error']}")
        if terminated or truncated:
            reward, ended = float(reward_), True
            break
    if not ended:
        _obs, reward_, _t, _tr, info_end = env.step({"kind": "done"})
        steps += 1
        reward = float(reward_)
    return EpisodeResult(run, reward, steps, time.monotonic() - start, str(info_end.get("end_reason", "")),
                         errors, info_end.get("evaluation", {}), reset_s)


def _channel(action: ActionLike, env: WeaveEnv) -> str:
    try:
        return channel_of(parse_action(action, env.config.screen_size, env.limits).kind)
    except ValueError:
        return "invalid"  # sent anyway, so the env reports it and the run records a violation


def _noop(_ctx: OracleContext) -> Iterator[ActionLike]:
    yield {"kind": "done"}


def validate_task(task: Task, *, seed: int = 0, runs: tuple[str, ...] = RUNS,
                  env_factory: Callable[[Task], WeaveEnv] | None = None,
                  on_run: Callable[[str, EpisodeResult], None] | None = None) -> TaskValidation:
    report = TaskValidation(task.id, task.pass_threshold)
    env: WeaveEnv | None = None
    plans: dict[str, tuple[Callable[[OracleContext], Iterator[ActionLike]], str | None]] = {
        "oracle": (task.oracle, None), "noop": (_noop, None),
        "cli-only": (task.oracle, "cli"), "gui-only": (task.oracle, "gui")}
    try:
        env = (env_factory or WeaveEnv)(task)
        for run in runs:
            policy, channel = plans[run]
            result = run_policy(env, run, policy, channel, seed)
            report.results[run] = result
            if on_run is not None:
                on_run(run, result)
    except Exception as exc:  # report it as this task's violation and go on with the next task
        report.error = f"{type(exc).__name__}: {exc}"
    finally:
        if env is not None:
            env.close()
    return report
