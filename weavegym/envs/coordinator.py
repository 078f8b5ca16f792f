"""The machine side of one env: start the backend when first needed, run actions on it, keep its guest agent
alive, and grab settled frames of the env's screen size.

``WeaveEnv`` asks this for "do this action" and "what does the screen show now"; it never touches the
backend's life cycle itself. Recovery lives here too: an agent that restarts mid-action is waited for
and the action reported as uncertain; a machine that is gone raises ``BackendError`` and the next
``ensure_started`` (the env's next reset) lets the backend recover it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from weavegym.core.config import EnvConfig
from weavegym.core.errors import AgentError, AgentRequestError, AgentUnavailableError, BackendError, EpisodeError
from weavegym.envs.actions import Action
from weavegym.envs.executor import ActionExecutor
from weavegym.envs.shell_session import ShellSession
from weavegym.envs.vocabulary import ActionOutcome
from weavegym.machine.backends.base import Backend, make_backend
from weavegym.machine.frames import SettleResult, fit_frame, settle

AGENT_RESTART_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ActionResult:
    outcome: ActionOutcome
    error: str | None  # for info["action_error"]: the guest refused it, or the agent restarted during it


class Coordinator:
    def __init__(self, config: EnvConfig, profile: str, backend: Backend | None = None) -> None:
        self.config = config
        self.profile = profile
        self.backend: Backend | None = None
        self.restarted = False  # set by ensure_started when it started a new machine; the task session's cue
        # An injected backend (tests use testing.LocalBackend) replaces the one config.backend names; it is
        # started on first use and closed with the env, like one of our own.
        self._injected = backend
        self._executor: ActionExecutor | None = None
        self._vnc_given_to: Backend | None = None

    def ensure_started(self) -> Backend:
        """The running backend, started now if this is the first use (or the env's first reset)."""
        self.restarted = False
        if self.backend is None:
            options = dict(self.config.backend_options)
            if self.config.prepared_states:
                if self.config.backend != "libvirt":
                    raise ValueError(f"prepared_states needs the libvirt backend, not {self.config.backend!r}")
                options.setdefault("prepared_states", True)
            backend = self._injected or make_backend(self.config.backend, screen=self.config.screen_size,
                                                     profile=self.profile, options=options)
            self._injected = None  # a closed backend is not started twice
            backend.start()
            self.backend = backend
            self.restarted = True
        return self.backend

    def begin_episode(self) -> None:
        """A fresh terminal for the episode that starts now (a long-lived shell is ended, its jobs too)."""
        backend = self.running()
        self._executor_for(backend).shell.restart()

    def running(self) -> Backend:
        """The backend of the episode under way; ``EpisodeError`` before the first reset."""
        if self.backend is None or self.backend.client is None:
            raise EpisodeError("call reset() before step()")
        return self.backend

    def execute(self, action: Action, budget_s: float) -> ActionResult:
        """Run one validated action. Refusals and agent restarts come back as the action's error; a machine
        that stopped raises ``BackendError``."""
        backend = self.running()
        try:
            return ActionResult(self._executor_for(backend).execute(action, budget_s), None)
        except AgentRequestError as exc:
            return ActionResult(ActionOutcome(), f"the guest rejected the action, nothing was done: {exc}")
        except AgentUnavailableError as exc:
            return ActionResult(ActionOutcome(), self._recover_agent(backend, exc))

    def check_running(self) -> None:
        if self.backend is None or not self.backend.is_running():
            raise BackendError("the VM is not running (killed or crashed); call reset() to recover it")

    def settled_frame(self) -> tuple[SettleResult, bool]:
        """A settled frame of the env's screen size, and whether the guest's display mode had to be put back.

        An agent can change the mode (xrandr, the display settings dialog); the coordinator puts it back,
        so the observation's shape and the action space's coordinates keep meaning what they did. Should
        the guest refuse, the frame is scaled to size.
        """
        backend = self.running()
        stable = self.config.settle_stable_s
        result = settle(backend.grab_frame, self.config.settle_timeout_s, stable_for=stable)
        width, height = self.config.screen_size
        if result.frame.shape[:2] == (height, width):
            return result, False
        assert backend.client is not None
        backend.client.exec(["xrandr", "-s", f"{width}x{height}"], env={"DISPLAY": ":0"}, timeout=15)
        result = settle(backend.grab_frame, self.config.settle_timeout_s, stable_for=stable)
        return replace(result, frame=fit_frame(result.frame, self.config.screen_size)), True

    def vnc_info_once(self) -> dict[str, str]:
        """The machine's VNC address and password, once per machine (its first reset): step infos end up in
        logs and reports, and the password would go with them. ``env.unwrapped.backend.vnc`` has it any time."""
        vnc = None if self.backend is None else self.backend.vnc
        if vnc is None or self._vnc_given_to is self.backend:
            return {}
        self._vnc_given_to = self.backend
        return {"vnc": f"vnc://{vnc.host}:{vnc.port}", "vnc_password": vnc.password}

    def close(self) -> None:
        """Tears the machine down (overlay, ports, locks); idempotent."""
        backend, self.backend, self._executor, self._injected = self.backend, None, None, None
        if backend is not None:
            backend.close()

    def _executor_for(self, backend: Backend) -> ActionExecutor:
        assert backend.client is not None
        if self._executor is None or self._executor.client is not backend.client:
            shell = ShellSession(backend.client, user=backend.workspace_user, persistent=self.config.persistent_shell)
            self._executor = ActionExecutor(backend.client, shell, self.config.shell_timeout_s)
        return self._executor

    def _recover_agent(self, backend: Backend, exc: AgentUnavailableError) -> str:
        """The agent vanished mid-action. If it comes back (systemd restarts it), report the action as
        uncertain and go on; if the machine itself is gone, raise: the next reset recovers it."""
        assert backend.client is not None
        if not backend.is_running():
            raise BackendError("the VM stopped during the action; call reset() to recover it") from exc
        try:
            backend.client.reconnect()
            backend.client.wait_ready(AGENT_RESTART_TIMEOUT_S)
        except AgentError:
            raise exc from None
        return f"lost the guest agent during the action (it has restarted); the action may have partly run: {exc}"
