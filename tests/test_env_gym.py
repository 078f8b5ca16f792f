"""Gymnasium conformance on real VMs: registration, gym.make options, check_env, vector envs, validate."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import weavegym
from weavegym.envs.tasks import DOMAINS, all_tasks, get_task
from weavegym.envs.weave_env import WeaveEnv
from weavegym.ops.validation import validate_task

pytestmark = [pytest.mark.vm, pytest.mark.timeout(1200)]


def test_import_registers_every_task() -> None:
    ids = [t.id for t in all_tasks()]
    assert {"Weave-Productivity-1", "Weave-DevOps-1"} <= set(ids)
    for task_id in ids:
        spec = gym.spec(task_id)
        assert spec.entry_point == "weavegym.envs.weave_env:WeaveEnv" and spec.kwargs == {"task_id": task_id}
        domain = task_id.split("-")[1]
        assert domain in DOMAINS and get_task(task_id).domain == domain


def test_make_options_are_validated_without_booting() -> None:
    env = gym.make("Weave-DevOps-1", screen_size=(1920, 1080), max_steps=7, render_mode="rgb_array")
    unwrapped = env.unwrapped
    assert unwrapped.observation_space["screen"].shape == (1080, 1920, 3)
    assert unwrapped.action_space["x"].n == 1920 and unwrapped.max_steps == 7
    assert unwrapped.backend is None  # the VM boots on the first reset, not in make()
    env.close()
    with pytest.raises(TypeError, match="unknown WeaveEnv option"):
        gym.make("Weave-DevOps-1", screen_sise=(1, 2))
    with pytest.raises(ValueError, match="screen_size"):
        gym.make("Weave-DevOps-1", screen_size=(10, 10))
    with pytest.raises(ValueError, match="unknown backend"):
        WeaveEnv("Weave-DevOps-1", backend="docker").reset()
    with pytest.raises(weavegym.TaskError, match="unknown task"):
        WeaveEnv("Weave-DevOps-99")


def test_tool_schema_is_exported_for_llm_agents() -> None:
    tools = weavegym.tool_schema()
    names = [t["function"]["name"] for t in tools]
    assert names[:2] == ["move", "click"] and {"shell", "python", "done", "fail", "drag"} <= set(names)
    json.dumps(tools)
    click = next(t for t in tools if t["function"]["name"] == "click")["function"]["parameters"]
    assert click["required"] == ["x", "y"] and click["properties"]["x"]["maximum"] == 1279


def test_check_env_passes_without_skip_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """Gymnasium's own checker, render modes included (it makes one more env per mode: two more VMs)."""
    env = gym.make("Weave-DevOps-1", render_mode="rgb_array")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped)
        assert [str(w.message) for w in caught] == []
        frame = env.unwrapped.render()
        assert frame.shape == (720, 1280, 3) and frame.dtype == np.uint8
    finally:
        env.close()
    # render_mode="human" on a headless host prints where to watch (checked on one of check_env's envs).
    assert "weavegym: watch Weave-DevOps-1 at vnc://127.0.0.1:" in capsys.readouterr().out


def test_full_hd_screen() -> None:
    env = gym.make("Weave-DevOps-1", screen_size=(1920, 1080))
    try:
        obs, info = env.reset(seed=0)
        assert obs["screen"].shape == (1080, 1920, 3)
        x, y, w, h = env.unwrapped.prepared.truth["window"]
        assert x + w <= 1920 and y + h <= 1080  # the dialog is laid out on the big screen
        obs, _r, _t, _tr, info = env.step({"kind": "click", "x": 1919, "y": 1079})
        assert info["action_error"] is None
        _obs, _r, _t, _tr, info = env.step({"kind": "click", "x": 1920, "y": 0})
        assert "1920" in info["action_error"]
        info = env.unwrapped.backend.client.info()  # the X server itself (the shell has no display to ask)
        assert (info.screen_width, info.screen_height) == (1920, 1080)
    finally:
        env.close()


def test_async_vector_env_random_steps_with_autoreset() -> None:
    envs = gym.make_vec("Weave-Productivity-1", num_envs=2, vectorization_mode="async",
                        vector_kwargs={"shared_memory": True}, max_steps=4)
    try:
        assert isinstance(envs, gym.vector.AsyncVectorEnv) and envs.shared_memory
        obs, _infos = envs.reset(seed=[0, 1])
        assert obs["screen"].shape == (2, 720, 1280, 3) and all("Expense approval" in s for s in obs["instruction"])
        envs.action_space.seed(7)
        episodes_ended, rewards = 0, []
        for _ in range(20):
            obs, reward, terminated, truncated, _infos = envs.step(envs.action_space.sample())
            assert obs in envs.observation_space
            assert all("Expense approval" in s for s in obs["instruction"])  # live text, not stale NULs
            ended = np.logical_or(terminated, truncated)
            episodes_ended += int(ended.sum())
            rewards.extend(reward[ended].tolist())
            assert np.all(reward[~ended] == 0.0)
        # max_steps=4 forces episodes to end, and the next step auto-resets them.
        assert episodes_ended >= 4
        assert all(0.0 <= r <= 1.0 for r in rewards)
    finally:
        envs.close()


# CI runs the adversaries on two base tasks (`make validate-base` and `make validate-full` run every task):
# DevOps-1, whose GUI result is a dialog's answer, and Design-1, whose GUI result is a file a GUI app saves.
CI_TASKS = ("Weave-DevOps-1", "Weave-Design-1")


@pytest.mark.timeout(600 * len(CI_TASKS) + 60)
def test_validate_cli_runs_the_adversaries_on_two_base_tasks(tmp_path) -> None:
    """Oracle 1.0, noop 0, and every adversary below the threshold, for the reason the design gives.

    Two workers, one VM each, as `make validate-full` runs the suite; the report keeps the suite's order.
    """
    out = tmp_path / "validate.json"
    result = subprocess.run([sys.executable, "-m", "weavegym.cli", "validate", ",".join(CI_TASKS),
                             "--json", str(out), "--workers", "2"], capture_output=True, text=True,
                            timeout=600 * len(CI_TASKS))
    assert result.returncode == 0, result.stdout + result.stderr
    reports = {r["task_id"]: r for r in json.loads(out.read_text())}
    assert list(reports) == list(CI_TASKS)
    for report in reports.values():
        assert report["violations"] == []
        runs = report["results"]
        scores = {run: res["score"] for run, res in runs.items()}
        assert scores["oracle"] == 1.0 and scores["noop"] == 0.0
        assert all(scores[a] < 1.0 for a in ("cli-only", "gui-only", "forger")), scores
        # gui-only typed the oracle's CLI steps into a desktop terminal, and that is what zeroed it.
        assert runs["gui-only"]["terminal_commands"] > 0
        assert "NoDesktopTerminalWork" in runs["gui-only"]["evaluation"]["zeroed_by"]
    design = reports["Weave-Design-1"]["results"]
    failed = {run: {c["name"] for c in res["evaluation"]["clauses"] if c["outcome"] == "failed"}
              for run, res in design.items()}
    # The redacted PNG forged from the shell has the oracle's exact bytes, and is still not the tool's.
    assert "provenance_gui_2" in failed["cli-only"] and "provenance_gui_2" in failed["forger"]
    assert "redacted_png" not in failed["forger"]  # the content was right: only provenance stopped it
    assert "Weave-DevOps-1" in result.stdout and "ok" in result.stdout


def test_validate_catches_a_task_whose_oracle_is_wrong() -> None:
    task = get_task("Weave-DevOps-1")

    def lazy_oracle(ctx):  # fixes the service but never confirms the deployment
        for action in task.oracle(ctx):
            if isinstance(action, dict) and action.get("kind") == "type":
                continue
            yield action

    report = validate_task(replace(task, oracle=lazy_oracle), runs=("oracle",))
    assert report.error is None
    assert report.results["oracle"].score < 1.0
    assert any("oracle scored" in v for v in report.violations())
