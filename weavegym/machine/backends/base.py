"""What the env needs from a backend, and the factory that picks one by name.

A backend owns one machine: it boots it, saves and loads named snapshots,
shows it over VNC, hands out a connected ``GuestClient`` and grabs frames. The
env never touches libvirt (or SSH) directly, so a new backend is one class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, Protocol, TypeVar

import numpy as np

from weavegym.machine.guest_client import GuestClient

BACKENDS = ("libvirt", "ssh")
_C = TypeVar("_C")


class Backend(Protocol):
    client: GuestClient | None
    timings: dict[str, float]
    supports_snapshots: bool  # False: reset() cannot restore state, so the env re-runs the task setup
    shares_snapshots: bool  # True: snapshots are host-wide, so another env may load the ones this one makes
    workspace_user: str  # the guest account the episode's shell and python actions run as
    # True when GUI apps and shell/python run as two accounts, so a file's owner says which channel made it
    # and the checker adds provenance clauses and the channel rules.
    separate_accounts: bool

    def start(self) -> Backend: ...
    def reset(self, snapshot: str) -> float: ...
    def save_snapshot(self, name: str) -> float: ...
    def delete_snapshot(self, name: str) -> None: ...
    # Snapshots that carry a payload (the task's prepared parameters and truth), so that a backend whose
    # snapshots are shared by every env on the host can hand one env the state another env set up.
    def find_snapshot(self, name: str) -> bytes | None: ...  # None: no such shared snapshot (yet)
    def make_snapshot(self, name: str, base: str, setup: Callable[[], bytes]) -> bytes: ...
    def grab_frame(self) -> np.ndarray: ...
    def is_running(self) -> bool: ...
    def close(self) -> None: ...
    @property
    def vnc(self) -> Any: ...


def make_backend(name: str, *, screen: tuple[int, int], profile: str, options: Mapping[str, Any]) -> Backend:
    """Build (not start) a backend. ``options`` are the backend's own config fields, e.g. ``memory_mib``."""
    if name == "libvirt":
        from weavegym.machine.backends.libvirt_vm import LibvirtConfig, LibvirtVM

        return LibvirtVM(_config(LibvirtConfig, name, screen, profile, options))
    if name == "ssh":
        from weavegym.machine.backends.ssh_machine import SshConfig, SshMachine

        return SshMachine(_config(SshConfig, name, screen, profile, options))
    raise ValueError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")


def _config(cls: type[_C], name: str, screen: tuple[int, int], profile: str, options: Mapping[str, Any]) -> _C:
    known = {f.name for f in fields(cls)} - {"screen", "profile"}  # type: ignore[arg-type]
    unknown = set(options) - known
    if unknown:
        raise ValueError(f"unknown {name} backend option(s) {sorted(unknown)}; known: {sorted(known)}")
    return cls(screen=screen, profile=profile, **options)  # type: ignore[call-arg]
