"""Keeping the guest's window manager responsive.

openbox 3.6 under TCG can stall right after startup with a MapRequest it has not
processed: the new window stays unmapped until some other X event reaches the WM
(measured: a probe window stayed unmapped for 30 s; one root property change made
openbox map it at once). Anything that waits for a window nudges the WM while it
waits.
"""

from __future__ import annotations

import time

from weavegym.machine.guest_client import GuestClient


def nudge_window_manager(client: GuestClient, display: str = ":0") -> None:
    """Change a property on the root window; the PropertyNotify wakes a stalled WM event loop."""
    client.exec(["xprop", "-root", "-f", "_WEAVEGYM_NUDGE", "32c", "-set", "_WEAVEGYM_NUDGE",
                 str(time.monotonic_ns() % 2**31)], env={"DISPLAY": display}, timeout=10)
