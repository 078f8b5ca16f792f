"""Host-wide defaults from the environment: where weavegym keeps images, overlays, locks and probe results
(outside the repo, shared by envs), and how long it waits for a VM on a host that may be shared."""

from __future__ import annotations

import os
from pathlib import Path

from weavegym.core.errors import HostSetupError

DEFAULT_BOOT_TIMEOUT_S = 300.0
DEFAULT_RESET_TIMEOUT_S = 60.0
DEFAULT_STATES_MAX_GB = 24.0


def default_cache_dir() -> Path:
    """``$WEAVEGYM_CACHE_DIR``, else ``~/.cache/weavegym``."""
    override = os.environ.get("WEAVEGYM_CACHE_DIR")
    return Path(override) if override else Path.home() / ".cache" / "weavegym"


def default_boot_timeout() -> float:
    """``$WEAVEGYM_BOOT_TIMEOUT_S``, else 300 s: how long a cold boot may take to reach a drawn desktop.

    Under TCG a cold boot takes about 90 s on an idle 2-core host, but several times that when other VMs share
    the cores (six at once here took over 300 s for the full image). The boot is a wait on a condition, so a
    longer deadline costs nothing when the host is idle; a host that runs many VMs raises it here rather than
    in every config.
    """
    return _seconds_from_env("WEAVEGYM_BOOT_TIMEOUT_S", DEFAULT_BOOT_TIMEOUT_S)


def default_reset_timeout() -> float:
    """``$WEAVEGYM_RESET_TIMEOUT_S``, else 60 s: how long the agent may take to answer after a snapshot restore
    (about 1 s idle; six VMs at once on two cores here took over 60 s)."""
    return _seconds_from_env("WEAVEGYM_RESET_TIMEOUT_S", DEFAULT_RESET_TIMEOUT_S)


def default_states_max_bytes() -> int:
    """``$WEAVEGYM_STATES_MAX_GB``, else 24: how much disk the prepared task states of one image and machine shape
    may take before the least recently used ones are removed (about 1 GiB each; a prepared-states validation of
    all 60 tasks would otherwise leave 60 of them behind)."""
    raw = os.environ.get("WEAVEGYM_STATES_MAX_GB", "")
    try:
        value = float(raw) if raw.strip() else DEFAULT_STATES_MAX_GB
    except ValueError:
        raise HostSetupError(f"WEAVEGYM_STATES_MAX_GB={raw!r} is not a number of GiB") from None
    if not 0 <= value < 1 << 20:
        raise HostSetupError(f"WEAVEGYM_STATES_MAX_GB={raw!r} must be 0 or more")
    return int(value * (1 << 30))


def _seconds_from_env(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        raise HostSetupError(f"{name}={raw!r} is not a number of seconds") from None
    if not 0 < value < 86400:
        raise HostSetupError(f"{name}={raw!r} must be between 0 and 86400 seconds")
    return value
