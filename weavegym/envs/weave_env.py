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
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, ClassVar, SupportsFloat

import gymnasium as gym
import numpy as np

from weavegym.envs import actions as actions_mod
from weavegym.envs.vocabulary import ENDING_KINDS
from weavegym.machine.backends.base import Backend, make_backend
from weavegym.core.config import EnvConfig
from weavegym.core.errors import (
    AgentError,
    AgentRequestError,
    AgentUnavailableError,
    BackendError,
    EpisodeError,
    InvalidActionError,
    TaskError,
)
from weavegym.envs.executor import ActionExecutor, ActionOutcome
from weavegym.machine.frames import SettleResult, fit_frame, settle
from weavegym.envs.setup_context import SetupContext
from weavegym.envs.shell_session import ShellSession
from weavegym.envs.spaces import action_space, observation_space
from weavegym.envs.task import Prepared, Task
from weavegym.envs.task_snapshots import TaskSnapshot, TaskSnapshotCache, snapshot_name
from weavegym.envs.tasks import get_task
from weavegym.evaluators import Evaluation, ForbiddenPatterns, Probe, evaluate
from weavegym.evaluators.channel_rules import DesktopAccessUnchanged, NoDesktopTerminalWork
from weavegym.evaluators.provenance import provenance_clauses
from weavegym.core.trajectory import FrameRecord, StepRecord, Trajectory

READY = "ready"
AGENT_RESTART_TIMEOUT_S = 30.0


class WeaveEnv(gym.Env[dict[str, Any], dict[str, Any]]):
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array", "human"], "render_fps": 2}

    def __init__(self, task_id: str | Task, render_mode: str | None = None, *, config: EnvConfig | None = None,
                 backend: Backend | None = None, **overrides: Any) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None")
        # A Task object (not just a registered id) lets tests and task authors run unregistered variants.
        self.task: Task = task_id if isinstance(task_id, Task) else get_task(task_id)
        self.config = _config(config, overrides)
        self.render_mode = render_mode
        self.profile = self.config.profile or self.task.profile
        if self.task.profile == "full" and self.profile != "full":
            raise TaskError(f"{self.task.id} needs the 'full' image profile, not {self.profile!r}")
        self.max_steps = self.config.max_steps or self.task.max_steps
        self.time_budget_s = self.config.time_budget_s or self.task.time_budget_s
        self.limits = actions_mod.ActionLimits(default_timeout_s=self.config.shell_timeout_s)
        self.observation_space = observation_space(self.config.screen_size, self.config.terminal_max_chars)
        self.action_space = action_space(self.config.screen_size, self.limits)
        # An injected backend (tests use testing.LocalBackend) replaces the one config.backend names; the
        # env starts it on the first reset and closes it with the env, like its own.
        self.backend: Backend | None = None
        self._injected = backend
        self.trajectory: Trajectory | None = None
        self.prepared: Prepared | None = None
        self.instruction = ""
        self.task_seed: int | None = None
        self._snapshots = TaskSnapshotCache(self.config.max_task_snapshots)
        self._executor: ActionExecutor | None = None
        self._frame: np.ndarray | None = None
        self._terminal, self._exit_code = "", 0
        self._steps, self._episode_start, self._ended = 0, 0.0, True
        self._screen_restored = False  # this step's frame needed the guest's display mode put back
        self._vnc_announced = False
        self._vnc_given_to: Backend | None = None
        self._closed = False

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
        backend = self._ensure_backend()
        self.task_seed = self._pick_task_seed(seed, options)
        snapshot, created = self._load_task_snapshot(backend, self.task_seed)
        self.prepared = snapshot.prepared
        self.instruction = self.task.render_instruction(snapshot.prepared)
        self._terminal, self._exit_code, self._steps, self._ended = "", 0, 0, False
        frame_start = time.monotonic()
        self._frame = self._settle().frame
        timings = {"reset_s": time.monotonic() - start, "frame_s": time.monotonic() - frame_start}
        self.trajectory = Trajectory(self.task.id, self.task_seed, self.instruction, started_wall=time.time())
        self.trajectory.record(StepRecord(index=0, channel="reset", frame=FrameRecord.of(0, self._frame),
                                          timings=timings))
        self._episode_start = time.monotonic()
        info = self._base_info()
        info.update(task_seed=self.task_seed, snapshot="created" if created else "cached", timings=timings)
        info.update(self._vnc_info())
        self._announce_vnc()
        return self._observation(), info

    def step(self, action: Any) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        if self.trajectory is None or self.backend is None:
            raise EpisodeError("call reset() before step()")
        if self._ended:
            raise EpisodeError("the episode has ended (terminated or truncated); call reset() to start another")
        t0 = time.monotonic()
        self._steps += 1
        parsed: actions_mod.Action | None = None
        error: str | None = None
        outcome = ActionOutcome()
        try:
            parsed = actions_mod.parse_action(action, self.config.screen_size, self.limits)
        except InvalidActionError as exc:
            error = str(exc)
        t_parsed = time.monotonic()
        if parsed is not None and parsed.kind not in ENDING_KINDS:
            try:
                outcome = self._executor_for().execute(parsed, self._budget_left())
            except AgentRequestError as exc:
                error = f"the guest rejected the action, nothing was done: {exc}"
            except AgentUnavailableError as exc:
                error = self._recover_agent(exc)
        t_acted = time.monotonic()
        truncated_output = False
        if outcome.terminal is not None:
            self._terminal, truncated_output = _clip_terminal(outcome.terminal, self.config.terminal_max_chars)
            self._exit_code = int(outcome.exit_code if outcome.exit_code is not None else -1)
        if not self.backend.is_running():
            raise BackendError("the VM is not running (killed or crashed); call reset() to recover it")
        self._screen_restored = False
        settled = self._settle()
        self._frame = settled.frame
        timings = {"parse_s": t_parsed - t0, "act_s": t_acted - t_parsed, "frame_s": settled.seconds,
                   "frame_grabs": float(settled.grabs), "step_s": time.monotonic() - t0}
        channel = "invalid" if parsed is None else parsed.channel
        self.trajectory.record(StepRecord(
            index=self._steps, channel=channel, frame=FrameRecord.of(self._steps, self._frame),
            action=None if parsed is None else parsed.to_dict(), action_text="" if parsed is None else parsed.to_text(),
            action_error=error, terminal=self._terminal, exit_code=self._exit_code, timings=timings))
        terminated = parsed is not None and parsed.kind in ENDING_KINDS
        truncated = not terminated and (self._steps >= self.max_steps or self._budget_left() <= 0)
        info = self._base_info()
        info.update(action_error=error, timings=timings, step=self._steps, screen_settled=settled.settled,
                    screen_restored=self._screen_restored,
                    terminal_truncated=truncated_output or outcome.output_truncated,
                    command_timed_out=outcome.timed_out)
        reward = 0.0
        if terminated or truncated:
            self._ended = True
            evaluation = self.evaluate()
            reward = float(evaluation.score)
            info["evaluation"] = evaluation.to_dict()
            info["end_reason"] = parsed.kind if terminated and parsed is not None else (
                "max_steps" if self._steps >= self.max_steps else "time_budget")
            timings["evaluate_s"] = evaluation.seconds
        return self._observation(), reward, terminated, truncated, info

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
        if self.backend is not None:
            self.backend.close()
            self.backend = None
        self._executor = None
        super().close()

    # -- scoring ---------------------------------------------------------------------------------
    def evaluate(self) -> Evaluation:
        """Score the VM's current state against the task (the env calls this when an episode ends)."""
        if self.trajectory is None or self.prepared is None or self.backend is None:
            raise EpisodeError("nothing to evaluate: call reset() first")
        assert self.backend.client is not None
        rules: tuple[Any, ...] = (ForbiddenPatterns(), *self.task.rules)
        clauses: tuple[Any, ...] = self.task.clauses
        # Where the guest keeps the channels apart (always, on weavegym's image), hold the episode to it. A
        # machine without a workspace account (ssh backend) runs both channels as one account: no provenance.
        if self.backend.separate_accounts:
            owners = {d.owner for d in self.task.deliverables if d.owner}
            rules = (DesktopAccessUnchanged(owners - {"root"}), NoDesktopTerminalWork(), *rules)
            clauses = (*clauses, *provenance_clauses(self.task.deliverables))
        return evaluate(clauses, rules, Probe(self.backend.client), self.trajectory,
                        self.prepared.truth, pass_threshold=self.task.pass_threshold)

    # -- helpers ---------------------------------------------------------------------------------
    def _ensure_backend(self) -> Backend:
        if self.backend is None:
            backend = self._injected or make_backend(self.config.backend, screen=self.config.screen_size,
                                                     profile=self.profile, options=self.config.backend_options)
            self._injected = None  # a closed backend is not started twice
            backend.start()
            self.backend = backend
            self._snapshots.clear()
        return self.backend

    def _executor_for(self) -> ActionExecutor:
        assert self.backend is not None and self.backend.client is not None
        if self._executor is None or self._executor.client is not self.backend.client:
            shell = ShellSession(self.backend.client, user=self.backend.workspace_user)
            self._executor = ActionExecutor(self.backend.client, shell, self.config.shell_timeout_s)
        return self._executor

    def _pick_task_seed(self, seed: int | None, options: dict[str, Any]) -> int:
        if "task_seed" in options:
            value = options["task_seed"]
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
                raise ValueError(f"options['task_seed'] must be a non-negative int, not {value!r}")
            return int(value)
        if seed is not None:
            return int(seed)
        if self.config.task_variants > 1:
            return int(self.np_random.integers(self.config.task_variants))
        return self.task_seed if self.task_seed is not None else 0

    def _load_task_snapshot(self, backend: Backend, seed: int) -> tuple[TaskSnapshot, bool]:
        """The task's state for ``seed``: a cached snapshot, or setup on ``ready`` (then cached).

        Backends without snapshots (``supports_snapshots = False``) run the setup on every reset.
        """
        cached = self._snapshots.get(seed)
        if cached is not None:
            backend.reset(cached.name)
            return cached, False
        backend.reset(READY)
        assert backend.client is not None
        setup_start = time.monotonic()
        prepared = self.task.setup(SetupContext(backend.client, self.task.id, seed, self.config.screen_size))
        if not isinstance(prepared, Prepared):
            raise TaskError(f"{self.task.id}: setup must return a Prepared, not {type(prepared).__name__}")
        # Let the setup's windows finish drawing: a snapshot of a half-drawn screen replays the redraw
        # after every reset, so the first observation would differ from the next one.
        settle(backend.grab_frame, 60.0, stable_for=self.config.setup_stable_s)
        entry = TaskSnapshot(snapshot_name(self.task.id, seed), seed, prepared)
        if not backend.supports_snapshots:
            # e.g. the ssh backend: its reset(READY) stopped the last setup's programs; nothing to cache.
            backend.timings["last_setup_s"] = time.monotonic() - setup_start
            return entry, True
        backend.save_snapshot(entry.name)
        backend.timings["last_setup_s"] = time.monotonic() - setup_start
        for old in self._snapshots.add(entry):
            backend.delete_snapshot(old.name)
        backend.reset(entry.name)  # every episode starts from a snapshot load, the first one included
        return entry, True

    def _recover_agent(self, exc: AgentUnavailableError) -> str:
        """The agent vanished mid-action. If it comes back (systemd restarts it), report the action as
        uncertain and go on; if the VM itself is gone, raise: the next ``reset()`` recovers it."""
        assert self.backend is not None and self.backend.client is not None
        if not self.backend.is_running():
            raise BackendError("the VM stopped during the action; call reset() to recover it") from exc
        try:
            self.backend.client.reconnect()
            self.backend.client.wait_ready(AGENT_RESTART_TIMEOUT_S)
        except AgentError:
            raise exc from None
        return f"lost the guest agent during the action (it has restarted); the action may have partly run: {exc}"

    def _settle(self) -> SettleResult:
        """A settled frame of the env's screen size, whatever the episode did to the guest's display mode.

        An agent can change the mode (xrandr, the display settings dialog); the env puts it back, so the
        observation's shape and the action space's coordinates keep meaning what they did. Should the
        guest refuse, the frame is scaled to size. Either way the step's info says ``screen_restored``.
        """
        assert self.backend is not None
        result = settle(self.backend.grab_frame, self.config.settle_timeout_s, stable_for=self.config.settle_stable_s)
        width, height = self.config.screen_size
        if result.frame.shape[:2] == (height, width):
            return result
        self._screen_restored = True
        assert self.backend.client is not None
        self.backend.client.exec(["xrandr", "-s", f"{width}x{height}"], env={"DISPLAY": ":0"}, timeout=15)
        result = settle(self.backend.grab_frame, self.config.settle_timeout_s, stable_for=self.config.settle_stable_s)
        return replace(result, frame=fit_frame(result.frame, self.config.screen_size))

    def _budget_left(self) -> float:
        return self.time_budget_s - (time.monotonic() - self._episode_start)

    def _observation(self) -> dict[str, Any]:
        assert self._frame is not None
        return {"screen": self._frame.copy(), "terminal": self._terminal,
                "exit_code": np.array(self._exit_code, dtype=np.int64), "instruction": self.instruction}

    def _base_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"task_id": self.task.id, "domain": self.task.domain, "instruction": self.instruction,
                                "action_error": None}
        return info

    def _vnc_info(self) -> dict[str, str]:
        """The VM's VNC address and password, once per VM (its first reset): step infos end up in logs and
        reports, and the password would go with them. ``env.unwrapped.backend.vnc`` has it any time."""
        vnc = None if self.backend is None else self.backend.vnc
        if vnc is None or self._vnc_given_to is self.backend:
            return {}
        self._vnc_given_to = self.backend
        return {"vnc": f"vnc://{vnc.host}:{vnc.port}", "vnc_password": vnc.password}

    def _announce_vnc(self, force: bool = False) -> None:
        """``render_mode="human"`` on a headless host: say where to watch, once per env (or on render())."""
        if self.render_mode != "human" or (self._vnc_announced and not force) or self.backend is None:
            return
        self._vnc_announced = True
        print(f"weavegym: watch {self.task.id} at {self.backend.vnc}", flush=True)


def _config(config: EnvConfig | None, overrides: dict[str, Any]) -> EnvConfig:
    from dataclasses import fields, replace

    known = {f.name for f in fields(EnvConfig)}
    unknown = set(overrides) - known
    if unknown:
        raise TypeError(f"unknown WeaveEnv option(s) {sorted(unknown)}; known: {sorted(known)}")
    if "screen_size" in overrides:
        overrides["screen_size"] = tuple(overrides["screen_size"])
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
