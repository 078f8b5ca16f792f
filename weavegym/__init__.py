"""weavegym: Gymnasium environments whose episodes run inside real desktop VMs.

This package holds only the CLI and the public re-exports; the parts live in
`weavegym.envs` (host side), `weavegym.guest_agent` (inside the guest) and
`weavegym.agent.v1` (the generated host<->guest protocol).

Re-exports are resolved lazily: the guest agent imports `weavegym.guest_agent`,
which runs this file, and must not pull in the host side (numpy, gymnasium…).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "WeaveGymError": "weavegym.envs.errors",
    "HostSetupError": "weavegym.envs.errors",
    "AgentError": "weavegym.envs.errors",
    "AgentUnavailableError": "weavegym.envs.errors",
    "AgentTimeoutError": "weavegym.envs.errors",
    "AgentAuthError": "weavegym.envs.errors",
    "AgentRequestError": "weavegym.envs.errors",
    "AgentInternalError": "weavegym.envs.errors",
    "GuestPathNotFoundError": "weavegym.envs.errors",
    "InvalidActionError": "weavegym.envs.errors",
    "TaskError": "weavegym.envs.errors",
    "EpisodeError": "weavegym.envs.errors",
    "BackendError": "weavegym.envs.errors",
    "GuestClient": "weavegym.envs.guest_client",
    "ExecResult": "weavegym.envs.guest_client",
    "WeaveEnv": "weavegym.envs.weave_env",
    "EnvConfig": "weavegym.envs.config",
    "tool_schema": "weavegym.envs.actions",
    "parse_action": "weavegym.envs.actions",
    "Action": "weavegym.envs.actions",
    "Task": "weavegym.envs.task",
    "all_tasks": "weavegym.envs.tasks",
    "get_task": "weavegym.envs.tasks",
}

__all__ = [*sorted(_EXPORTS), "__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'weavegym' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def _register_tasks() -> None:
    """`import weavegym` registers every task as a Gymnasium id (`Weave-<Domain>-<N>`).

    Skipped where gymnasium is absent: inside the guest, which imports this file
    for the agent and must stay free of host dependencies.
    """
    if importlib.util.find_spec("gymnasium") is not None:
        from weavegym.envs.registration import register_tasks

        register_tasks()


_register_tasks()
