"""The action vocabulary as one table: every kind is declared once, as the function that carries it out.

A kind's fields and defaults are its function's parameters (positional order = the order text arguments
bind in), its description is the docstring, and ``@_kind`` says its channel, its aliases and whether it
ends the episode. Everything else is derived from :data:`VOCABULARY`: ``KINDS`` (whose order is the
Discrete index of the Gym action space, so kinds are only ever appended), the channel sets, the tool
schema and its descriptions, text parsing and the executor's dispatch. Validation of field *values* is
per field name, in ``actions.py``, because ``x`` means the same thing for every kind that has one.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from weavegym.envs.shell_session import ShellSession
    from weavegym.machine.guest_client import GuestClient

Channel = Literal["gui", "cli", "control"]
REQUIRED: Any = inspect.Parameter.empty  # the default of a field that has none

INPUT_TIMEOUT_S = 30.0
TYPE_SECONDS_PER_CHAR = 0.02  # generous: CJK text needs a keymap change per character (~3.6 ms each measured)


@dataclass(frozen=True)
class ActionOutcome:
    """What the action changes in the observation: CLI kinds replace the terminal, GUI kinds leave it."""

    terminal: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    output_truncated: bool = False


@dataclass(frozen=True)
class ExecContext:
    """What a kind's handler may use: the guest's input, the episode's shell, and the time left."""

    guest: GuestClient
    shell: ShellSession
    default_timeout_s: float
    budget_s: float  # what is left of the episode's time; CLI deadlines are clipped to it


@dataclass(frozen=True)
class KindSpec:
    name: str
    channel: Channel
    fields: tuple[tuple[str, Any], ...]  # (name, default or REQUIRED), in positional order
    description: str  # "{where}" stands for the sentence about screen coordinates
    run: Callable[..., ActionOutcome]  # run(ctx, **fields)
    aliases: Mapping[str, str] = field(default_factory=dict)  # other names accepted for a field
    ends_episode: bool = False

    def describe(self, width: int, height: int) -> str:
        where = f"Coordinates are pixels from the top-left corner of the {width}x{height} screen."
        return self.description.format(where=where)


VOCABULARY: dict[str, KindSpec] = {}


def _kind(channel: Channel, *, aliases: Mapping[str, str] | None = None,
          ends_episode: bool = False) -> Callable[[Callable[..., ActionOutcome]], Callable[..., ActionOutcome]]:
    """Declare the decorated function as an action kind, named after it (a trailing ``_`` dropped)."""

    def register(fn: Callable[..., ActionOutcome]) -> Callable[..., ActionOutcome]:
        name = fn.__name__.rstrip("_")
        params = list(inspect.signature(fn).parameters.values())[1:]  # the first is the ExecContext
        fields = tuple((p.name, p.default) for p in params)
        description = " ".join(inspect.cleandoc(fn.__doc__ or "").split())
        VOCABULARY[name] = KindSpec(name, channel, fields, description, fn, dict(aliases or {}), ends_episode)
        return fn

    return register


# The Gym action space has one shared `text` field, so it stands in for these kinds' own text field.
# Definition order below is the Discrete order of the action space: append new kinds at the end.


@_kind("gui")
def move(ctx: ExecContext, x: int, y: int) -> ActionOutcome:
    """Move the mouse pointer without clicking. {where}"""
    ctx.guest.move(x, y, timeout=INPUT_TIMEOUT_S)
    return ActionOutcome()


@_kind("gui")
def click(ctx: ExecContext, x: int, y: int, button: str = "left") -> ActionOutcome:
    """Click a mouse button at a point. {where}"""
    ctx.guest.click(x, y, button=button, count=1, timeout=INPUT_TIMEOUT_S)
    return ActionOutcome()


@_kind("gui")
def double_click(ctx: ExecContext, x: int, y: int, button: str = "left") -> ActionOutcome:
    """Double-click a mouse button at a point. {where}"""
    ctx.guest.click(x, y, button=button, count=2, timeout=INPUT_TIMEOUT_S)
    return ActionOutcome()


@_kind("gui")
def right_click(ctx: ExecContext, x: int, y: int) -> ActionOutcome:
    """Right-click at a point, e.g. to open a context menu. {where}"""
    ctx.guest.click(x, y, button="right", count=1, timeout=INPUT_TIMEOUT_S)
    return ActionOutcome()


@_kind("gui")
def drag(ctx: ExecContext, x: int, y: int, to_x: int, to_y: int, button: str = "left") -> ActionOutcome:
    """Press a button at (x, y), move to (to_x, to_y) and release. {where}"""
    ctx.guest.drag((x, y), (to_x, to_y), button=button, timeout=INPUT_TIMEOUT_S)
    return ActionOutcome()


@_kind("gui")
def scroll(ctx: ExecContext, dy: int = 0, dx: int = 0, x: int | None = None, y: int | None = None) -> ActionOutcome:
    """Turn the mouse wheel by dy (vertical) and/or dx (horizontal) notches, at (x, y) if given. {where}"""
    ctx.guest.scroll(dx, dy, x=x, y=y, timeout=INPUT_TIMEOUT_S)
    return ActionOutcome()


@_kind("gui")
def type_(ctx: ExecContext, text: str) -> ActionOutcome:
    """Type text into the focused window as keystrokes."""
    ctx.guest.type_text(text, timeout=INPUT_TIMEOUT_S + TYPE_SECONDS_PER_CHAR * len(text))
    return ActionOutcome()


@_kind("gui", aliases={"text": "keys"})
def key(ctx: ExecContext, keys: str) -> ActionOutcome:
    """Press one key combination, e.g. 'ctrl+s', 'Return' or 'alt+F4'."""
    ctx.guest.key(keys, timeout=INPUT_TIMEOUT_S)
    return ActionOutcome()


@_kind("gui")
def mouse_down(ctx: ExecContext, x: int | None = None, y: int | None = None, button: str = "left") -> ActionOutcome:
    """Press and hold a mouse button, at (x, y) if given. {where}"""
    ctx.guest.mouse_down(x, y, button=button, timeout=INPUT_TIMEOUT_S)
    return ActionOutcome()


@_kind("gui")
def mouse_up(ctx: ExecContext, x: int | None = None, y: int | None = None, button: str = "left") -> ActionOutcome:
    """Release a held mouse button, at (x, y) if given. {where}"""
    ctx.guest.mouse_up(x, y, button=button, timeout=INPUT_TIMEOUT_S)
    return ActionOutcome()


@_kind("control")
def wait(ctx: ExecContext, seconds: float = 1.0) -> ActionOutcome:
    """Do nothing for some seconds, e.g. while an application loads."""
    # The agent asked for time to pass; this is not a readiness wait. Past the budget there is no time
    # left to give: the step returns at once and the env truncates.
    time.sleep(max(0.0, min(seconds, ctx.budget_s)))
    return ActionOutcome()


def _cli_timeout(ctx: ExecContext, timeout: float | None) -> float:
    return max(0.5, min(timeout or ctx.default_timeout_s, ctx.budget_s))


@_kind("cli", aliases={"text": "command"})
def shell(ctx: ExecContext, command: str, timeout: float | None = None) -> ActionOutcome:
    """Run a command in a persistent bash shell (the workspace account: same home folder as the desktop,
    but no access to the screen or clipboard); cd and exports persist between calls. Returns the output
    and exit code."""
    out = ctx.shell.shell(command, _cli_timeout(ctx, timeout))
    return ActionOutcome(out.text, out.exit_code, out.timed_out, out.output_truncated)


@_kind("cli", aliases={"text": "code"})
def python(ctx: ExecContext, code: str, timeout: float | None = None) -> ActionOutcome:
    """Run Python code in a fresh interpreter as the workspace account (no screen access); nothing
    persists between calls. Returns the output and exit code."""
    out = ctx.shell.python(code, _cli_timeout(ctx, timeout))
    return ActionOutcome(out.text, out.exit_code, out.timed_out, out.output_truncated)


@_kind("control", ends_episode=True)
def done(ctx: ExecContext, answer: str = "") -> ActionOutcome:
    """Declare the task finished, with the answer if the task asks a question. This ends the episode and
    triggers scoring."""
    return ActionOutcome()


@_kind("control", ends_episode=True)
def fail(ctx: ExecContext, reason: str = "") -> ActionOutcome:
    """Declare the task infeasible, with the reason (what is missing or broken). This ends the episode and
    triggers scoring: where a task cannot be done, an honest fail that names the cause is the right answer."""
    return ActionOutcome()


KINDS: tuple[str, ...] = tuple(VOCABULARY)
GUI_KINDS: tuple[str, ...] = tuple(k for k, spec in VOCABULARY.items() if spec.channel == "gui")
CLI_KINDS: tuple[str, ...] = tuple(k for k, spec in VOCABULARY.items() if spec.channel == "cli")
CONTROL_KINDS: tuple[str, ...] = tuple(k for k, spec in VOCABULARY.items() if spec.channel == "control")
ENDING_KINDS: tuple[str, ...] = tuple(k for k, spec in VOCABULARY.items() if spec.ends_episode)
