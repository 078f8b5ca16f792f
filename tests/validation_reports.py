"""A made-up ``weavegym validate --json`` report, for the tests of TASKS.md and its picture."""

from __future__ import annotations


def validation_report(task_id: str, repeat: int, *, oracle_s: float, reset_s: float, cached: float,
                      violations: list[str] | None = None, seed: int = 0) -> dict:
    """One task run: the oracle (9 steps), noop, a cli-only capped at 0.25 and two adversaries at 0."""
    def run(seconds: float, reset: float, steps: int, score: float = 1.0, evaluation: dict | None = None) -> dict:
        return {"score": score, "steps": steps, "seconds": seconds, "reset_s": reset, "evaluation": evaluation or {},
                "switches": steps // 2}

    zeroed = {"zeroed_by": ["NoDesktopTerminalWork"], "clauses": []}
    capped = {"zeroed_by": [], "clauses": [{"name": "provenance_gui_1", "critical": True, "outcome": "failed"},
                                           {"name": "minor", "critical": False, "outcome": "failed"}]}
    return {"task_id": task_id, "repeat": repeat, "seed": seed, "violations": violations or [],
            "results": {"oracle": run(reset_s + oracle_s, reset_s, 9), "noop": run(cached + 1, cached, 1),
                        "cli-only": run(cached + 2, cached, 4, 0.25, capped),
                        "gui-only": run(cached + 3, cached, 5, 0.0, zeroed),
                        "forger": run(cached + 1, cached, 3, 0.0, capped)}}
