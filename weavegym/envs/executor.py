"""Carries out one validated ``Action`` in the guest, through the handler its kind declares.

The action has already been parsed and bounds-checked (``envs/actions.py``), and each kind's handler
lives with its declaration in ``envs/vocabulary.py``; this module only builds the handler's context.
The guest may still refuse an action it alone can judge (an unknown key name); that arrives as
``AgentRequestError``, which the env reports as an action error, because the agent refuses before it
injects anything.
"""

from __future__ import annotations

from weavegym.envs.actions import Action
from weavegym.envs.shell_session import ShellSession
from weavegym.envs.vocabulary import VOCABULARY, ActionOutcome, ExecContext
from weavegym.machine.guest_client import GuestClient

__all__ = ["ActionExecutor", "ActionOutcome"]


class ActionExecutor:
    def __init__(self, client: GuestClient, shell: ShellSession, default_timeout_s: float) -> None:
        self.client = client
        self.shell = shell
        self.default_timeout_s = default_timeout_s

    def execute(self, action: Action, budget_s: float) -> ActionOutcome:
        """Run ``action``; CLI deadlines are clipped to ``budget_s``, what is left of the episode's time."""
        spec = VOCABULARY[action.kind]
        context = ExecContext(self.client, self.shell, self.default_timeout_s, budget_s)
        return spec.run(context, **{name: getattr(action, name) for name, _default in spec.fields})
