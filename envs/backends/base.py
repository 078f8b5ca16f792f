"""What the env needs from a backend, and the factory that picks one by name.

A backend owns one machine: it boots it, saves and loads named snapshots,
shows it over VNC, hands out a connected ``GuestClient`` and grabs frames. The
env never touches libvirt (or SSH) directly, so a new backend is one class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from weavegym.envs.guest_client import GuestClient

BACKENDS = ("libvirt",)


class Backend(Protocol):
    client: GuestClient | None
    timings: dict[str, float]

    def start(self) -> Backend: ...
    def reset(self, snapshot: str) -> float: ...
    def save_snapshot(self, name: str) -> float: ...
    def delete_snapshot(self, name: str) -> None: ...
    def grab_frame(self) -> np.ndarray: ...
    def is_running(self) -> bool: ...
    def close(self) -> None: ...
    @property
    def vnc(self) -> Any: ...


def make_backend(name: str, *, screen: tuple[int, int], profile: str, options: Mapping[str, Any]) -> Backend:
    """Build (not start) a backend. ``options`` are the backend's own config fields, e.g. ``memory_mib``."""
    if name == "libvirt":
        from dataclasses import fields

        from weavegym.envs.backends.libvirt_vm import LibvirtConfig, LibvirtVM

        known = {f.name for f in fields(LibvirtConfig)} - {"screen", "profile"}
        unknown = set(options) - known
        if unknown:
            raise ValueError(f"unknown libvirt backend option(s) {sorted(unknown)}; known: {sorted(known)}")
        return LibvirtVM(LibvirtConfig(screen=screen, profile=profile, **options))
    raise ValueError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)} (the ssh backend is planned)")
