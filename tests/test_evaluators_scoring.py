"""Clause scoring and the combined evaluation, with checks reading real files through the real agent."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weavegym.core.errors import AgentUnavailableError, BackendError, EvaluationError, TaskError
from weavegym.core.trajectory import FrameRecord, StepRecord, Trajectory
from weavegym.evaluators import (
    Clause,
    Evaluation,
    Outcome,
    RuleContext,
    ShortcutFlag,
    Verdict,
    evaluate,
    score_clauses,
)
from weavegym.evaluators.probes import Probe
from weavegym.machine.guest_client import GuestClient


@pytest.fixture()
def probe(client: GuestClient) -> Probe:
    return Probe(client, timeout=20.0)


def fixed(outcome: Outcome) -> Any:
    return lambda probe, truth: Verdict(outcome, f"fixed {outcome.value}")


def clause(name: str, outcome: Outcome, **kwargs: Any) -> Clause:
    return Clause(name, f"always {outcome.value}", fixed(outcome), **kwargs)


def test_verdict_constructors() -> None:
    assert Verdict.satisfied("e") == Verdict(Outcome.SATISFIED, "e")
    assert Verdict.partial("e").outcome is Outcome.PARTIAL
    assert Verdict.failed("e").outcome is Outcome.FAILED
    assert Verdict.check(True, "x") == Verdict(Outcome.SATISFIED, "x")
    assert Verdict.check(False, "x") == Verdict(Outcome.FAILED, "x")
    assert Outcome.PARTIAL == "partial"


def test_partial_credit_math(probe: Probe) -> None:
    clauses = [clause("a", Outcome.SATISFIED), clause("b", Outcome.SATISFIED), clause("c", Outcome.PARTIAL),
               clause("d", Outcome.FAILED)]
    score, results, caps = score_clauses(clauses, probe, {})
    assert score == pytest.approx(0.625)
    assert [(r.name, r.outcome, r.credit) for r in results] == [
        ("a", Outcome.SATISFIED, 1.0), ("b", Outcome.SATISFIED, 1.0), ("c", Outcome.PARTIAL, 0.5),
        ("d", Outcome.FAILED, 0.0)]
    assert caps == []
    assert all(r.seconds >= 0 for r in results)


def test_weights(probe: Probe) -> None:
    clauses = [clause("big", Outcome.SATISFIED, weight=3.0), clause("small", Outcome.FAILED, weight=1.0),
               clause("half", Outcome.PARTIAL, weight=2.0)]
    score, _, _ = score_clauses(clauses, probe, {})
    assert score == pytest.approx((3.0 + 0.0 + 1.0) / 6.0)
    score, _, _ = score_clauses([clause("free", Outcome.FAILED, weight=0.0), clause("x", Outcome.SATISFIED)],
                                probe, {})
    assert score == 1.0


def test_critical_clause_caps_the_score_and_is_listed(probe: Probe) -> None:
    clauses = [clause(f"ok{i}", Outcome.SATISFIED) for i in range(8)]
    clauses += [clause("deliverable", Outcome.PARTIAL, critical=True, cap=0.3),
                clause("service", Outcome.FAILED, critical=True, cap=0.5)]
    score, _, caps = score_clauses(clauses, probe, {})
    assert score == pytest.approx(0.3)  # raw 8.5/10 = 0.85, then min(0.3, 0.5)
    assert caps == ["critical clause 'deliverable' partial: score capped at 0.3",
                    "critical clause 'service' failed: score capped at 0.5"]
    score, _, caps = score_clauses([clause("core", Outcome.SATISFIED, critical=True), clause("x", Outcome.FAILED)],
                                   probe, {})
    assert (score, caps) == (0.5, [])


def test_a_raising_check_fails_only_its_clause(probe: Probe, tmp_path: Path) -> None:
    (tmp_path / "out.json").write_text(json.dumps({"total": 42}))

    def reads_relative_path(p: Probe, truth: Mapping[str, Any]) -> Verdict:
        return Verdict.check(p.read_text("relative/path.txt") == "x", "read")  # the agent rejects it

    def compares_total(p: Probe, truth: Mapping[str, Any]) -> Verdict:
        got = p.json_query(str(tmp_path / "out.json"), "/total")
        return Verdict.check(got == truth["total"], f"total={got!r}, expected {truth['total']}")

    def divides(p: Probe, truth: Mapping[str, Any]) -> Verdict:
        return Verdict.satisfied(str(1 / 0))

    def returns_bool(p: Probe, truth: Mapping[str, Any]) -> Verdict:
        return True  # type: ignore[return-value]

    clauses = [Clause("agent_error", "raises AgentRequestError", reads_relative_path),
               Clause("total", "the total is right", compares_total),
               Clause("zero", "raises ZeroDivisionError", divides),
               Clause("bool", "returns a bool", returns_bool)]
    score, results, _ = score_clauses(clauses, probe, {"total": 42})
    assert score == 0.25
    by_name = {r.name: r for r in results}
    assert by_name["total"].outcome is Outcome.SATISFIED and by_name["total"].evidence == "total=42, expected 42"
    assert by_name["agent_error"].outcome is Outcome.FAILED
    assert by_name["agent_error"].evidence.startswith("check raised AgentRequestError: ")
    assert by_name["zero"].evidence == "check raised ZeroDivisionError: division by zero"
    assert by_name["bool"].evidence == "check returned bool, not a Verdict"


@pytest.mark.parametrize("failure", [AgentUnavailableError("gone", method="Download"), BackendError("VM died"),
                                     TaskError("truth has no 'total'")], ids=lambda e: type(e).__name__)
def test_an_environment_failure_stops_scoring_instead_of_failing_the_clause(failure: Exception) -> None:
    def check(p: Probe, truth: Mapping[str, Any]) -> Verdict:
        raise failure

    with pytest.raises(EvaluationError, match="clause 'broken' could not run"):
        score_clauses([Clause("fine", "ok", lambda p, t: Verdict.satisfied("ok")), Clause("broken", "env", check)],
                      None, {})  # type: ignore[arg-type]


def test_task_errors(probe: Probe) -> None:
    with pytest.raises(TaskError):
        score_clauses([], probe, {})
    with pytest.raises(TaskError):
        score_clauses([clause("a", Outcome.SATISFIED), clause("a", Outcome.FAILED)], probe, {})
    with pytest.raises(TaskError):
        score_clauses([clause("a", Outcome.SATISFIED, weight=0.0)], probe, {})
    with pytest.raises(TaskError):
        clause("a", Outcome.SATISFIED, cap=1.5)
    with pytest.raises(TaskError):
        clause("a", Outcome.SATISFIED, weight=-1.0)


# -- evaluate() ----------------------------------------------------------------------------------------
def trajectory() -> Trajectory:
    traj = Trajectory(task_id="t", task_seed=1, instruction="x")
    traj.steps.append(StepRecord(index=0, channel="reset", frame=FrameRecord.of(0, np.zeros((4, 4, 3), np.uint8))))
    return traj


class FlagRule:
    def __init__(self, name: str, confidence: str) -> None:
        self.name = name
        self.confidence = confidence

    def check(self, ctx: RuleContext) -> list[ShortcutFlag]:
        return [ShortcutFlag(self.name, self.confidence, f"{self.confidence} flag", {"steps": [1, 2]})]  # type: ignore[arg-type]


ALL_GOOD = [clause("a", Outcome.SATISFIED), clause("b", Outcome.SATISFIED)]


def test_high_flag_zeroes_and_is_recorded(probe: Probe) -> None:
    ev = evaluate(ALL_GOOD, [FlagRule("fake_screenshot", "high"), FlagRule("note", "low")], probe, trajectory(), {})
    assert (ev.score, ev.raw_score, ev.passed, ev.zeroed_by) == (0.0, 1.0, False, ["fake_screenshot"])
    assert [f.rule for f in ev.flags] == ["fake_screenshot", "note"]


def test_medium_flag_does_not_change_the_score(probe: Probe) -> None:
    ev = evaluate(ALL_GOOD, [FlagRule("mock_server", "medium")], probe, trajectory(), {})
    assert (ev.score, ev.raw_score, ev.passed, ev.zeroed_by) == (1.0, 1.0, True, [])
    assert [f.confidence for f in ev.flags] == ["medium"]


def test_pass_threshold(probe: Probe) -> None:
    clauses = [clause("a", Outcome.SATISFIED), clause("b", Outcome.SATISFIED), clause("c", Outcome.FAILED)]
    assert not evaluate(clauses, [], probe, trajectory(), {}).passed  # default threshold 1.0
    ev = evaluate(clauses, [], probe, trajectory(), {}, pass_threshold=2 / 3)
    assert ev.score == pytest.approx(2 / 3) and ev.passed  # equality within float noise passes
    assert not evaluate(clauses, [], probe, trajectory(), {}, pass_threshold=0.7).passed


def test_to_dict_is_json_and_summary_names_everything(probe: Probe) -> None:
    clauses = [clause("core", Outcome.PARTIAL, critical=True, cap=0.4), clause("b", Outcome.SATISFIED)]
    ev = evaluate(clauses, [FlagRule("fake", "high")], probe, trajectory(), {}, pass_threshold=0.5)
    assert isinstance(ev, Evaluation)
    data = json.loads(json.dumps(ev.to_dict()))
    assert data["clauses"][0]["outcome"] == "partial" and data["clauses"][0]["credit"] == 0.5
    assert data["caps_applied"] == ["critical clause 'core' partial: score capped at 0.4"]
    assert data["flags"] == [{"rule": "fake", "confidence": "high", "message": "high flag",
                              "evidence": {"steps": [1, 2]}}]
    assert (data["score"], data["raw_score"], data["zeroed_by"], data["passed"]) == (0.0, 0.4, ["fake"], False)
    text = ev.summary()
    assert text.splitlines()[0].startswith("FAIL score=0.000 (raw 0.400")
    for needle in ("core", "partial", "capped at 0.4", "flag[high] fake", "zeroed by: fake"):
        assert needle in text
