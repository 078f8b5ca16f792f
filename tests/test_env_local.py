"""WeaveEnv end to end on the local backend: a host Xvfb and the real guest agent, no image, no libvirt.

These episodes run the env's whole path (parsing, the executor's dispatch, the shell session, frame
settling, the trajectory, evaluation and the reward) in seconds. Every capability here also has a VM
test (test_env_episode.py, test_env_gym.py); this tier is what makes iterating on the env fast.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import time
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from weavegym.baselines.llm_agent import LLMAgent, LLMConfig
from weavegym.baselines.policy import EpisodeStart
from weavegym.core.deadline import wait_for
from weavegym.core.errors import BackendError, EpisodeError
from weavegym.envs.registration import SYNC_WRAPPER
from weavegym.envs.setup_context import SetupContext
from weavegym.envs.task import Channels, OracleContext, Prepared, Task
from weavegym.envs.weave_env import WeaveEnv
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.testing.local_backend import LocalBackend
from weavegym.testing.scripted_llm_server import ScriptedLLMServer

pytestmark = pytest.mark.xvfb

SCREEN = (640, 480)


def _setup(ctx: SetupContext) -> Prepared:
    folder = f"/tmp/weavegym-local-env/{ctx.task_id}-{ctx.seed}"
    ctx.run(["rm", "-rf", folder])
    word = f"{ctx.rng.integers(10**6):06d}-{secrets.token_hex(2)}"
    ctx.write_file(f"{folder}/word.txt", word + "\n", owner="root")
    return Prepared(params={"folder": folder}, truth={"folder": folder, "answer": word[::-1]})


def _reversed_word(probe: Probe, truth: dict) -> Verdict:
    text = probe.read_text(f"{truth['folder']}/answer.txt")
    if text is None:
        return Verdict.failed("answer.txt is missing")
    ok = text.strip() == truth["answer"]
    return (Verdict.satisfied if ok else Verdict.failed)(f"answer.txt holds {text.strip()!r}")


def _oracle(ctx: OracleContext) -> Iterator[str]:
    yield f"shell(\"rev {ctx.truth['folder']}/word.txt > {ctx.truth['folder']}/answer.txt\")"
    yield "done()"


TASK = Task(
    id="Weave-DevOps-99", title="Reverse a word (local test task)",
    instruction="Write the word in {folder}/word.txt reversed into {folder}/answer.txt.",
    channels=Channels(gui="nothing", cli="rev", why_both="a test task for the env's own path"),
    setup=_setup, clauses=(Clause("reversed", "answer.txt holds the word reversed", _reversed_word),),
    oracle=_oracle, max_steps=6, time_budget_s=120.0,
)


@pytest.fixture()
def env() -> Iterator[WeaveEnv]:
    env = WeaveEnv(TASK, backend=LocalBackend(SCREEN), screen_size=SCREEN, settle_stable_s=0.05)
    yield env
    env.close()


def test_an_oracle_episode_scores_one_and_records_every_step(env: WeaveEnv) -> None:
    obs, info = env.reset(seed=3)
    assert obs["screen"].shape == (480, 640, 3) and obs["screen"].dtype == np.uint8
    assert info["task_seed"] == 3 and info["snapshot"] == "created"  # no snapshots: setup runs every reset
    word = Path(env.prepared.truth["folder"], "word.txt").read_text().strip()
    folder = env.prepared.truth["folder"]
    obs, reward, terminated, truncated, info = env.step({"kind": "shell", "text": f"cat {folder}/word.txt"})
    assert obs["terminal"].strip() == word and int(obs["exit_code"]) == 0 and reward == 0.0
    for action in TASK.oracle(OracleContext(env.prepared.params, env.prepared.truth, SCREEN)):
        obs, reward, terminated, truncated, info = env.step(action)
    assert terminated and not truncated and reward == 1.0 and info["end_reason"] == "done"
    assert info["evaluation"]["score"] == 1.0
    assert [s.channel for s in env.trajectory.steps] == ["reset", "cli", "cli", "control"]


def test_a_do_nothing_episode_scores_zero_and_bad_actions_change_nothing(env: WeaveEnv) -> None:
    env.reset(seed=4)
    obs, reward, terminated, _, info = env.step("teleport(1, 2)")
    assert "unknown action" in info["action_error"] and not terminated and reward == 0.0
    assert env.trajectory.steps[-1].channel == "invalid" and obs["terminal"] == ""
    obs, _, _, _, info = env.step({"kind": "key", "keys": "NoSuchKeyName"})
    assert info["action_error"].startswith("the guest rejected the action")
    obs, _, _, _, info = env.step("click(639, 479)")
    assert info["action_error"] is None and obs["screen"].shape == (480, 640, 3)
    obs, reward, terminated, _, info = env.step("done")
    assert terminated and reward == 0.0 and info["evaluation"]["clauses"][0]["outcome"] == "failed"


def test_steps_run_out_and_the_checker_still_scores(env: WeaveEnv) -> None:
    env.reset(seed=5)
    folder = env.prepared.truth["folder"]
    env.step(f'shell("rev {folder}/word.txt > {folder}/answer.txt")')
    for _ in range(4):
        env.step("wait(0.01)")
    _, reward, terminated, truncated, info = env.step("wait(0.01)")
    assert truncated and not terminated and info["end_reason"] == "max_steps" and reward == 1.0


def test_a_killed_agent_truncates_the_episode_unscored_and_the_next_reset_recovers(env: WeaveEnv) -> None:
    env.reset(seed=6)
    backend = env.unwrapped.backend
    assert isinstance(backend, LocalBackend) and backend.agent is not None
    backend.agent.kill()
    obs, reward, terminated, truncated, info = env.step('shell("echo alive")')
    assert truncated and not terminated and reward == 0.0 and "evaluation" not in info
    assert "BackendError" in info["env_failure"] and info["end_reason"] == "env_failure"
    assert obs["screen"].shape == (480, 640, 3)  # the last good observation
    assert env.trajectory is not None and env.trajectory.steps[-1].action_error == info["env_failure"]
    with pytest.raises(EpisodeError):
        env.step("done()")  # the episode is over
    obs, info = env.reset(seed=6)
    assert info["snapshot"] == "created" and backend.timings["recoveries"] == 1
    obs, _, _, _, info = env.step('shell("echo alive")')
    assert info["action_error"] is None and obs["terminal"].strip() == "alive"


def test_with_on_env_failure_raise_a_killed_agent_raises(env: WeaveEnv) -> None:
    env.config = replace(env.config, on_env_failure="raise")
    env.reset(seed=7)
    backend = env.unwrapped.backend
    assert isinstance(backend, LocalBackend) and backend.agent is not None
    backend.agent.kill()
    with pytest.raises(BackendError):
        env.step('shell("echo alive")')
    env.reset(seed=7)
    assert backend.timings["recoveries"] == 1


def test_gym_make_max_episode_steps_truncates_with_a_score() -> None:
    """Gymnasium adds a TimeLimit for max_episode_steps; the env ends the episode on the same step, so the
    truncation still carries the checker's score instead of a silent 0."""
    gymnasium.register(id="WeaveLocalTest-v0", entry_point="weavegym.envs.weave_env:WeaveEnv",
                       additional_wrappers=(SYNC_WRAPPER,))  # as register_tasks does for every task
    env = gymnasium.make("WeaveLocalTest-v0", max_episode_steps=2, task_id=TASK, backend=LocalBackend(SCREEN),
                         screen_size=SCREEN, settle_stable_s=0.05)
    try:
        env.reset(seed=7)
        folder = env.unwrapped.prepared.truth["folder"]
        _, _, terminated, truncated, info = env.step(f'shell("rev {folder}/word.txt > {folder}/answer.txt")')
        assert not (terminated or truncated)
        _, reward, terminated, truncated, info = env.step("wait(0.01)")
        assert truncated and not terminated and info["end_reason"] == "max_steps" and reward == 1.0
    finally:
        env.close()
        gymnasium.registry.pop("WeaveLocalTest-v0", None)


@pytest.mark.parametrize("clock", ["env", "wall"])
def test_the_time_budget_counts_the_envs_time_not_the_policys_by_default(clock: str) -> None:
    env = WeaveEnv(TASK, backend=LocalBackend(SCREEN), screen_size=SCREEN, settle_stable_s=0.05,
                   time_budget_s=3.0, budget_clock=clock)
    try:
        env.reset(seed=8)
        time.sleep(3.5)  # a slow policy thinking
        _, _, _, truncated, info = env.step("wait(0.1)")
        if clock == "wall":
            assert truncated and info["end_reason"] == "time_budget"
            return
        assert not truncated  # the policy's time is not the env's
        _, _, _, truncated, info = env.step("wait(5)")  # a wait is the env's time: past the budget
        assert truncated and info["end_reason"] == "time_budget" and "evaluation" in info
    finally:
        env.close()


def test_osworld_pyautogui_text_actions_do_what_they_say(env: WeaveEnv, tmp_path: Path) -> None:
    """pyautogui.click and pyautogui.hotkey, as OSWorld agents write them, reach a real X client (xev)."""
    env.reset(seed=6)
    log = tmp_path / "xev.log"
    env.step({"kind": "shell", "command": "setsid -f xev -geometry 640x480+0+0 -event structure -event mouse "
                                          f"-event keyboard > {log} 2>&1 < /dev/null"})
    wait_for(lambda: log.exists() and "MapNotify" in log.read_text(), 20, what="xev's window to be mapped")
    _, _, _, _, info = env.step("pyautogui.click(x=320, y=240)")
    assert info["action_error"] is None
    _, _, _, _, info = env.step("pyautogui.hotkey('ctrl', 's')")
    assert info["action_error"] is None
    _, _, _, _, info = env.step("pyautogui.dragTo(10, 10)")
    assert "use drag(x, y, to_x, to_y)" in info["action_error"]
    wait_for(lambda: "keysym 0x73, s" in log.read_text(), 20, what="the s key to reach xev")
    events = log.read_text()
    press = events[events.index("ButtonPress"):]
    assert "(320,240)" in press.split("\n\n", 1)[0] and "button 1" in press.split("\n\n", 1)[0], press[:300]
    key_s = events[events.rindex("KeyPress", 0, events.index("keysym 0x73, s")):]
    assert "state 0x4" in key_s.split("\n\n", 1)[0], key_s[:300]  # with Control held
    subprocess.run(["pkill", "-f", "xev -geometry 640x480"], check=False)
    _, reward, terminated, _, _ = env.step("DONE")
    assert terminated and reward == 0.0


# ---- configurable spaces -------------------------------------------------------------------------------------

POINTER_AND_KEYS = ["click", "double_click", "drag", "scroll", "key", "move"]


def _shaped_env(**options: object) -> WeaveEnv:
    """Made through gym.make, with a spec that says what every task's spec says: a desktop is not deterministic
    (per-step timings in info), so check_env skips its step-determinism comparison as it does for the tasks."""
    if "WeaveLocalShaped-v0" not in gymnasium.registry:
        gymnasium.register(id="WeaveLocalShaped-v0", entry_point="weavegym.envs.weave_env:WeaveEnv",
                           nondeterministic=True, additional_wrappers=(SYNC_WRAPPER,))
    return gymnasium.make("WeaveLocalShaped-v0", task_id=TASK, backend=LocalBackend(SCREEN), screen_size=SCREEN,
                          settle_stable_s=0.05, **options)


def _check_env_without_warnings(env: gymnasium.Env) -> None:
    """Gymnasium's checker, no warnings allowed. The render-mode and close checks make more envs from the spec,
    whose kwargs hold this env's backend object (it must not be shared); they do not depend on the spaces and
    run on VMs in test_env_gym.py's check_env test."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=True, skip_close_check=True)
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("options", [
    {"action_kinds": POINTER_AND_KEYS, "coordinates": "box", "key_vocabulary": ["Escape", "Tab", "ctrl+a"]},
    {"action_kinds": POINTER_AND_KEYS, "observation_keys": ["screen", "terminal"], "observation_size": (160, 120),
     "grayscale": True},
], ids=["gui-box-keys", "screen-resized-gray"])
def test_check_env_passes_for_the_documented_configurations(options: dict) -> None:
    """Gymnasium's checker on the shaped spaces (CLI kinds left out: sampled commands would run on this host)."""
    env = _shaped_env(**options)
    try:
        _check_env_without_warnings(env)
    finally:
        env.close()


def test_sampled_gui_actions_are_all_accepted_and_only_max_steps_ends_episodes() -> None:
    env = _shaped_env(action_kinds=POINTER_AND_KEYS, coordinates="box", observation_keys=["screen"],
                      observation_size=(64, 48), grayscale=True, max_steps=5, key_vocabulary=["Escape", "Tab"])
    try:
        assert set(env.action_space.keys()) == {"kind", "x", "y", "to_x", "to_y", "button", "dx", "dy", "key"}
        obs, _ = env.reset(seed=1)
        assert obs["screen"].shape == (48, 64, 1) and obs in env.observation_space
        env.action_space.seed(5)
        ends = []
        for _ in range(12):
            obs, _, terminated, truncated, info = env.step(env.action_space.sample())
            assert info["action_error"] is None and obs in env.observation_space
            assert env.unwrapped.trajectory.steps[-1].frame is not None
            if terminated or truncated:
                ends.append(info["end_reason"])
                env.reset(seed=1)
        assert ends == ["max_steps", "max_steps"]  # no done/fail in the space: only the step limit ends episodes
    finally:
        env.close()


def test_a_kind_left_out_is_refused_in_every_form_and_runs_nothing(tmp_path: Path) -> None:
    env = _shaped_env(action_kinds=POINTER_AND_KEYS)
    marker = tmp_path / "ran"
    try:
        env.reset(seed=2)
        for action in (f"shell('touch {marker}')", {"kind": "shell", "command": f"touch {marker}"},
                       {"type": "function", "function": {"name": "shell",
                                                         "arguments": f'{{"command": "touch {marker}"}}'}}):
            _, _, terminated, _, info = env.step(action)
            assert "not one of this env's action kinds" in info["action_error"] and not terminated
            assert env.unwrapped.trajectory.steps[-1].channel == "invalid"
        _, _, terminated, _, info = env.step("done()")
        assert "not one of this env's action kinds" in info["action_error"] and not terminated
        assert not marker.exists()
    finally:
        env.close()


def test_wrapped_for_rl_libraries_the_env_steps_with_array_actions_and_observations() -> None:
    from gymnasium.spaces import Box, MultiDiscrete

    from weavegym.wrappers import MultiDiscreteActions, ScreenObservation

    env = MultiDiscreteActions(ScreenObservation(_shaped_env(
        action_kinds=POINTER_AND_KEYS, observation_keys=["screen"], observation_size=(80, 60), max_steps=3)))
    try:
        assert isinstance(env.action_space, MultiDiscrete) and env.observation_space == Box(0, 255, (60, 80, 3),
                                                                                              np.uint8)
        obs, _ = env.reset(seed=3)
        assert obs.shape == (60, 80, 3)
        env.action_space.seed(1)
        for _ in range(3):
            obs, _, _, truncated, info = env.step(env.action_space.sample())
            assert info["action_error"] is None and obs in env.observation_space
        assert truncated and "evaluation" in info
        _check_env_without_warnings(env)
    finally:
        env.close()


def test_an_exception_inside_a_ray_actors_env_costs_the_episode_not_the_actor() -> None:
    """The Ray actor body, without Ray: an env that raises mid-step (here: its agent killed, with
    on_env_failure="raise") ends that episode as truncated with info["env_failure"]; the next step resets
    it on the actor's first seed, as a replacement actor resumes its slot's seed."""
    from weavegym.distributed.ray_vector_env import EnvWorker

    _shaped_env().close()  # registers the local test id in this process
    worker = EnvWorker("WeaveLocalShaped-v0", {"task_id": TASK, "backend": LocalBackend(SCREEN),
                                               "screen_size": SCREEN, "settle_stable_s": 0.05,
                                               "on_env_failure": "raise"}, first_seed=9)
    try:
        obs, reward, terminated, truncated, info = worker.step("wait(0.01)")  # the first step resets
        assert worker.task_seed() == 9 and not (terminated or truncated) and obs["screen"].shape == (480, 640, 3)
        worker.step("click(5, 5)")
        worker.env.unwrapped.backend.agent.kill()
        obs, reward, terminated, truncated, info = worker.step("click(6, 6)")
        assert truncated and not terminated and reward == 0.0 and info["end_reason"] == "env_failure"
        assert "Error" in info["env_failure"] and obs["screen"].shape == (480, 640, 3)
        obs, reward, terminated, truncated, info = worker.step("click(7, 7)")  # autoreset: the agent is back
        assert not (terminated or truncated) and info["action_error"] is None and worker.task_seed() is not None
        _, _, _, _, info = worker.step("click(8, 8)")
        assert info["action_error"] is None
    finally:
        worker.close()


def _answered(probe: Probe, truth: dict) -> Verdict:
    from weavegym.evaluators.answers import check_text

    return check_text(probe.episode.answer, truth["answer"])


ANSWER_TASK = Task(
    id="Weave-DevOps-98", title="Say a word reversed (local test task)",
    instruction="Answer with the word in {folder}/word.txt reversed: done(answer=...).",
    channels=Channels(gui="nothing", cli="rev", why_both="a test task for answers"),
    setup=_setup, clauses=(Clause("answer", "the answer is the word reversed", _answered),),
    oracle=_oracle, max_steps=4, time_budget_s=120.0,
)


@pytest.mark.parametrize(("ending", "score"), [("right", 1.0), ("wrong", 0.0), ("fail", 0.0)])
def test_the_checker_reads_the_answer_of_done(ending: str, score: float) -> None:
    env = WeaveEnv(ANSWER_TASK, backend=LocalBackend(SCREEN), screen_size=SCREEN, settle_stable_s=0.05)
    try:
        env.reset(seed=11)
        answer = env.prepared.truth["answer"]
        action = {"right": f'done("The word reversed is <answer>{answer}</answer>")', "wrong": 'done("nope")',
                  "fail": 'fail("cannot read the file")'}[ending]
        _, reward, terminated, _, info = env.step(action)
        kind = "fail" if ending == "fail" else "done"
        assert terminated and reward == score and info["end_reason"] == kind and env.trajectory.end().kind == kind
        assert repr(answer) in info["evaluation"]["clauses"][0]["evidence"]  # the expected side is shown
    finally:
        env.close()


def test_a_random_seed_plays_a_variant_of_the_pool_when_seeds_draw_variants() -> None:
    env = WeaveEnv(TASK, backend=LocalBackend(SCREEN), screen_size=SCREEN, settle_stable_s=0.05, task_variants=10,
                   variant_split="test", seed_draws_variant=True)
    try:
        played = {env.reset(seed=int(s))[1]["task_seed"] for s in np.random.default_rng(3).integers(1 << 30, size=6)}
        assert played <= {4, 9} and played, played
        _obs, info = env.reset(seed=12345)
        assert env.reset(seed=12345)[1]["task_seed"] == info["task_seed"]
    finally:
        env.close()


def _last_output(messages: list[dict]) -> str | None:
    """The command output the llm baseline showed in its newest user turn (None when it showed none)."""
    for message in reversed(messages):
        if message["role"] != "user":
            continue
        content = message["content"]
        text = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
        found = re.search(r"Output of the last command \(exit code 0\):\n```\n(.*?)\n```", text, flags=re.S)
        return (found.group(1).strip() or None) if found else None
    return None


@pytest.mark.parametrize("ending", ["answer", "give up"])
def test_the_llm_baseline_answers_from_its_tools_output_or_gives_up_with_a_reason(ending: str) -> None:
    """The llm baseline end to end on an answer task: its `done` carries the answer the "model" read from the
    shell's output (not from the truth) and scores 1.0; its `fail` carries the reason into the record."""
    env = WeaveEnv(ANSWER_TASK, backend=LocalBackend(SCREEN), screen_size=SCREEN, settle_stable_s=0.05)

    def model(messages: list[dict]) -> dict:
        output = _last_output(messages)
        if output is None:
            return {"name": "shell", "arguments": {"command": f"rev {folder}/word.txt"}}
        if ending == "give up":
            return {"name": "fail", "arguments": {"reason": f"{folder}/word.txt reads {output!r} reversed"}}
        return {"name": "done", "arguments": {"answer": f"<answer>{output}</answer>"}}

    try:
        obs, info = env.reset(seed=5)
        folder = env.prepared.params["folder"]
        with ScriptedLLMServer(model) as server:
            agent = LLMAgent(LLMConfig(base_url=server.url, model="scripted", api_key="test", timeout_s=30))
            agent.start(EpisodeStart.from_env(env, obs, info, seed=5))
            for _ in range(4):
                obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
                assert info["action_error"] is None, info["action_error"]
                if terminated or truncated:
                    break
            agent.close()
        end = env.trajectory.end()
        answer = env.prepared.truth["answer"]
        assert terminated and len(server.requests) == 2
        if ending == "answer":
            assert (reward, end.kind, end.answer) == (1.0, "done", f"<answer>{answer}</answer>")
        else:
            assert (reward, end.kind, end.answer) == (0.0, "fail", "")
            assert end.reason == f"{folder}/word.txt reads {answer!r} reversed"
    finally:
        env.close()
