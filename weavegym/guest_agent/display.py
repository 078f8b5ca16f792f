"""One shared X connection for the agent's handlers.

python-xlib connections are not thread-safe and gRPC serves calls on a thread
pool, so every use goes through ``DisplayConnection.session()``, which holds a
lock. The connection is opened lazily (the agent may start before Xorg) and
reopened after the X server went away.

The lock is waited for with a deadline. A program in the session can freeze X for everyone else
(``XGrabServer``), and python-xlib then blocks in a read with no timeout while holding the lock; without
a deadline every later call, ``Health`` included, would hang behind it. With one, they fail with
``DisplayUnavailable`` and say why, and the agent serves again as soon as the grab ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from Xlib import display as xdisplay
from Xlib import error as xerror

from weavegym.guest_agent.errors import DisplayUnavailable

LOCK_TIMEOUT_S = 30.0  # longer than any one X operation the agent runs (typing 8k CJK characters: ~30 s)
HEALTH_TIMEOUT_S = 3.0


class DisplayConnection:
    def __init__(self, name: str, lock_timeout_s: float = LOCK_TIMEOUT_S) -> None:
        self.name = name
        self.lock_timeout_s = lock_timeout_s
        self._lock = threading.RLock()
        self._display: xdisplay.Display | None = None

    def open_private(self) -> xdisplay.Display:
        """A new, unshared connection, for a thread that runs its own event loop."""
        try:
            return xdisplay.Display(self.name)
        except (xerror.DisplayError, ConnectionError, OSError, OverflowError, ValueError) as exc:
            raise DisplayUnavailable(f"cannot open X display {self.name!r}: {exc}") from exc

    @contextmanager
    def session(self, timeout: float | None = None) -> Iterator[xdisplay.Display]:
        """Yield the shared connection under the lock; drop it if the server vanished."""
        wait = self.lock_timeout_s if timeout is None else timeout
        if not self._lock.acquire(timeout=wait):
            raise DisplayUnavailable(f"the X display {self.name!r} has been busy for {wait:g} s: another call is "
                                     "stuck in it (a program may hold a server grab)")
        try:
            if self._display is None:
                self._display = self.open_private()
            try:
                yield self._display
            except (xerror.ConnectionClosedError, BrokenPipeError, ConnectionResetError) as exc:
                self._drop()
                raise DisplayUnavailable(f"lost the X display {self.name!r}: {exc}") from exc
        finally:
            self._lock.release()

    def is_alive(self) -> bool:
        """Whether the display answers; a display stuck behind a grab counts as not alive."""
        try:
            with self.session(timeout=HEALTH_TIMEOUT_S) as d:
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
