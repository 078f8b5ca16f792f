"""`weavegym bench env`: the env's own hot paths on one VM, in one run (medians, not timed tests).

Measured through ``WeaveEnv`` exactly as an agent sees them: reset to a cached
task snapshot, a GUI action plus its settled frame, ``shell("true")`` (and both shells side by side:
the stateless default and the agent's long-lived one, with ``python("pass")``), a bare
frame grab (QEMU screendump) against the agent's in-guest screenshot, and the
checker at the end of an episode.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from weavegym.envs.shell_session import ShellSession
from weavegym.envs.weave_env import WeaveEnv


@dataclass(frozen=True)
class EnvBenchConfig:
    task_id: str = "Weave-Productivity-1"
    iterations: int = 20
    resets: int = 10
    persistent_shell: bool = True  # the env's own shell steps (shell_true_step) in the agent's long-lived bash


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_ms": round(1000 * statistics.median(ordered), 1), "p95_ms": round(1000 * p95, 1),
            "n": len(ordered)}


def timed_samples(fn: Callable[[], object], n: int) -> list[float]:
    """Wall seconds of ``n`` calls of ``fn`` (the benches take medians of these)."""
    samples = []
    for _ in range(n):
        start = time.monotonic()
        fn()
        samples.append(time.monotonic() - start)
    return samples


def run_env_bench(config: EnvBenchConfig, progress: Callable[[str], None] | None = None) -> dict[str, object]:
    say = progress or (lambda _msg: None)
    env = WeaveEnv(config.task_id, max_steps=10_000, time_budget_s=86_400, on_env_failure="raise",
                   persistent_shell=config.persistent_shell)
    try:
        say("cold boot + task setup")
        start = time.monotonic()
        env.reset(seed=0)
        first_reset = time.monotonic() - start
        assert env.backend is not None and env.backend.client is not None
        result: dict[str, object] = {"bench": "env", "task": config.task_id,
                                     "persistent_shell": config.persistent_shell,
                                     "first_reset_s": round(first_reset, 1),
                                     "cold_boot_s": round(env.backend.timings.get("cold_boot_s", 0.0), 1),
                                     "task_setup_s": round(env.backend.timings.get("last_setup_s", 0.0), 1)}
        say("resets (cached task snapshot)")
        result["reset_cached"] = _stats(timed_samples(lambda: env.reset(seed=0), config.resets))
        say("GUI action + settled frame")
        toggle = iter(range(10**9))
        result["gui_step_move"] = _stats(timed_samples(
            lambda: env.step({"kind": "move", "x": 100 + next(toggle) % 2, "y": 100}), config.iterations))
        say("shell('true')")
        result["shell_true_step"] = _stats(timed_samples(lambda: env.step('shell("true")'), config.iterations))
        client = env.backend.client
        result["agent_exec_true"] = _stats(timed_samples(lambda: client.exec(["true"], timeout=10), config.iterations))
        # Both shells on the same VM in the same run: a new bash that restores and saves the state per command
        # (persistent_shell=False) against the agent's long-lived bash (the env's default).
        user = env.backend.workspace_user
        for mode, session in (("stateless", ShellSession(client, user=user)),
                              ("persistent", ShellSession(client, user=user, persistent=True))):
            say(f"{mode} shell: true, python pass")
            session.shell("true", 30)  # the persistent shell starts on its first command
            n = config.iterations
            result[f"shell_true_{mode}"] = _stats(timed_samples(lambda s=session: s.shell("true", 30), n))
            result[f"python_pass_{mode}"] = _stats(timed_samples(lambda s=session: s.python("pass", 30), n))
            session.restart()
        result["shell_true_persistent_speedup"] = round(
            result["shell_true_stateless"]["p50_ms"] / max(result["shell_true_persistent"]["p50_ms"], 0.1), 1)
        say("frames")
        result["frame_qemu_screendump"] = _stats(timed_samples(env.backend.grab_frame, config.iterations))
        result["frame_agent_screenshot"] = _stats(timed_samples(lambda: client.screenshot(), config.iterations))
        say("checker")
        start = time.monotonic()
        _obs, _r, _t, _tr, info = env.step("done()")
        result["evaluate_ms"] = round(1000 * info["evaluation"]["seconds"], 1)
        result["done_step_ms"] = round(1000 * (time.monotonic() - start), 1)
        return result
    finally:
        env.close()
