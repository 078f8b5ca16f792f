"""Clause scoring: each clause checks one fact of the final state and earns full, half or no credit.

A task's checker is a list of clauses rather than one pass/fail function so the
score says how far the agent got and the report says which fact was wrong.
Critical clauses (the deliverable exists, the service answers…) cap the score
when unsatisfied, so getting many minor facts right cannot hide a missing core
result. A clause whose check raises scores FAILED with the error as evidence:
one broken probe must not lose the whole evaluation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from weavegym.core.errors import (
    AgentAuthError,
    AgentUnavailableError,
    BackendError,
    EvaluationError,
    TaskError,
)

# Failures of the environment, not of the agent's work: a check that meets one cannot say anything about
# the episode, so scoring stops with EvaluationError instead of failing the clause.
ENVIRONMENT_FAILURES: tuple[type[Exception], ...] = (AgentUnavailableError, AgentAuthError, BackendError, TaskError)

if TYPE_CHECKING:
    from weavegym.evaluators.probes import Probe

MAX_EVIDENCE_CHARS = 2000


class Outcome(StrEnum):
    """A str enum (``Outcome.SATISFIED == "satisfied"``), so results serialise as plain strings."""

    SATISFIED = "satisfied"
    PARTIAL = "partial"
    FAILED = "failed"


CREDIT: dict[Outcome, float] = {Outcome.SATISFIED: 1.0, Outcome.PARTIAL: 0.5, Outcome.FAILED: 0.0}


@dataclass(frozen=True)
class Verdict:
    """What a clause's check found: the outcome and the evidence a human needs to agree with it."""

    outcome: Outcome
    evidence: str

    @classmethod
    def satisfied(cls, evidence: str) -> Verdict:
        return cls(Outcome.SATISFIED, evidence)

    @classmethod
    def partial(cls, evidence: str) -> Verdict:
        return cls(Outcome.PARTIAL, evidence)

    @classmethod
    def failed(cls, evidence: str) -> Verdict:
        return cls(Outcome.FAILED, evidence)

    @classmethod
    def check(cls, condition: bool, evidence: str) -> Verdict:
        """SATISFIED or FAILED with the same evidence, for yes/no facts."""
        return cls(Outcome.SATISFIED if condition else Outcome.FAILED, evidence)


@dataclass(frozen=True)
class Clause:
    """One checkable fact. ``cap`` is the highest score possible while a critical clause is unsatisfied."""

    name: str
    description: str
    check: Callable[[Probe, Mapping[str, Any]], Verdict]
    weight: float = 1.0
    critical: bool = False
    cap: float = 0.0
    # Reads a service the episode keeps running (an HTTP server the shell restarted, the desktop's settings
    # daemon): scored before the episode's processes are stopped for the rest of the evaluation
    # (evaluators/episode_freeze.py), since a stopped server answers nothing.
    live: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            raise TaskError("a clause needs a name")
        if not self.weight >= 0:  # also rejects NaN
            raise TaskError(f"clause {self.name!r}: weight must be >= 0, got {self.weight}")
        if not 0.0 <= self.cap <= 1.0:
            raise TaskError(f"clause {self.name!r}: cap must be within [0, 1], got {self.cap}")


@dataclass(frozen=True)
class ClauseResult:
    name: str
    description: str
    weight: float
    critical: bool
    cap: float
    outcome: Outcome
    evidence: str
    credit: float
    seconds: float


def run_clause(clause: Clause, probe: Probe, truth: Mapping[str, Any]) -> ClauseResult:
    """Run one check, turning exceptions and non-Verdict returns into FAILED with the reason as evidence.

    What the episode left behind can make a check raise (a file too big to read, a symlink, bad JSON):
    that fails the clause. A failure of the environment raises ``EvaluationError`` instead.
    """
    start = time.perf_counter()
    try:
        verdict = clause.check(probe, truth)
        if not isinstance(verdict, Verdict):
            verdict = Verdict.failed(f"check returned {type(verdict).__name__}, not a Verdict")
    except ENVIRONMENT_FAILURES as exc:
        raise EvaluationError(f"clause {clause.name!r} could not run: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:  # anything else the episode's state caused is this clause's failure only
        verdict = Verdict.failed(f"check raised {type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - start
    outcome = Outcome(verdict.outcome)
    return ClauseResult(name=clause.name, description=clause.description, weight=clause.weight,
                        critical=clause.critical, cap=clause.cap, outcome=outcome,
                        evidence=str(verdict.evidence)[:MAX_EVIDENCE_CHARS], credit=CREDIT[outcome], seconds=seconds)


def score_clauses(clauses: Sequence[Clause], probe: Probe, truth: Mapping[str, Any], *,
                  after_live: Callable[[], None] | None = None) -> tuple[float, list[ClauseResult], list[str]]:
    """(score, results, caps applied): the weighted mean credit, then capped by unsatisfied critical clauses.

    ``live`` clauses run first, then ``after_live`` (the evaluation freezes the episode there), then the rest;
    the results keep the clauses' order."""
    if not clauses:
        raise TaskError("a task needs at least one clause")
    names = [c.name for c in clauses]
    if len(set(names)) != len(names):
        raise TaskError(f"clause names must be unique: {names}")
    total_weight = sum(c.weight for c in clauses)
    if total_weight <= 0:
        raise TaskError("the clauses' weights sum to zero")
    done = {c.name: run_clause(c, probe, truth) for c in clauses if c.live}
    if after_live is not None:
        after_live()
    done.update((c.name, run_clause(c, probe, truth)) for c in clauses if not c.live)
    results = [done[c.name] for c in clauses]
    score = sum(r.weight * r.credit for r in results) / total_weight
    caps: list[str] = []
    for r in results:
        if r.critical and r.outcome is not Outcome.SATISFIED:
            score = min(score, r.cap)
            caps.append(f"critical clause {r.name!r} {r.outcome.value}: score capped at {r.cap:g}")
    return score, results, caps
