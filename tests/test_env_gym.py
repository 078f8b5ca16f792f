"""Gymnasium conformance on real VMs: registration, gym.make options, check_env, vector envs, validate."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import weavegym
from weavegym.baselines.hybrid_adversaries import HYBRID_ADVERSARIES
from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import DOMAINS, all_tasks, get_task
from weavegym.envs.weave_env import WeaveEnv
from weavegym.ops.validation import validate_task
from weavegym.vm_images.recipe import ImageRecipe

pytestmark = [pytest.mark.vm, pytest.mark.timeout(1200)]


def test_import_registers_every_task() -> None:
    ids = [t.id for t in all_tasks()]
    assert {"Weave-Productivity-1", "Weave-DevOps-1"} <= set(ids)
    for task_id in ids:
        spec = gym.spec(task_id)
        assert spec.entry_point == "weavegym.envs.weave_env:WeaveEnv" and spec.kwargs == {"task_id": task_id}
        # max_episode_steps=N still ends with a score: the wrapper hands the limit to the env (test_env_local.py)
        assert [w.name for w in spec.additional_wrappers] == ["StepLimitSync"]
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
    with pytest.raises(ValueError, match="action_kinds"):
        gym.make("Weave-DevOps-1", action_kinds=["click", "teleport"])
    shaped = gym.make("Weave-DevOps-1", action_kinds=["key", "click"], coordinates="box", observation_keys=["screen"],
                      observation_size=(320, 180), grayscale=True).unwrapped
    assert shaped.action_space["kind"].n == 2 and shaped.observation_space["screen"].shape == (180, 320, 1)
    shaped.close()
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
    """Gymnasium's own checker, render modes included (it makes one more env per mode: two more VMs). On
    prepared states: the extra envs restore the host's states instead of booting, and the checker then
    covers that path too (the default one is covered by every other env test)."""
    env = gym.make("Weave-DevOps-1", render_mode="rgb_array", prepared_states=True)
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


GUI_KINDS_SAMPLED = ["move", "click", "double_click", "right_click", "drag", "scroll", "key", "mouse_down", "mouse_up"]


def _kill_qemu_of(owner_pid: int) -> None:
    """SIGKILL the QEMU of the VM that process ``owner_pid`` started (domains are named weavegym-<pid>-<hex>)."""
    mark = f"guest=weavegym-{owner_pid}-".encode()
    killed = 0
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if mark in cmdline.read_bytes():
                os.kill(int(cmdline.parent.name), signal.SIGKILL)
                killed += 1
    assert killed == 1, f"expected one QEMU of process {owner_pid}, killed {killed}"


def test_async_vector_env_of_sampled_gui_actions_survives_a_killed_vm() -> None:
    """RL's loop: sampled actions only, none refused; episodes end by max_steps; a VM killed mid-run costs that
    one episode (truncated, unscored, info["env_failure"]) and the vector env keeps stepping."""
    envs = gym.make_vec("Weave-DevOps-1", num_envs=2, vectorization_mode="async",
                        vector_kwargs={"shared_memory": True}, max_steps=5, action_kinds=GUI_KINDS_SAMPLED,
                        prepared_states=True)  # a killed VM comes back by a restore, as RL fleets would run
    try:
        assert isinstance(envs, gym.vector.AsyncVectorEnv) and envs.shared_memory
        obs, _infos = envs.reset(seed=[0, 1])
        assert obs["screen"].shape == (2, 720, 1280, 3) and all("inventory" in s for s in obs["instruction"])
        envs.action_space.seed(7)
        ends: list[tuple[int, str, float]] = []
        for step in range(30):
            if step == 7:
                _kill_qemu_of(envs.processes[0].pid)
            obs, reward, terminated, truncated, infos = envs.step(envs.action_space.sample())
            assert obs in envs.observation_space
            assert all("inventory" in s for s in obs["instruction"])  # live text, not stale NULs
            refused = [e for e, present in zip(infos["action_error"], infos["_action_error"], strict=True)
                       if present and e is not None]
            assert refused == [], f"step {step}: sampled actions were refused: {refused}"
            assert not terminated.any()  # no done/fail among the kinds
            for i in np.flatnonzero(truncated):
                ends.append((int(i), str(infos["end_reason"][i]), float(reward[i])))
                if infos["end_reason"][i] == "max_steps":  # scored even though no action ended it
                    # Vector infos nest a dict-valued key: evaluation.score is an array over the envs.
                    assert infos["_evaluation"][i] and 0.0 <= infos["evaluation"]["score"][i] <= 1.0
        failures = [e for e in ends if e[1] == "env_failure"]
        assert [(i, r) for i, _, r in failures] == [(0, 0.0)], ends
        assert all(reason == "max_steps" for _, reason, _ in ends if reason != "env_failure"), ends
        after = ends.index(failures[0])
        assert any(i == 0 and reason == "max_steps" for i, reason, _ in ends[after:]), \
            f"the killed env never finished another episode: {ends}"
        assert sum(1 for i, *_ in ends if i == 1) >= 4  # the other env never stopped
    finally:
        envs.close()


# CI runs the adversaries on two base tasks (`make validate-base` and `make validate-full` run every task):
# DevOps-1, whose GUI result is a dialog's answer, and Design-1, whose GUI result is a file a GUI app saves.
CI_TASKS = ("Weave-DevOps-1", "Weave-Design-1")


@pytest.mark.timeout(1200 * len(CI_TASKS) + 60)
def test_validate_cli_runs_the_adversaries_on_two_base_tasks(tmp_path) -> None:
    """Oracle 1.0, noop 0, and every adversary below the threshold, for the reason the design gives.

    Two workers, one VM each, as `make validate-full` runs the suite; the report keeps the suite's order.
    On prepared states, so the second task restores the desktop the first one booted. Then, as `make
    validate-full` goes on from a cut-short run, a second seed with --resume.
    """
    out = tmp_path / "validate.json"
    result = subprocess.run([sys.executable, "-m", "weavegym.cli", "validate", ",".join(CI_TASKS),
                             "--json", str(out), "--workers", "2", "--prepared-states"], capture_output=True, text=True,
                            timeout=600 * len(CI_TASKS))
    assert result.returncode == 0, result.stdout + result.stderr
    reports = {r["task_id"]: r for r in json.loads(out.read_text())}
    assert list(reports) == list(CI_TASKS)
    base_image = ImageRecipe("base").name
    for report in reports.values():
        assert report["violations"] == []
        assert report["image"] == base_image, "each report names the image its VMs came from"
        runs = report["results"]
        scores = {run: res["score"] for run, res in runs.items()}
        assert scores["oracle"] == 1.0 and scores["noop"] == 0.0
        assert all(scores[a] < 1.0 for a in ("cli-only", "gui-only", "forger", *HYBRID_ADVERSARIES)), scores
        assert runs["oracle"]["switches"] >= 1  # a hybrid oracle changes channel at least once (TASKS.md counts)
        # gui-only typed the oracle's CLI steps into a desktop terminal, and that is what zeroed it.
        assert runs["gui-only"]["terminal_commands"] > 0
        assert "NoDesktopTerminalWork" in runs["gui-only"]["evaluation"]["zeroed_by"]
        # backdoor's desktop-side runner granted the shell X access and took it back before the end: the guard
        # revoked the grant at once, and its record zeroed the run.
        assert runs["backdoor"]["terminal_commands"] >= 2
        assert "DesktopGuarded" in runs["backdoor"]["evaluation"]["zeroed_by"], runs["backdoor"]["evaluation"]
        # Nobody's process kept running while it was scored, and nothing else was crossed on the way.
        assert all("EpisodeFrozen" not in res["evaluation"]["zeroed_by"] for res in runs.values())
        assert all("DesktopGuarded" not in res["evaluation"]["zeroed_by"] for run, res in runs.items()
                   if run != "backdoor")
    design = reports["Weave-Design-1"]["results"]
    failed = {run: {c["name"] for c in res["evaluation"]["clauses"] if c["outcome"] == "failed"}
              for run, res in design.items()}
    # The redacted PNG forged from the shell has the oracle's exact bytes, and is still not the tool's.
    assert "provenance_gui_2" in failed["cli-only"] and "provenance_gui_2" in failed["forger"]
    assert "redacted_png" not in failed["forger"]  # the content was right: only provenance stopped it
    # The linker wrote those bytes into a hard link of a desktop-owned file: the owner was right, the links not.
    linked = {c["name"]: c["evidence"] for c in design["linker"]["evaluation"]["clauses"]}
    assert "provenance_gui_2" in failed["linker"] and "hard links" in linked["provenance_gui_2"], linked
    assert "Weave-DevOps-1" in result.stdout and "ok" in result.stdout
    assert all(f"] {task_id} seed 0 #1: clean (" in result.stderr for task_id in CI_TASKS), result.stderr
    # Another seed of both, resumed from that file: only the new seed runs, task by task, beside the kept ones.
    first = json.loads(out.read_text())
    resumed = subprocess.run([sys.executable, "-m", "weavegym.cli", "validate", ",".join(CI_TASKS), "--seed", "0",
                              "--seed", "1", "--resume", "--json", str(out), "--workers", "2", "--prepared-states",
                              "--plot", str(tmp_path / "suite.svg")],
                             capture_output=True, text=True, timeout=600 * len(CI_TASKS))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"kept {len(CI_TASKS)} task run(s)" in resumed.stderr
    both = json.loads(out.read_text())
    assert [(r["task_id"], r["seed"]) for r in both] == [(t, s) for t in CI_TASKS for s in (0, 1)]
    assert [r for r in both if r["seed"] == 0] == first, "the kept runs are the first command's, untouched"
    assert all(r["violations"] == [] and r["results"]["oracle"]["score"] == 1.0 for r in both)
    assert {r["results"]["oracle"]["seed"] for r in both if r["seed"] == 1} == {1}
    # The picture covers both seeds of both tasks: the oracle's 1.0 on each, and every adversary's marker.
    svg = (tmp_path / "suite.svg").read_text()
    assert "2 of 2 tasks validated, 0 of 4 task runs with a violation" in svg
    for task_id in CI_TASKS:
        assert f"{task_id} oracle: 1.00 in 2 run(s)" in svg
        assert all(f"{task_id} {adversary}: highest" in svg for adversary in ("cli-only", "gui-only", "forger"))


def _qemu_busy(owner_pid: int, cpu_s: float) -> bool:
    """Whether the QEMU of ``owner_pid``'s VM has run ``cpu_s`` of CPU: its guest is up and at work, not starting."""
    mark = f"guest=weavegym-{owner_pid}-".encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            if mark in cmdline.read_bytes():
                fields = (cmdline.parent / "stat").read_text().rpartition(")")[2].split()
                return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") >= cpu_s
    return False


# A recovery scenario of the suite runner, like test_runner's killed and resumed run: 175 s here, so `make
# test-heavy`. `make test` keeps the env's side (test_hostile: QEMU killed mid-evaluation is an env error) and
# the retry's bookkeeping on the host (test_validation_resume).
@pytest.mark.heavy
def test_validate_runs_a_task_again_when_its_vm_is_killed(tmp_path: Path) -> None:
    """A lost VM is an env error, not a score: the task runs again on a new VM, and the report says so.

    The VM is killed once it has worked 20 s of CPU, so mid-episode, as a host's OOM killer would."""
    out = tmp_path / "v.json"
    proc = subprocess.Popen([sys.executable, "-m", "weavegym.cli", "validate", "Weave-DevOps-1", "--prepared-states",
                             "--json", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=dict(os.environ, COLUMNS="300"))  # rich: no wrapping
    try:
        wait_for(lambda: _qemu_busy(proc.pid, 20.0), 300, what="the validation's VM at work")
        _kill_qemu_of(proc.pid)
        _, stderr = proc.communicate(timeout=1100)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    assert "1 task run(s) ended in an env error; running them again (1 of 1): Weave-DevOps-1 seed 0" in stderr
    (report,) = json.loads(out.read_text())
    assert report["violations"] == [] and report["results"]["oracle"]["score"] == 1.0
    assert len(report["earlier_errors"]) == 1 and report["error"] is None
    assert "Weave-DevOps-1 seed 0 #1: env error: " in stderr  # the lost run's line, before the retry's "clean"


def test_validate_catches_a_task_whose_oracle_is_wrong() -> None:
    task = get_task("Weave-DevOps-1")

    def lazy_oracle(ctx):  # fixes the service but never confirms the deployment
        for action in task.oracle(ctx):
            if isinstance(action, dict) and action.get("kind") == "type":
                continue
            yield action

    # On prepared states (the validate test above saved them): what is under test is the verdict, not the boot.
    report = validate_task(replace(task, oracle=lazy_oracle), runs=("oracle",), prepared_states=True)
    assert report.error is None
    assert report.results["oracle"].score < 1.0
    assert any("oracle scored" in v for v in report.violations())
