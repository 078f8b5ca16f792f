"""One shared X connection for the agent's handlers.

python-xlib connections are not thread-safe and gRPC serves calls on a thread
pool, so every use goes through ``DisplayConnection.session()``, which holds a
lock. The connection is opened lazily (the agent may start before Xorg) and
reopened after the X server went away.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from Xlib import display as xdisplay
from Xlib import error as xerror

from weavegym.guest_agent.errors import DisplayUnavailable


class DisplayConnection:
    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.RLock()
        self._display: xdisplay.Display | None = None

    def open_private(self) -> xdisplay.Display:
        """A new, unshared connection, for a thread that runs its own event loop."""
        try:
            return xdisplay.Display(self.name)
        except (xerror.DisplayError, ConnectionError, OSError, OverflowError, ValueError) as exc:
            raise DisplayUnavailable(f"cannot open X display {self.name!r}: {exc}") from exc

    @contextmanager
    def session(self) -> Iterator[xdisplay.Display]:
        """Yield the shared connection under the lock; drop it if the server vanished."""
        with self._lock:
            if self._display is None:
                self._display = self.open_private()
            try:
                yield self._display
            except (xerror.ConnectionClosedError, BrokenPipeError, ConnectionResetError) as exc:
                self._drop()
                raise DisplayUnavailable(f"lost the X display {self.name!r}: {exc}") from exc

    def is_alive(self) -> bool:
        try:
            with self.session() as d:
                d.get_input_focus()
            return True
        except DisplayUnavailable:
            return False

    def _drop(self) -> None:
        if self._display is not None:
            try:
                self._display.close()
            except Exception:
                pass
            self._display = None

    def close(self) -> None:
        with self._lock:
            self._drop()
