"""One episode's evaluation: clause score, shortcut flags and the final, possibly zeroed, score.

Clauses say how much of the goal state exists; rules say whether it was
reached honestly. A single high-confidence shortcut zeroes the score (a fake
deliverable is worth nothing however complete), while medium and low flags are
kept in the record for review without changing the score.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from weavegym.core.trajectory import Trajectory
from weavegym.evaluators.scoring import Clause, ClauseResult, score_clauses
from weavegym.evaluators.trajectory_rules import Rule, RuleContext, ShortcutFlag, evaluate_rules

if TYPE_CHECKING:
    from weavegym.evaluators.probes import Probe

PASS_EPSILON = 1e-9


@dataclass
class Evaluation:
    score: float  # final score in [0, 1]
    raw_score: float  # the clause score before shortcut zeroing
    passed: bool
    pass_threshold: float
    clauses: list[ClauseResult]
    caps_applied: list[str]
    flags: list[ShortcutFlag]
    zeroed_by: list[str] = field(default_factory=list)  # rules whose high-confidence flags zeroed the score
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (enums become their values), for the episode record."""
        data = asdict(self)
        for clause in data["clauses"]:
            clause["outcome"] = str(clause["outcome"].value)
        return data

    def summary(self) -> str:
        """A few lines for logs and the CLI: score, each clause, caps and flags."""
        verdict = "PASS" if self.passed else "FAIL"
        lines = [f"{verdict} score={self.score:.3f} (raw {self.raw_score:.3f}, threshold {self.pass_threshold:g}, "
                 f"{self.seconds:.2f}s)"]
        for c in self.clauses:
            mark = "!" if c.critical else " "
            lines.append(f" {mark} {c.outcome.value:<9} {c.name} (w={c.weight:g}): {_one_line(c.evidence)}")
        lines += [f"   cap: {cap}" for cap in self.caps_applied]
        lines += [f"   flag[{f.confidence}] {f.rule}: {_one_line(f.message)}" for f in self.flags]
        if self.zeroed_by:
            lines.append(f"   zeroed by: {', '.join(self.zeroed_by)}")
        return "\n".join(lines)


def _one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def evaluate(clauses: Sequence[Clause], rules: Sequence[Rule], probe: Probe, trajectory: Trajectory,
             truth: Mapping[str, Any], pass_threshold: float = 1.0, *,
             after_live: Callable[[], None] | None = None) -> Evaluation:
    """Score the clauses, run the rules, zero the score on any high-confidence flag. ``after_live`` runs once the
    ``live`` clauses are scored and before everything else is read (the episode's freeze)."""
    start = time.perf_counter()
    raw_score, results, caps = score_clauses(clauses, probe, truth, after_live=after_live)
    flags = evaluate_rules(rules, RuleContext(probe=probe, trajectory=trajectory, truth=truth))
    zeroed_by = list(dict.fromkeys(f.rule for f in flags if f.confidence == "high"))
    score = 0.0 if zeroed_by else raw_score
    return Evaluation(score=score, raw_score=raw_score, passed=score >= pass_threshold - PASS_EPSILON,
                      pass_threshold=pass_threshold, clauses=results, caps_applied=caps, flags=flags,
                      zeroed_by=zeroed_by, seconds=time.perf_counter() - start)
