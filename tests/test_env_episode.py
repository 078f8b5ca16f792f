"""The Gymnasium env end to end on a real TCG VM: episodes, the terminal, bad actions, scoring, shortcuts.

One VM (Weave-Productivity-1 on the base image) serves the module; every test
starts with a reset, which is a snapshot load.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
import pytest

from weavegym.core.errors import AgentError, EpisodeError
from weavegym.envs.tasks import get_task
from weavegym.envs.weave_env import WeaveEnv
from weavegym.machine.frames import fit_frame

pytestmark = [pytest.mark.vm, pytest.mark.timeout(900)]
TASK_ID = "Weave-Productivity-1"


FIRST_INFO: dict = {}


@pytest.fixture(scope="module")
def env():
    env = WeaveEnv(TASK_ID)
    FIRST_INFO.update(env.reset(seed=0)[1])
    yield env
    env.close()


def _fresh(env: WeaveEnv, seed: int = 0):
    return env.reset(seed=seed)


def _guest_state(env: WeaveEnv) -> str:
    """A fingerprint of what an action could have changed: the user's files and the windows."""
    client = env.backend.client
    files = client.exec("cd /home/user && find . -printf '%p %s %T@\\n' | sort", timeout=30).stdout
    windows = sorted((w.title, w.x, w.y, w.width, w.height) for w in client.list_windows()[0] if w.mapped)
    return files + repr(windows)


def test_reset_observation_and_info(env: WeaveEnv) -> None:
    obs, info = _fresh(env)
    assert obs in env.observation_space
    assert obs["screen"].shape == (720, 1280, 3) and obs["screen"].dtype == np.uint8
    assert obs["terminal"] == "" and int(obs["exit_code"]) == 0
    assert "Expense approval" in obs["instruction"] and info["instruction"] == obs["instruction"]
    assert info["task_id"] == TASK_ID and info["domain"] == "Productivity"
    # Where to watch, with the password, comes once per VM (its first reset), not in every info that ends
    # up in logs and reports.
    assert FIRST_INFO["vnc"].startswith("vnc://127.0.0.1:") and FIRST_INFO["vnc_password"]
    assert FIRST_INFO["vnc_password"] == env.backend.vnc.password
    assert "vnc_password" not in info and "vnc" not in info
    assert info["snapshot"] == "cached"  # the fixture's reset created it
    # The setup's dialog is on screen: the frame is not a blank desktop.
    assert len(np.unique(obs["screen"].reshape(-1, 3), axis=0)) > 20


def test_seeded_reset_is_pixel_identical_and_seeds_differ(env: WeaveEnv) -> None:
    first, _ = env.reset(seed=0)
    truth0 = dict(env.prepared.truth)
    env.step("drag(640, 360, 200, 150)")  # change the screen (the pointer is in the frame)
    again, info = env.reset(seed=0)
    assert info["snapshot"] == "cached"
    assert np.array_equal(first["screen"], again["screen"])
    csv0 = env.backend.client.exec("cat /home/user/expenses.csv").stdout
    _other, info = env.reset(seed=1)
    assert info["snapshot"] in ("created", "cached") and info["task_seed"] == 1
    assert env.prepared.truth["reference"] != truth0["reference"]  # seed 1's variant
    csv1 = env.backend.client.exec("cat /home/user/expenses.csv").stdout
    assert csv1 != csv0 and csv1.startswith("date,category,amount\n")
    _obs, info = env.reset(seed=0)
    assert info["snapshot"] == "cached" and env.backend.client.exec("cat /home/user/expenses.csv").stdout == csv0
    _obs, info = env.reset()  # no seed: the same variant again
    assert info["task_seed"] == 0


def test_shell_is_persistent_and_survives_a_hung_command(env: WeaveEnv) -> None:
    _fresh(env)
    obs, reward, terminated, truncated, info = env.step('shell("cd /tmp && export WEAVE_X=42 && whoami")')
    # The shell is the workspace account, which has no display (the GUI is the other channel).
    assert info["action_error"] is None and obs["terminal"] == "workspace\n" and int(obs["exit_code"]) == 0
    assert (reward, terminated, truncated) == (0.0, False, False)
    obs, *_ = env.step({"kind": "shell", "command": "pwd; echo $WEAVE_X; echo ${DISPLAY:-no display}"})
    assert obs["terminal"] == "/tmp\n42\nno display\n"
    obs, *_rest, info = env.step({"kind": "shell", "command": "sleep 600", "timeout": 2})
    assert int(obs["exit_code"]) == 124 and info["command_timed_out"] and "interrupted" in obs["terminal"]
    obs, *_ = env.step('shell("pwd; false")')
    assert obs["terminal"] == "/tmp\n" and int(obs["exit_code"]) == 1
    obs, *_ = env.step('python("import os, pwd; print(os.getcwd(), pwd.getpwuid(os.getuid()).pw_name, '
                       'os.environ[\'WEAVE_X\'])")')
    assert obs["terminal"] == "/tmp workspace 42\n"
    # GUI actions leave the terminal observation as it was.
    obs, *_ = env.step("move(5, 5)")
    assert obs["terminal"] == "/tmp workspace 42\n"
    # A reset gives a fresh shell in $HOME.
    _fresh(env)
    obs, *_ = env.step('shell("pwd; echo ${WEAVE_X:-unset}")')
    assert obs["terminal"] == "/home/user\nunset\n"


def test_unicode_and_huge_output(env: WeaveEnv) -> None:
    _fresh(env)
    obs, *_ = env.step('shell("printf \'%s\\\\n\' 中文 😀 héllo")')
    assert obs["terminal"] == "中文\n😀\nhéllo\n"
    obs, *_rest, info = env.step({"kind": "shell", "command": "head -c 30000000 /dev/zero | tr '\\0' a; echo END"})
    assert info["terminal_truncated"] and len(obs["terminal"]) <= env.config.terminal_max_chars
    assert obs in env.observation_space
    obs, *_rest, info = env.step('shell("printf \'a\\\\0b\'")')  # a NUL byte in the output
    assert obs["terminal"] == "a\u2400b" and obs in env.observation_space


@pytest.mark.parametrize("bad", [
    {"kind": "teleport", "x": 1, "y": 1},
    {"kind": "click", "x": 5000, "y": 10},
    {"kind": "click", "x": -1, "y": 10},
    {"kind": "click", "x": "ten", "y": 10},
    {"kind": "type", "text": 42},
    {"kind": "shell"},
    "click(100, ",
    "__import__('os').system('touch /home/user/pwned')",
    {"kind": "type", "text": "x" * 1_000_000},
    {"kind": "key", "keys": "ctrl+nosuchkey"},
    12345,
])
def test_bad_actions_are_reported_and_change_nothing(env: WeaveEnv, bad: object) -> None:
    obs0, _ = _fresh(env)
    before = _guest_state(env)
    started = time.monotonic()
    obs, reward, terminated, truncated, info = env.step(bad)
    assert time.monotonic() - started < 20
    assert info["action_error"], f"no action_error for {bad!r}"
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert _guest_state(env) == before
    assert np.array_equal(obs["screen"], obs0["screen"])
    assert env.trajectory.steps[-1].channel in ("invalid", "gui")  # the guest refused the unknown key itself
    obs, *_rest, info = env.step('shell("echo still fine")')  # the env keeps working
    assert obs["terminal"] == "still fine\n" and info["action_error"] is None


def test_oracle_scores_one_and_noop_scores_zero(env: WeaveEnv) -> None:
    from weavegym.ops.validation import run_policy

    task = get_task(TASK_ID)
    result = run_policy(env, "oracle", task.oracle, seed=0)
    assert result.action_errors == []
    assert result.score == 1.0, result.evaluation
    evaluation = result.evaluation
    assert evaluation["passed"] and not evaluation["flags"]
    names = [c["name"] for c in evaluation["clauses"]]
    assert names == ["dialog_total", "dialog_approver", "total_file", "receipt_filed",
                     "provenance_gui_1", "provenance_cli_2", "provenance_cli_3"]
    assert all(c["outcome"] == "satisfied" and c["evidence"] for c in evaluation["clauses"])
    noop = run_policy(env, "noop", lambda _ctx: iter([{"kind": "done"}]), seed=0)
    assert noop.score == 0.0
    outcomes = {c["name"]: c["outcome"] for c in noop.evaluation["clauses"]}
    assert outcomes == {**dict.fromkeys(names[:4], "failed"), **dict.fromkeys(names[4:], "satisfied")}


@pytest.mark.parametrize("how", ["desktop terminal", "symlink"])
def test_a_cli_deliverable_made_on_the_gui_side_scores_zero(env: WeaveEnv, how: str) -> None:
    """The right content through the wrong channel: the provenance clause caps the episode at 0."""
    from weavegym.baselines.adversaries import DesktopTerminal, TerminalCommand
    from weavegym.envs.task import OracleContext

    task = get_task(TASK_ID)
    env.reset(seed=0)
    ctx = OracleContext(env.prepared.params, env.prepared.truth, (1280, 720))
    receipt = f"echo {ctx.truth['reference']} > ~/approval_ref.txt"
    for action in task.oracle(ctx):
        if isinstance(action, dict) and "approval_ref.txt" in str(action.get("command", "")):
            if how == "desktop terminal":  # typed into a terminal window on the desktop instead of the shell
                DesktopTerminal(env.backend.client).run(TerminalCommand(receipt))
            else:  # the shell links to a file the desktop account wrote with the same content
                env.backend.client.exec(f"echo {ctx.truth['reference']} > /home/user/.ref", user="user")
                env.step({"kind": "shell", "command": "ln -s ~/.ref ~/approval_ref.txt"})
            continue
        _obs, reward, terminated, _truncated, info = env.step(action)
        if terminated:
            break
    evaluation = info["evaluation"]
    outcomes = {c["name"]: c["outcome"] for c in evaluation["clauses"]}
    assert reward == 0.0 and not evaluation["passed"]
    # The content was right, but not made by the shell. Through a symlink the checker does not even read
    # it: a link is never followed (it could point at anything root can read).
    assert outcomes["receipt_filed"] == ("satisfied" if how == "desktop terminal" else "failed")
    assert outcomes["provenance_cli_3"] == "failed"
    if how == "desktop terminal":
        assert evaluation["zeroed_by"] == ["NoDesktopTerminalWork"]


def test_done_terminates_and_step_after_end_raises(env: WeaveEnv) -> None:
    _fresh(env)
    _obs, _reward, terminated, truncated, info = env.step("done()")
    assert terminated and not truncated and info["end_reason"] == "done" and "evaluation" in info
    with pytest.raises(EpisodeError):
        env.step("done()")
    _fresh(env)
    _obs, reward, terminated, truncated, info = env.step({"kind": "fail", "reason": "cannot"})
    assert terminated and info["end_reason"] == "fail" and reward == 0.0


def test_wait_past_the_time_budget_truncates_instead_of_raising(env: WeaveEnv) -> None:
    old = env.time_budget_s
    try:
        _fresh(env)
        env.time_budget_s = 0.5
        time.sleep(1.0)  # the budget is spent before the step (what a slow agent does)
        _obs, reward, terminated, truncated, info = env.step({"kind": "wait", "seconds": 5})
        assert truncated and not terminated and info["end_reason"] == "time_budget"
        assert info["action_error"] is None and "vnc_password" not in info
        assert info["evaluation"]["score"] == reward == 0.0
    finally:
        env.time_budget_s = old


def test_a_changed_display_mode_is_put_back_and_the_shape_never_changes(env: WeaveEnv) -> None:
    """A GUI agent can change the mode (the display settings); vector envs need a fixed observation shape."""
    _fresh(env)
    client, display = env.backend.client, {"DISPLAY": ":0"}
    assert "1024x768" in client.exec(["xrandr"], env=display, timeout=15).stdout
    assert client.exec(["xrandr", "-s", "1024x768"], env=display, timeout=15).exit_code == 0
    assert env.backend.grab_frame().shape == (768, 1024, 3)  # the change is real
    obs, _r, _t, _tr, info = env.step({"kind": "wait", "seconds": 0.1})
    assert obs["screen"].shape == (720, 1280, 3) and obs in env.observation_space
    assert info["screen_restored"] is True
    assert env.backend.grab_frame().shape == (720, 1280, 3)  # put back in the guest, not only scaled
    _obs, _r, _t, _tr, info = env.step({"kind": "wait", "seconds": 0.1})
    assert info["screen_restored"] is False


def test_fit_frame_scales_only_a_frame_of_the_wrong_size() -> None:
    frame = np.arange(768 * 1024 * 3, dtype=np.uint32).astype(np.uint8).reshape(768, 1024, 3)
    fitted = fit_frame(frame, (1280, 720))
    assert fitted.shape == (720, 1280, 3) and fitted.dtype == np.uint8
    assert (fitted[0, 0] == frame[0, 0]).all() and (fitted[-1, -1] == frame[-1, -1]).all()
    right = np.zeros((720, 1280, 3), np.uint8)
    assert fit_frame(right, (1280, 720)) is right


def test_max_steps_truncates_and_scores(env: WeaveEnv) -> None:
    short = WeaveEnv(TASK_ID, max_steps=2)
    assert short.max_steps == 2
    short.close()
    old = env.max_steps
    env.max_steps = 2
    try:
        _fresh(env)
        _obs, _r, terminated, truncated, info = env.step('shell("true")')
        assert not truncated and "evaluation" not in info
        _obs, reward, terminated, truncated, info = env.step("bogus")
        assert truncated and not terminated and info["end_reason"] == "max_steps"
        assert info["evaluation"]["score"] == reward == 0.0
    finally:
        env.max_steps = old


def test_trajectory_records_every_step(env: WeaveEnv) -> None:
    _fresh(env)
    env.step('shell("echo hi")')
    env.step({"kind": "click", "x": 3, "y": 4})
    env.step("nonsense(")
    steps = env.trajectory.steps
    assert [s.channel for s in steps] == ["reset", "cli", "gui", "invalid"]
    assert steps[1].action == {"kind": "shell", "command": "echo hi", "timeout": None} or \
        steps[1].action["command"] == "echo hi"
    assert steps[2].action_text == "click(3, 4)" and steps[3].action_error
    assert all(len(s.frame.digest) == 64 for s in steps)
    assert env.trajectory.code() == [(1, "echo hi")]
    lines = env.trajectory.to_jsonl().splitlines()
    assert len(lines) == 4


def test_killed_agent_is_survived(env: WeaveEnv) -> None:
    _fresh(env)
    with contextlib.suppress(AgentError):  # the call that kills the agent loses its own connection
        env.backend.client.exec("systemctl kill -s KILL weavegym-agent.service", timeout=10)
    _obs, _r, _t, _tr, info = env.step('shell("echo first")')
    assert info["action_error"] is None or "lost the guest agent" in info["action_error"]
    obs, _r, _t, _tr, info = env.step('shell("echo back")')
    assert info["action_error"] is None and obs["terminal"] == "back\n"


def test_a_killed_vm_truncates_the_episode_unscored_then_reset_recovers(env: WeaveEnv) -> None:
    _fresh(env)
    env.backend.domain.destroy()
    _obs, reward, terminated, truncated, info = env.step('shell("echo into the void")')
    assert truncated and not terminated and reward == 0.0 and "evaluation" not in info
    assert info["env_failure"].startswith("BackendError") and "reset()" in info["env_failure"], info["env_failure"]
    obs, info = env.reset(seed=0)  # a new QEMU loads the task snapshot from the overlay: no cold boot
    assert info["snapshot"] == "cached" and obs in env.observation_space
    obs, _r, _t, _tr, info = env.step('shell("cat ~/expenses.csv | head -1")')
    assert obs["terminal"] == "date,category,amount\n"


def test_close_twice_and_reset_after_close() -> None:
    env = WeaveEnv(TASK_ID)
    env.close()
    env.close()
    with pytest.raises(EpisodeError):
        env.reset()
    with pytest.raises(EpisodeError):
        env.step("done()")


def test_the_stateless_shell_plays_the_same_episode() -> None:
    """EnvConfig(persistent_shell=False), a bash per command: the same terminal semantics and the same score, on a
    VM of its own, restored from the host's prepared states (`make test-vm` makes them before the tests, so no
    first boot runs on this test's deadline)."""
    from weavegym.ops.validation import run_policy

    env = WeaveEnv(TASK_ID, persistent_shell=False, prepared_states=True)
    try:
        env.reset(seed=0)
        obs, *_ = env.step('shell("cd /tmp && export WEAVE_X=42 && whoami")')
        assert obs["terminal"] == "workspace\n"
        obs, *_rest, info = env.step({"kind": "shell", "command": "cd /; WEAVE_X=0; sleep 600", "timeout": 2})
        assert int(obs["exit_code"]) == 124 and info["command_timed_out"] and "interrupted" in obs["terminal"]
        obs, *_ = env.step('python("import os; print(os.getcwd(), os.environ[\'WEAVE_X\'])")')
        assert obs["terminal"] == "/tmp 42\n"
        env.reset(seed=0)
        obs, *_ = env.step('shell("pwd; echo ${WEAVE_X:-unset}")')
        assert obs["terminal"] == "/home/user\nunset\n", "a reset must give a fresh shell"
        result = run_policy(env, "oracle", get_task(TASK_ID).oracle, seed=0)
        assert result.action_errors == [] and result.score == 1.0, result.evaluation
    finally:
        env.close()
