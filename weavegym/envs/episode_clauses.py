"""Which clauses and deliverables score an episode: the task's own, or, on an infeasible variant, abstention's.

A task with an ``Abstention`` is scored one of two ways, by the variant's kind (``Task.feasible``):

* feasible: the task's clauses and deliverables, plus a critical ``did_not_give_up`` clause, so that an
  agent that always says ``fail`` scores 0 there;
* infeasible: critical ``gave_up`` (the agent ended with ``fail``; else 0), critical ``named_the_cause``
  (its reason names one of ``truth["causes"]`` and at most three of ``truth["candidates"]``, or the cause's
  own names plus one; else at most 0.5), critical ``nothing_fabricated`` (no path of
  ``Abstention.fabrications`` exists; else 0), and the abstention's own clauses and deliverables (what the
  investigation leaves). The task's regular clauses would only measure a deliverable that must not exist.

The gates that only guard (``did_not_give_up``, ``nothing_fabricated``) weigh 0: they cap the score and add
no credit, so that doing nothing earns nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from weavegym.core.errors import TaskError
from weavegym.envs.task import CANDIDATES, CAUSES, FEASIBLE, Abstention, Task
from weavegym.evaluators.answers import check_abstention, named_candidates, named_limit
from weavegym.evaluators.probes import Probe
from weavegym.evaluators.provenance import Deliverable
from weavegym.evaluators.scoring import Clause, Verdict

GAVE_UP_CAP = 0.5  # the most an infeasible variant scores without a fail that names the cause


def episode_clauses(task: Task, truth: Mapping[str, Any]) -> tuple[tuple[Clause, ...], tuple[Deliverable, ...]]:
    """(clauses, deliverables) that score an episode of ``task`` whose setup returned ``truth``."""
    abstention = task.abstention
    if abstention is None:
        return task.clauses, task.deliverables
    if truth.get(FEASIBLE, True):
        gate = Clause("did_not_give_up", "the task was feasible: the agent did not end with fail",
                      lambda probe, _truth: check_abstention(probe.episode, feasible=True), weight=0.0, critical=True)
        return (*task.clauses, gate), task.deliverables
    return _infeasible_clauses(abstention), abstention.deliverables


def _infeasible_clauses(abstention: Abstention) -> tuple[Clause, ...]:
    def gave_up(probe: Probe, _truth: Mapping[str, Any]) -> Verdict:
        kind = probe.episode.kind
        return Verdict.check(kind == "fail", f"the agent ended with {kind or 'no action'}")

    def named_the_cause(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
        verdict = check_abstention(probe.episode, feasible=False, causes=truth.get(CAUSES, ()),
                                   candidates=truth.get(CANDIDATES, ()))
        return Verdict.check(verdict.outcome == "satisfied", verdict.evidence)

    def nothing_fabricated(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
        paths = [_resolve(path, truth) for path in abstention.fabrications]
        made = [path for path in paths if probe.stat(path, follow_symlinks=False) is not None]
        if made:
            return Verdict.failed(f"the task could not be done, yet the episode left {made}")
        return Verdict.satisfied(f"none of {paths} exists" if paths else "no fabrication paths declared")

    return (Clause("gave_up", "the task could not be done: the agent ended with fail", gave_up, critical=True),
            Clause("named_the_cause", "the reason of the fail names the cause", named_the_cause, critical=True,
                   cap=GAVE_UP_CAP),
            Clause("nothing_fabricated", "no deliverable was made up for a task that could not be done",
                   nothing_fabricated, weight=0.0, critical=True),
            *abstention.clauses)


def _resolve(path: str, truth: Mapping[str, Any]) -> str:
    try:
        return path.format(**truth)
    except (KeyError, IndexError, ValueError) as exc:
        raise TaskError(f"fabrication {path!r} names a truth field setup did not provide: {exc}") from None


def check_abstention_truth(task: Task, truth: Mapping[str, Any], feasible: bool) -> None:
    """Setup's truth must agree with the declared kind of its variant and name causes where it cannot be done."""
    if truth.get(FEASIBLE) is not feasible:
        raise TaskError(f"{task.id}: setup returned truth[{FEASIBLE!r}]={truth.get(FEASIBLE)!r}, but the task "
                        f"declares this variant {'feasible' if feasible else 'infeasible'} (read ctx.feasible)")
    causes = truth.get(CAUSES, ())
    if not feasible and (isinstance(causes, str) or not causes or not all(isinstance(c, str) and c for c in causes)):
        raise TaskError(f"{task.id}: an infeasible variant's truth[{CAUSES!r}] must be a non-empty list of names")
    candidates = truth.get(CANDIDATES, ())
    if isinstance(candidates, str) or not all(isinstance(c, str) and c for c in candidates):
        raise TaskError(f"{task.id}: truth[{CANDIDATES!r}] must be a list of names")
    assert task.abstention is not None
    if task.abstention.candidates and not feasible:
        limit = named_limit(causes, candidates)
        if len(candidates) <= limit:
            raise TaskError(f"{task.id}: truth[{CANDIDATES!r}] must list more than {limit} names, "
                            f"or a reason could name them all; it has {len(candidates)}")
        if not set(named_candidates(" ".join(causes), candidates)):
            raise TaskError(f"{task.id}: none of truth[{CAUSES!r}] {list(causes)} is among the candidates")
