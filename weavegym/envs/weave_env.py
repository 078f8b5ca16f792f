"""``WeaveEnv``: one task on one desktop VM behind Gymnasium's ``Env`` contract.

* ``reset`` loads the task's snapshot (creating it on the first reset of a
  seed: setup on ``ready``, then save), so an episode starts in about a second.
* ``step`` parses the action in any accepted form; a bad one is reported in
  ``info["action_error"]`` and changes nothing. GUI actions go to the agent's
  input; ``shell``/``python`` to the episode's terminal.
* ``done``/``fail`` terminate, ``max_steps``/the time budget truncate; either
  way the checker scores the final state and that score is the reward. All
  other rewards are 0.
* Errors of the environment itself (VM or agent gone) raise ``WeaveGymError``
  subclasses; the next ``reset`` recovers a dead VM.

The VM boots lazily, on the first ``reset``: building the env is cheap, which
vector envs rely on (they construct a throwaway copy to read the spaces).

This class is the Gym front only: the machine (start, actions, recovery, frames) is the
``Coordinator``'s and the task (variants, snapshots, setup, scoring) the ``TaskSession``'s.
"""

from __future__ import annotations

import time
from dataclasses import fields, replace
from typing import Any, ClassVar, SupportsFloat

import gymnasium as gym
import numpy as np

from weavegym.core.config import EnvConfig
from weavegym.core.errors import (
    AgentError,
    BackendError,
    EpisodeError,
    EvaluationError,
    InvalidActionError,
    TaskError,
)
from weavegym.core.trajectory import FrameRecord, StepRecord, Trajectory
from weavegym.envs import actions as actions_mod
from weavegym.envs.coordinator import Coordinator
from weavegym.envs.simulated_user import TranscriptError
from weavegym.envs.space_layout import ActionLayout, ObservationLayout
from weavegym.envs.task import Prepared, Task
from weavegym.envs.task_session import TaskSession
from weavegym.envs.tasks import get_task
from weavegym.envs.vocabulary import ENDING_KINDS, ActionOutcome
from weavegym.evaluators import Evaluation
from weavegym.machine.backends.base import Backend


class WeaveEnv(gym.Env[dict[str, Any], dict[str, Any]]):
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array", "human"], "render_fps": 2}

    def __init__(self, task_id: str | Task, render_mode: str | None = None, *, config: EnvConfig | None = None,
                 backend: str | Backend | None = None, **overrides: Any) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None")
        # A Task object (not just a registered id) lets tests and task authors run unregistered variants.
        self.task: Task = task_id if isinstance(task_id, Task) else get_task(task_id)
        if isinstance(backend, str):  # a backend's name ("libvirt", "ssh"), as in EnvConfig
            overrides["backend"], backend = backend, None
        self.config = _config(config, overrides)
        self.render_mode = render_mode
        self.profile = self.config.profile or self.task.profile
        if self.task.profile == "full" and self.profile != "full":
            raise TaskError(f"{self.task.id} needs the 'full' image profile, not {self.profile!r}")
        self.max_steps = self.config.max_steps or self.task.max_steps
        self.time_budget_s = self.config.time_budget_s or self.task.time_budget_s
        self.limits = actions_mod.ActionLimits(default_timeout_s=self.config.shell_timeout_s)
        self.action_layout = ActionLayout.from_config(self.config, self.limits)
        self.observation_layout = ObservationLayout.from_config(self.config)
        self.action_space = self.action_layout.space()
        self.observation_space = self.observation_layout.space()
        # A Backend object (tests use testing.LocalBackend) replaces the one config.backend names.
        self.coordinator = Coordinator(self.config, self.profile, backend)
        self.session = TaskSession(self.task, self.config)
        self.trajectory: Trajectory | None = None
        self.instruction = ""
        self._frame: np.ndarray | None = None
        self._terminal, self._exit_code = "", 0
        self._steps, self._episode_start, self._ended = 0, 0.0, True
        self._env_seconds = 0.0  # time spent inside step() this episode (the "env" budget clock)
        self._vnc_announced = False
        self._closed = False
        self.wrapper_step_limit: int | None = None  # a TimeLimit above us (set by registration.StepLimitSync)

    # The parts callers reach for: the machine (``env.unwrapped.backend.client``) and the task's variant.
    @property
    def backend(self) -> Backend | None:
        return self.coordinator.backend

    @property
    def prepared(self) -> Prepared | None:
        return self.session.prepared

    @property
    def task_seed(self) -> int | None:
        return self.session.seed

    # -- Gymnasium API ---------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        if self._closed:
            raise EpisodeError("reset() on a closed env")
        options = dict(options or {})
        unknown = set(options) - {"task_seed"}
        if unknown:
            raise ValueError(f"unknown reset option(s) {sorted(unknown)}; supported: task_seed")
        start = time.monotonic()
        backend = self.coordinator.ensure_started()
        task_seed = self.session.pick_seed(seed, options, self.np_random)
        prepared, created = self.session.start(backend, task_seed, new_machine=self.coordinator.restarted)
        if self.config.persistent_shell:
            self.coordinator.begin_episode()
        self.instruction = self.task.render_instruction(prepared)
        self._terminal, self._exit_code, self._steps, self._ended = "", 0, 0, False
        frame_start = time.monotonic()
        self._frame = self.coordinator.settled_frame()[0].frame
        timings = {"reset_s": time.monotonic() - start, "frame_s": time.monotonic() - frame_start}
        self.trajectory = Trajectory(self.task.id, task_seed, self.instruction, started_wall=time.time())
        self.trajectory.record(StepRecord(index=0, channel="reset", frame=FrameRecord.of(0, self._frame),
                                          timings=timings))
        self._episode_start = time.monotonic()
        self._env_seconds = 0.0
        info = self._base_info()
        info.update(task_seed=task_seed, snapshot="created" if created else "cached", timings=timings)
        info.update(self.coordinator.vnc_info_once())
        self._announce_vnc()
        return self._observation(), info

    def step(self, action: Any) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        if self.trajectory is None or self.backend is None:
            raise EpisodeError("call reset() before step()")
        if self._ended:
            raise EpisodeError("the episode has ended (terminated or truncated); call reset() to start another")
        try:
            return self._step(action)
        except (AgentError, BackendError, EvaluationError) as exc:
            if self.config.on_env_failure == "raise":
                raise
            return self._env_failure(exc)

    def _step(self, action: Any) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        t0 = time.monotonic()
        self._steps += 1
        parsed: actions_mod.Action | None = None
        error: str | None = None
        outcome = ActionOutcome()
        try:
            parsed = actions_mod.parse_action(self.action_layout.decode(action), self.config.screen_size, self.limits)
            if not self.action_layout.allows(parsed.kind):
                parsed, error = None, self.action_layout.refusal(parsed.kind)
        except InvalidActionError as exc:
            error = str(exc)
        t_parsed = time.monotonic()
        if parsed is not None and parsed.kind not in ENDING_KINDS:
            result = self.coordinator.execute(parsed, self._budget_left(t0))
            outcome, error = result.outcome, result.error
        t_acted = time.monotonic()
        truncated_output = False
        if outcome.terminal is not None:
            self._terminal, truncated_output = _clip_terminal(outcome.terminal, self.config.terminal_max_chars)
            self._exit_code = int(outcome.exit_code if outcome.exit_code is not None else -1)
        self.coordinator.check_running()
        settled, screen_restored = self.coordinator.settled_frame()
        self._frame = settled.frame
        timings = {"parse_s": t_parsed - t0, "act_s": t_acted - t_parsed, "frame_s": settled.seconds,
                   "frame_grabs": float(settled.grabs), "step_s": time.monotonic() - t0}
        self.trajectory.record(StepRecord(
            index=self._steps, channel="invalid" if parsed is None else parsed.channel,
            frame=FrameRecord.of(self._steps, self._frame), action=None if parsed is None else parsed.to_dict(),
            action_text="" if parsed is None else parsed.to_text(), action_error=error, terminal=self._terminal,
            exit_code=self._exit_code, timings=timings))
        terminated = parsed is not None and parsed.kind in ENDING_KINDS
        self._env_seconds += time.monotonic() - t0
        step_limit = self._step_limit()
        truncated = not terminated and (self._steps >= step_limit or self._budget_left() <= 0)
        info = self._base_info()
        info.update(action_error=error, timings=timings, step=self._steps, screen_settled=settled.settled,
                    screen_restored=screen_restored, terminal_truncated=truncated_output or outcome.output_truncated,
                    command_timed_out=outcome.timed_out)
        reward = 0.0
        if terminated or truncated:
            self._ended = True
            evaluation = self.evaluate()
            reward = float(evaluation.score)
            info["evaluation"] = evaluation.to_dict()
            if self.task.simulated_user:
                info["transcript"] = self._transcript()
            info["end_reason"] = parsed.kind if terminated and parsed is not None else (
                "max_steps" if self._steps >= step_limit else "time_budget")
            timings["evaluate_s"] = evaluation.seconds
        return self._observation(), reward, terminated, truncated, info

    def _env_failure(self, exc: Exception) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        """The machine failed, not the agent: end the episode as truncated, unscored, and say why.

        The observation is the last good one. The next reset() brings the VM back (a new QEMU from the
        overlay, or a restarted agent), so a vector env keeps stepping.
        """
        self._ended = True
        failure = f"{type(exc).__name__}: {exc}"
        steps = [] if self.trajectory is None else self.trajectory.steps
        if self.trajectory is not None and self._frame is not None and steps and steps[-1].index != self._steps:
            # Failed before the step was recorded (during the action or the frame): record it as failed.
            self.trajectory.record(StepRecord(index=self._steps, channel="invalid",
                                              frame=FrameRecord.of(self._steps, self._frame), action_error=failure,
                                              terminal=self._terminal, exit_code=self._exit_code))
        info = self._base_info()
        info.update(env_failure=failure, end_reason="env_failure", step=self._steps)
        return self._observation(), 0.0, False, True, info

    def render(self) -> np.ndarray | None:
        if self.render_mode == "rgb_array":
            if self._frame is None:
                return None
            return self._frame.copy()
        if self.render_mode == "human":
            self._announce_vnc(force=True)
        return None

    def close(self) -> None:
        """Idempotent: tears the VM down (overlay, ports, locks); the env cannot be reset afterwards."""
        if self._closed:
            return
        self._closed = True
        self.coordinator.close()
        super().close()

    def evaluate(self) -> Evaluation:
        """Score the VM's current state against the task (the env calls this when an episode ends)."""
        return self.session.evaluate(self.backend, self.trajectory)

    # -- helpers ---------------------------------------------------------------------------------
    def _transcript(self) -> list[dict[str, Any]] | dict[str, str]:
        """The simulated user's chat for info; a transcript that cannot be read is said so, not raised: the
        score stands (its clauses saw the same file and failed on it)."""
        try:
            return self.session.transcript(self.backend) or []
        except TranscriptError as exc:
            return {"error": str(exc)}

    def _step_limit(self) -> int:
        """``max_steps``, or the ``max_episode_steps`` given to ``gym.make`` if lower: Gymnasium's TimeLimit
        truncates without asking the env, so the env ends (and scores) the episode on that same step."""
        limit = self.wrapper_step_limit
        return min(self.max_steps, limit) if limit else self.max_steps

    def _budget_left(self, step_started: float | None = None) -> float:
        if self.config.budget_clock == "wall":
            return self.time_budget_s - (time.monotonic() - self._episode_start)
        in_step = 0.0 if step_started is None else time.monotonic() - step_started
        return self.time_budget_s - self._env_seconds - in_step

    def _observation(self) -> dict[str, Any]:
        assert self._frame is not None
        return self.observation_layout.observe(self._frame, self._terminal, self._exit_code, self.instruction)

    def _base_info(self) -> dict[str, Any]:
        return {"task_id": self.task.id, "domain": self.task.domain, "instruction": self.instruction,
                "action_error": None}

    def _announce_vnc(self, force: bool = False) -> None:
        """``render_mode="human"`` on a headless host: say where to watch, once per env (or on render())."""
        if self.render_mode != "human" or (self._vnc_announced and not force) or self.backend is None:
            return
        self._vnc_announced = True
        print(f"weavegym: watch {self.task.id} at {self.backend.vnc}", flush=True)


def _config(config: EnvConfig | None, overrides: dict[str, Any]) -> EnvConfig:
    known = {f.name for f in fields(EnvConfig)}
    unknown = set(overrides) - known
    if unknown:
        raise TypeError(f"unknown WeaveEnv option(s) {sorted(unknown)}; known: {sorted(known)}")
    for name in ("screen_size", "observation_size", "action_kinds", "key_vocabulary", "observation_keys"):
        if overrides.get(name) is not None:  # lists from gym.make or JSON; the config keeps tuples
            overrides[name] = tuple(overrides[name])
    return replace(config or EnvConfig(), **overrides)


def _clip_terminal(text: str, limit: int) -> tuple[str, bool]:
    """Keep the head and the tail (where errors usually are) of long output; NULs become U+2400."""
    text = text.replace("\x00", "\u2400")
    if len(text) <= limit:
        return text, False
    marker = f"\n[… {len(text) - limit} characters omitted …]\n"
    head = (limit - len(marker)) // 4
    tail = limit - len(marker) - head
    return text[:head] + marker + text[-tail:], True
