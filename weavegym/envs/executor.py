"""Carries out one validated ``Action`` in the guest: GUI kinds through the agent's input, CLI through the shell.

The action has already been parsed and bounds-checked (``envs/actions.py``), so
this module only maps kinds onto agent calls and decides deadlines. The guest
may still refuse an action it alone can judge (an unknown key name); that
arrives as ``AgentRequestError``, which the env reports as an action error,
because the agent refuses before it injects anything.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from weavegym.envs.actions import Action
from weavegym.machine.guest_client import GuestClient
from weavegym.envs.shell_session import ShellSession

INPUT_TIMEOUT_S = 30.0
TYPE_SECONDS_PER_CHAR = 0.02  # generous: CJK text needs a keymap change per character (~3.6 ms each measured)


@dataclass(frozen=True)
class ActionOutcome:
    """What the action changes in the observation: CLI kinds replace the terminal, GUI kinds leave it."""

    terminal: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    output_truncated: bool = False


class ActionExecutor:
    def __init__(self, client: GuestClient, shell: ShellSession, default_timeout_s: float) -> None:
        self.client = client
        self.shell = shell
        self.default_timeout_s = default_timeout_s

    def execute(self, action: Action, budget_s: float) -> ActionOutcome:
        """Run ``action``; CLI deadlines are clipped to ``budget_s``, what is left of the episode's time."""
        c, kind = self.client, action.kind
        if kind in ("shell", "python"):
            timeout = max(0.5, min(action.timeout or self.default_timeout_s, budget_s))
            run = self.shell.shell if kind == "shell" else self.shell.python
            out = run(action.command if kind == "shell" else action.code, timeout)
            return ActionOutcome(out.text, out.exit_code, out.timed_out, out.output_truncated)
        if kind == "move":
            c.move(action.x, action.y, timeout=INPUT_TIMEOUT_S)
        elif kind in ("click", "double_click", "right_click"):
            button = "right" if kind == "right_click" else action.button
            c.click(action.x, action.y, button=button, count=2 if kind == "double_click" else 1,
                    timeout=INPUT_TIMEOUT_S)
        elif kind == "drag":
            c.drag((action.x, action.y), (action.to_x, action.to_y), button=action.button, timeout=INPUT_TIMEOUT_S)
        elif kind == "scroll":
            c.scroll(action.dx, action.dy, x=action.x, y=action.y, timeout=INPUT_TIMEOUT_S)
        elif kind == "type":
            c.type_text(action.text, timeout=INPUT_TIMEOUT_S + TYPE_SECONDS_PER_CHAR * len(action.text))
        elif kind == "key":
            c.key(action.keys, timeout=INPUT_TIMEOUT_S)
        elif kind == "mouse_down":
            c.mouse_down(action.x, action.y, button=action.button, timeout=INPUT_TIMEOUT_S)
        elif kind == "mouse_up":
            c.mouse_up(action.x, action.y, button=action.button, timeout=INPUT_TIMEOUT_S)
        elif kind == "wait":
            # The agent asked for time to pass (an app is loading); this is not a readiness wait. Past the
            # budget there is no time left to give: the step returns at once and the env truncates.
            time.sleep(max(0.0, min(action.seconds, budget_s)))
        # done / fail: nothing to do in the guest; the env ends the episode.
        return ActionOutcome()
