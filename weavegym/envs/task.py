"""The task format: declarative data plus three small hooks (setup, checker clauses, oracle).

A task module under ``envs/tasks/<domain>/`` defines ``TASK = Task(...)``.
CONTRIBUTING.md ("Adding a task") walks through one. The split of
responsibilities is what keeps scoring honest:

* ``setup`` runs inside the VM (as root, through the agent) on the ``ready``
  snapshot, derives everything random from the seed, and returns the
  instruction's parameters plus the ground truth. The truth stays in host
  memory; it is never written into the guest.
* ``clauses`` are the checker: each reads the final VM state through read-only
  probes (as root) and compares it with the truth.
* ``oracle`` is a reference solution written against the public action API
  (the same dicts/text an agent sends). ``weavegym validate`` replays it in full
  (must score 1.0), restricted to one channel (must fail), and checks that doing
  nothing scores 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from weavegym.core.errors import TaskError
from weavegym.evaluators.provenance import CHANNEL_NAMES as CHANNEL_NAMES
from weavegym.evaluators.provenance import Deliverable

if TYPE_CHECKING:
    from weavegym.envs.setup_context import SetupContext
    from weavegym.evaluators.scoring import Clause
    from weavegym.evaluators.trajectory_rules import TrajectoryRule

# WeaveBench's eight domains, in suite order. Each is a folder under envs/tasks/; this is the one list.
DOMAINS = ("Productivity", "Docs", "Games", "Web", "Data", "DevOps", "Spatial", "Design")
TASK_ID = re.compile(rf"^Weave-({'|'.join(DOMAINS)})-([1-9][0-9]*)$")


@dataclass(frozen=True)
class Channels:
    """What each channel must contribute, and the one line that says why neither alone is enough."""

    gui: str
    cli: str
    why_both: str


@dataclass(frozen=True)
class Prepared:
    """What ``setup`` returns: instruction parameters (shown to the agent) and ground truth (host only)."""

    params: Mapping[str, Any] = field(default_factory=dict)
    truth: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class OracleContext:
    """What an oracle sees: the prepared task and, after each action, the env's latest observation."""

    params: Mapping[str, Any]
    truth: Mapping[str, Any]
    screen: tuple[int, int]
    obs: dict[str, Any] | None = None
    info: dict[str, Any] | None = None


ActionLike = Mapping[str, Any] | str
Oracle = Callable[[OracleContext], Iterator[ActionLike]]


@dataclass(frozen=True)
class Task:
    id: str  # Weave-<Domain>-<N>
    title: str
    instruction: str  # str.format template over Prepared.params
    channels: Channels
    setup: Callable[[SetupContext], Prepared]
    clauses: tuple[Clause, ...]
    oracle: Oracle
    rules: tuple[TrajectoryRule, ...] = ()  # besides the default ForbiddenPatterns, which every task gets
    deliverables: tuple[Deliverable, ...] = ()  # what each channel must write; checked by provenance clauses
    profile: str = "base"  # image profile the task needs
    apps: tuple[str, ...] = ()  # the programs the task drives (documentation; the profile must ship them)
    max_steps: int = 30
    time_budget_s: float = 600.0
    pass_threshold: float = 1.0

    def __post_init__(self) -> None:
        if TASK_ID.match(self.id) is None:
            raise TaskError(f"task id {self.id!r} must look like Weave-<Domain>-<N> with a known domain")
        if not self.clauses:
            raise TaskError(f"{self.id}: a task needs at least one checker clause")
        if self.max_steps < 1 or self.time_budget_s <= 0:
            raise TaskError(f"{self.id}: max_steps and time_budget_s must be positive")
        if not 0 < self.pass_threshold <= 1:
            raise TaskError(f"{self.id}: pass_threshold must be in (0, 1]")

    @property
    def domain(self) -> str:
        match = TASK_ID.match(self.id)
        assert match is not None
        return match.group(1)

    @property
    def number(self) -> int:
        match = TASK_ID.match(self.id)
        assert match is not None
        return int(match.group(2))

    def render_instruction(self, prepared: Prepared) -> str:
        try:
            return self.instruction.format(**prepared.params)
        except (KeyError, IndexError, ValueError) as exc:
            raise TaskError(f"{self.id}: instruction template needs a parameter setup did not provide: {exc}"
                            ) from None
