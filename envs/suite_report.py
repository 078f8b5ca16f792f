"""Summaries of repeated ``weavegym validate`` runs: the flake table and the generated TASKS.md.

Both work on the JSON form of :class:`~weavegym.envs.validation.TaskValidation`
(``asdict`` plus ``violations`` and ``repeat``), so TASKS.md can be regenerated
from a saved ``--json`` file without booting anything.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from weavegym.envs.task import Task

Report = Mapping[str, Any]


@dataclass(frozen=True)
class TaskStats:
    """One task's figures over every repeat of a validation run."""

    task_id: str
    runs: int
    clean: int  # repeats without a single violation
    oracle_steps: int | None
    oracle_s: float | None  # median oracle wall time, reset excluded
    first_reset_s: float | None  # median first reset of a fresh env: boot, setup, task snapshot
    cached_reset_s: float | None  # median reset that loads the cached task snapshot

    @property
    def flaky(self) -> bool:
        return 0 < self.clean < self.runs


def _median(values: Iterable[float]) -> float | None:
    values = list(values)
    return statistics.median(values) if values else None


def task_stats(reports: Sequence[Report]) -> dict[str, TaskStats]:
    """Group the reports by task; the oracle runs first on a fresh env, so its reset is the cold one."""
    by_task: dict[str, list[Report]] = defaultdict(list)
    for report in reports:
        by_task[report["task_id"]].append(report)
    stats = {}
    for task_id, group in by_task.items():
        oracle = [r["results"]["oracle"] for r in group if "oracle" in r.get("results", {})]
        cached = [res["reset_s"] for r in group for run, res in r.get("results", {}).items() if run != "oracle"]
        stats[task_id] = TaskStats(
            task_id=task_id, runs=len(group), clean=sum(1 for r in group if not r.get("violations")),
            oracle_steps=max((o["steps"] for o in oracle), default=None),
            oracle_s=_median(o["seconds"] - o["reset_s"] for o in oracle),
            first_reset_s=_median(o["reset_s"] for o in oracle),
            cached_reset_s=_median(cached))
    return stats


def flake_rate(stats: Mapping[str, TaskStats]) -> tuple[int, int]:
    """(task runs with a violation, task runs in all): the suite's flake count is the first number."""
    runs = sum(s.runs for s in stats.values())
    return runs - sum(s.clean for s in stats.values()), runs


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def tasks_markdown(tasks: Sequence[Task], reports: Sequence[Report], *, command: str) -> str:
    """TASKS.md: one row per task with its apps, clauses and the measured oracle and reset times."""
    stats = task_stats(reports)
    bad, total = flake_rate({t.id: stats[t.id] for t in tasks if t.id in stats})
    lines = [
        "# Tasks",
        "",
        "Generated (do not edit by hand) by `weavegym validate --tasks-md TASKS.md`, or from saved",
        "`validate --json` files by `weavegym tasks --tasks-md TASKS.md --from-json F...`. Figures are medians",
        f"over the validation repeats, measured under TCG on a 2-core host: {command}.",
        "",
        "- **oracle steps / oracle s**: the reference solution's actions and wall time, reset excluded.",
        "- **first reset**: a fresh env's first reset with this seed: VM boot, task setup, task snapshot.",
        "- **reset**: later resets, which load the cached task snapshot.",
        f"- **clean runs**: repeats with no violation (oracle 1.0, noop 0, each single channel below the "
        f"threshold). Violations in all: {bad} of {total} task runs.",
        "",
        "| id | title | profile | apps | clauses | oracle steps | oracle s | first reset s | reset s "
        "| clean runs | why both channels |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for task in tasks:
        s = stats.get(task.id)
        measured = (["–"] * 5 if s is None else
                    [str(s.oracle_steps or "–"), _seconds(s.oracle_s), _seconds(s.first_reset_s),
                     _seconds(s.cached_reset_s), f"{s.clean}/{s.runs}"])
        cells = [task.id, task.title, task.profile, ", ".join(task.apps), str(len(task.clauses)), *measured,
                 task.channels.why_both]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"
