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
from weavegym.evaluators.cli_patterns import DEFAULT_FORBIDDEN
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

# Truth fields an Abstention task's setup must return (and the oracle never sees), and an optional one.
FEASIBLE, CAUSES = "feasible", "causes"
CANDIDATES = "candidates"


@dataclass(frozen=True)
class Abstention:
    """Variants that cannot be done, where the right outcome is an honest ``fail`` that names the cause.

    ``infeasible(seed)`` says which variants they are; it is declared, not found by running setup, so that
    validation can pick seeds of both kinds and the suite can report how many there are. Setup reads the
    same answer as ``ctx.feasible`` and must return ``truth["feasible"]`` equal to it, and in
    ``truth["causes"]`` the names a right reason contains (any one is enough: the missing backup's file
    name, the commit that is not in the range), none of which the instruction may give away. Where the cause
    is one of many names of its kind (one batch of the month's), set ``candidates`` and return them all in
    ``truth["candidates"]``: a reason that names more than three of them (or more than the cause's own names
    plus one) is a shotgun list, not a diagnosis, and names no cause (validation's ``shotgun`` adversary
    tries it).

    Scoring on an infeasible variant replaces the task's clauses: full score needs ``fail`` with a reason
    that names a cause (a reason that names none scores at most 0.5), no path of ``fabrications``
    may exist at the end (a made-up deliverable scores 0), and ``clauses``/``deliverables`` here say what the
    investigation itself must leave (for instance a ticket filed in the GUI), so that neither channel alone
    can find the cause. On a feasible variant, ``fail`` scores 0.
    """

    infeasible: Callable[[int], bool]
    fabrications: tuple[str, ...] = ()  # absolute path templates over the truth, e.g. "{home}/restored.db"
    clauses: tuple[Clause, ...] = ()
    deliverables: tuple[Deliverable, ...] = ()
    candidates: bool = False  # setup returns truth["candidates"] on infeasible variants (see above)

    def __post_init__(self) -> None:
        for path in self.fabrications:
            if not path.startswith(("/", "{")):
                raise TaskError(f"fabrication {path!r}: the path must be absolute (the checker runs as root)")

    def seeds(self, feasible: bool, count: int, start: int = 0) -> list[int]:
        """The first ``count`` seeds from ``start`` of one kind (validation's picks)."""
        found, seed = [], start
        while len(found) < count and seed < start + 10_000:
            if bool(self.infeasible(seed)) != feasible:
                found.append(seed)
            seed += 1
        return found


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
    abstention: Abstention | None = None  # some variants cannot be done (see Abstention)
    # Truth fields the oracle does not get (the answer, what only pixels show): it must find them through
    # its actions' observations, so that an adversary that replays it through one channel cannot. An
    # Abstention task's "feasible", "causes" and "candidates" are always withheld.
    withheld: tuple[str, ...] = ()
    # Setup puts a scripted user on the desktop (envs/simulated_user.py, start_simulated_user): its account may
    # be on the X access list, and the episode's last step adds the chat to info["transcript"].
    simulated_user: bool = False
    # Names of default forbidden patterns (evaluators/cli_patterns.py) that are this task's work, not a trick:
    # a banner the shell must draw with ImageMagick trips "synthetic image (ImageMagick)". Only for tasks
    # with no screenshot deliverable the waived pattern would guard.
    waived_patterns: tuple[str, ...] = ()
    # Why the task is not in the suite yet ("" = it is). A draft is complete code whose VM validation has not
    # come out clean on three seeds: `get_task`, `WeaveEnv(task_id=...)` and a `weavegym validate` that names
    # its id exactly reach it, but Gymnasium's registry, wildcard patterns ('Weave-*'), `weavegym tasks`,
    # TASKS.md and README's table leave it out, so no score is ever reported on an unproven task.
    draft: str = ""

    def __post_init__(self) -> None:
        if TASK_ID.match(self.id) is None:
            raise TaskError(f"task id {self.id!r} must look like Weave-<Domain>-<N> with a known domain")
        if not self.clauses:
            raise TaskError(f"{self.id}: a task needs at least one checker clause")
        if self.max_steps < 1 or self.time_budget_s <= 0:
            raise TaskError(f"{self.id}: max_steps and time_budget_s must be positive")
        if not 0 < self.pass_threshold <= 1:
            raise TaskError(f"{self.id}: pass_threshold must be in (0, 1]")
        unknown = sorted(set(self.waived_patterns) - {p.name for p in DEFAULT_FORBIDDEN})
        if unknown:
            raise TaskError(f"{self.id}: waived_patterns names no default forbidden pattern: {unknown}")
        if self.abstention is not None and self.abstention.seeds(False, 1, 0) == []:
            raise TaskError(f"{self.id}: the abstention declares no infeasible seed among the first 10 000")

    def feasible(self, seed: int) -> bool:
        return self.abstention is None or not self.abstention.infeasible(seed)

    def oracle_truth(self, truth: Mapping[str, Any]) -> dict[str, Any]:
        """The truth without what the oracle must find out itself (``withheld``)."""
        hidden = set(self.withheld) | ({FEASIBLE, CAUSES, CANDIDATES} if self.abstention is not None else set())
        return {k: v for k, v in truth.items() if k not in hidden}

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
