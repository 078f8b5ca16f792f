"""Waiting on a condition with a deadline, the only way weavegym waits for readiness."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Deadline:
    """A point in monotonic time; ``remaining()`` never goes below zero."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self._end - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self._end


def wait_for(
    probe: Callable[[], T | None],
    timeout: float,
    *,
    what: str,
    poll: float = 0.05,
    max_poll: float = 0.5,
) -> T:
    """Call ``probe`` until it returns something other than None/False, or raise TimeoutError.

    The poll interval backs off geometrically so a slow guest is not hammered.
    """
    deadline = Deadline(timeout)
    interval = poll
    last_exc: Exception | None = None
    while True:
        try:
            result = probe()
            if result is not None and result is not False:
                return result
        except Exception as exc:  # the probe's failures are what we are waiting out
            last_exc = exc
        if deadline.expired():
            detail = f" (last error: {last_exc})" if last_exc else ""
            raise TimeoutError(f"timed out after {timeout:.1f}s waiting for {what}{detail}")
        time.sleep(min(interval, deadline.remaining()))
        interval = min(interval * 1.5, max_poll)
