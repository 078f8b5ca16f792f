"""weavegym: Gymnasium environments whose episodes run inside real desktop VMs.

This package holds only the CLI and the public re-exports; the parts live in
`weavegym.envs` (host side), `weavegym.guest_agent` (inside the guest) and
`weavegym.agent.v1` (the generated host<->guest protocol).

Re-exports are resolved lazily: the guest agent imports `weavegym.guest_agent`,
which runs this file, and must not pull in the host side (numpy, gymnasium…).
"""

from __future__ import annotations

import importlib
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
    "GuestClient": "weavegym.envs.guest_client",
    "ExecResult": "weavegym.envs.guest_client",
}

__all__ = [*sorted(_EXPORTS), "__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'weavegym' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
