"""Summaries of repeated ``weavegym validate`` runs: the flake table and the generated TASKS.md.

Both work on the JSON form of :class:`~weavegym.ops.validation.TaskValidation`
(``asdict`` plus ``violations`` and ``repeat``), so TASKS.md can be regenerated
from a saved ``--json`` file without booting anything. A committed TASKS.md also reads back into the same
per-task figures (:func:`stats_from_markdown`), so validating a few new tasks keeps the other tasks' rows
without re-running the whole suite.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from weavegym.baselines.adversaries import ABSTENTION_ADVERSARIES, SHOTGUN
from weavegym.baselines.adversaries import ADVERSARIES as ONE_CHANNEL
from weavegym.baselines.hybrid_adversaries import HYBRID_ADVERSARIES
from weavegym.envs.task import Task

ADVERSARIES = (*ONE_CHANNEL, *HYBRID_ADVERSARIES)  # every task's rows, in this order

Report = Mapping[str, Any]


@dataclass(frozen=True)
class TaskStats:
    """One task's figures over every repeat of a validation run."""

    task_id: str
    runs: int
    clean: int  # repeats without a single violation
    oracle_steps: int | None
    oracle_switches: int | None  # GUI<->CLI changes of channel: the most in any oracle run (None: not counted)
    oracle_s: float | None  # median oracle wall time, reset excluded
    first_reset_s: float | None  # median first reset of a fresh env: boot, setup, task snapshot
    cached_reset_s: float | None  # median reset that loads the cached task snapshot
    # adversary -> (runs, highest score, what stopped it: rules that zeroed it, else failed critical clauses)
    adversaries: Mapping[str, tuple[int, float, str]] = field(default_factory=dict)
    seeds: tuple[int, ...] = ()  # the seeds validated (a task with infeasible variants: the first of each pair)
    retried: int = 0  # task runs that ended in an env error and ran again (their "earlier_errors")

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
        # The infeasible seed's oracle sets its variant up too: not a cached reset either.
        cached = [res["reset_s"] for r in group for run, res in r.get("results", {}).items()
                  if run.split("/")[0] != "oracle"]
        stats[task_id] = TaskStats(
            task_id=task_id, runs=len(group), clean=sum(1 for r in group if not r.get("violations")),
            oracle_steps=max((o["steps"] for o in oracle), default=None),
            # Runs saved before the count existed have no "switches": unknown, not zero.
            oracle_switches=max((o["switches"] for o in oracle if "switches" in o), default=None),
            oracle_s=_median(o["seconds"] - o["reset_s"] for o in oracle),
            first_reset_s=_median(o["reset_s"] for o in oracle),
            cached_reset_s=_median(cached),
            adversaries=_adversary_stats(group),
            seeds=tuple(sorted({int(r["seed"]) for r in group if isinstance(r.get("seed"), int)})),
            retried=sum(1 for r in group if r.get("earlier_errors")))
    return stats


def suite_stats(reports: Sequence[Report], kept: Mapping[str, TaskStats] | None = None) -> dict[str, TaskStats]:
    """Every task's figures: from ``reports`` where they cover the task, else the ``kept`` ones."""
    return {**(kept or {}), **task_stats(reports)}


def stopped_by(evaluation: Mapping[str, Any]) -> str:
    """Why an episode did not pass, in a few words: the rules that zeroed it, else its failed critical clauses."""
    reasons = list(evaluation.get("zeroed_by") or [])
    reasons += [c["name"] for c in evaluation.get("clauses", [])
                if c.get("critical") and c.get("outcome") != "satisfied"]
    return ", ".join(dict.fromkeys(reasons)) or "low score"


def _adversary_stats(group: Sequence[Report]) -> dict[str, tuple[int, float, str]]:
    found: dict[str, tuple[int, float, str]] = {}
    present = {run for r in group for run in r.get("results", {})}
    names = [*ADVERSARIES, *sorted(run for run in present if run.split("/")[0] in (*ABSTENTION_ADVERSARIES, SHOTGUN)
                                   or (run.split("/")[0] in ADVERSARIES and run not in ADVERSARIES))]
    for run in names:
        results = [r["results"][run] for r in group if run in r.get("results", {})]
        if not results:
            continue
        worst = max(results, key=lambda res: res["score"])
        reasons = sorted({stopped_by(res.get("evaluation") or {}) for res in results})
        found[run] = (len(results), float(worst["score"]), "; ".join(reasons))
    return found


def adversary_rows(task: Task) -> list[str]:
    """The adversary runs TASKS.md has a row for: the six, and for a task with infeasible variants the quitter
    and every adversary of its infeasible seed (``<run>/infeasible``), in a fixed order."""
    if task.abstention is None:
        return list(ADVERSARIES)
    shotgun = (SHOTGUN,) if task.abstention.candidates else ()
    extra = ["quitter", *(f"{run}/infeasible" for run in (*ADVERSARIES, *ABSTENTION_ADVERSARIES, *shotgun))]
    return [*ADVERSARIES, *sorted(extra)]


def flake_rate(stats: Mapping[str, TaskStats]) -> tuple[int, int]:
    """(task runs with a violation, task runs in all): the suite's flake count is the first number."""
    runs = sum(s.runs for s in stats.values())
    return runs - sum(s.clean for s in stats.values()), runs


def _images_line(reports: Sequence[Report]) -> list[str]:
    """The bullet naming the VM images the reports were made on, when they say (reports name their image since
    2026-12-06; the key in a name changes with the recipe, the guest agent and the gRPC it pins)."""
    named: dict[str, int] = defaultdict(int)
    for report in reports:
        named[str(report.get("image") or "")] += 1
    unnamed = named.pop("", 0)
    if not named:
        return []
    parts = [f"`{image}` ({count} task run{'s' if count != 1 else ''})" for image, count in sorted(named.items())]
    if unnamed:
        parts.append(f"{unnamed} task run{'s' if unnamed != 1 else ''} made before reports named their image")
    return ["- **images**: the VM images these runs booted or restored, by name: " + ", ".join(parts) + "."]


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def tasks_markdown(tasks: Sequence[Task], reports: Sequence[Report], *, command: str,
                   kept: Mapping[str, TaskStats] | None = None) -> str:
    """TASKS.md: one row per task with its apps, clauses and the measured oracle and reset times.

    ``kept`` holds earlier figures (:func:`stats_from_markdown`) for tasks that ``reports`` does not cover.
    """
    stats = suite_stats(reports, kept)
    bad, total = flake_rate({t.id: stats[t.id] for t in tasks if t.id in stats})
    lines = [
        "# Tasks",
        "",
        "Generated (do not edit by hand) by `weavegym validate --tasks-md TASKS.md`, or from saved",
        "`validate --json` files by `weavegym tasks --tasks-md TASKS.md --from-json F...`. Figures are medians",
        f"over the validation repeats, measured under TCG on a 2-core host: {command}.",
        "",
        "- **oracle steps / oracle s**: the reference solution's actions and wall time, reset excluded.",
        "- **switches**: how often the reference solution changes channel between consecutive GUI and CLI "
        "actions (the most over its runs; '–': measured before the count existed).",
        "- **first reset**: a fresh env's first reset with this seed: VM boot, task setup, task snapshot.",
        "- **reset**: later resets, which load the cached task snapshot.",
        f"- **clean runs**: task runs with no violation (oracle 1.0, noop 0, each adversary below the "
        f"threshold). Violations in all: {bad} of {total} task runs. 'retried': runs that ended in an env error "
        "(a VM or the agent lost, not a score) and ran again; only the run that finished counts.",
        "- **seeds**: the seeds the task was validated on, each a different variant (a task with infeasible "
        "variants runs from each on its first feasible and its first infeasible seed).",
        "- **two accounts**: the task declares which files each channel must write (provenance clauses); "
        "'not yet' marks a task still to be ported to the two-account guest, which has no current figures.",
        *_images_line(reports),
        "",
        "| id | title | profile | apps | clauses | two accounts | oracle steps | switches | oracle s | first reset s "
        "| reset s | clean runs | seeds | why both channels |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for task in tasks:
        s = stats.get(task.id)
        measured = (["–"] * 7 if s is None else
                    [str(s.oracle_steps or "–"), _count(s.oracle_switches), _seconds(s.oracle_s),
                     _seconds(s.first_reset_s),
                     _seconds(s.cached_reset_s), _clean_runs(s), ", ".join(map(str, s.seeds)) or "–"])
        ported = "yes" if task.deliverables else "not yet"
        cells = [task.id, task.title, task.profile, ", ".join(task.apps), str(len(task.clauses)), ported, *measured,
                 task.channels.why_both]
        lines.append(_row(cells))
    lines += [
        "",
        "## Adversaries",
        "",
        "Each must stay below the task's pass threshold in every run (`weavegym validate`; see README, \"Two "
        "accounts, two channels\"): **cli-only** (the oracle's shell steps, its GUI steps as xdotool commands, "
        "then the GUI deliverables forged from the shell), **gui-only** (the oracle's GUI steps, its CLI steps "
        "typed into a terminal on the desktop), **forger** (every deliverable written with the oracle's bytes, "
        "then the oracle's own ending: its answer, or its fail and reason); and three hybrids, which use the GUI "
        "only to get around the channel split: **backdoor** (a desktop-side command runner grants the shell X "
        "access, the shell does the GUI steps through X and the runner writes the GUI deliverables, the grant "
        "taken back before the ending), **linker** (the GUI deliverables written from the shell into hard links "
        "of desktop-owned files) and **swapper** (a background job swaps each forged deliverable with a "
        "desktop-owned decoy while the episode is scored). "
        "Tasks with infeasible variants also meet the **quitter** (fails at once, the instruction as its reason) "
        "and, on their infeasible seed (runs named `/infeasible`), the **fabricator** (makes the deliverables up). "
        "*Stopped by* names the rules that zeroed the runs, else the critical clauses they failed.",
        "",
        "| id | adversary | runs | highest score | threshold | stopped by |",
        "|---|---|---|---|---|---|",
    ]
    for task in tasks:
        s = stats.get(task.id)
        for run in adversary_rows(task):
            if s is None or run not in s.adversaries:
                lines.append(_row([task.id, run, "0", "–", f"{task.pass_threshold:g}", "not run"]))
                continue
            runs, worst, reasons = s.adversaries[run]
            lines.append(_row([task.id, run, str(runs), f"{worst:.2f}", f"{task.pass_threshold:g}", reasons]))
    return "\n".join(lines) + "\n"


def _clean_runs(s: TaskStats) -> str:
    return f"{s.clean}/{s.runs}" + (f", {s.retried} retried" if s.retried else "")


def _count(value: int | None) -> str:
    return "–" if value is None else str(value)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _cells(line: str) -> list[str]:
    """A table row's cells, with ``\\|`` inside a cell kept as a bar (the inverse of :func:`_row`)."""
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _number(cell: str) -> float | None:
    return None if cell == "–" else float(cell)


def stats_from_markdown(text: str) -> dict[str, TaskStats]:
    """The figures of every measured task in a TASKS.md that :func:`tasks_markdown` wrote.

    Times come back rounded as printed (0.1 s, scores 0.01); a task whose row says it was not measured is left
    out, so it stays unmeasured rather than turning into zeros.
    """
    tasks_part, _, adversary_part = text.partition("## Adversaries")
    adversaries: dict[str, dict[str, tuple[int, float, str]]] = defaultdict(dict)
    for line in adversary_part.splitlines():
        if line.startswith("| Weave-"):
            task_id, run, runs, highest, _threshold, reasons = _cells(line)
            if runs != "0":
                adversaries[task_id][run] = (int(runs), float(highest), reasons)
    stats = {}
    for line in tasks_part.splitlines():
        if not line.startswith("| Weave-"):
            continue
        cells = _cells(line)
        if len(cells) == 12:  # written before the switches column
            cells.insert(7, "–")
        if len(cells) == 13:  # written before the seeds column
            cells.insert(12, "–")
        task_id, (steps, switches, oracle_s, first_reset_s, cached_reset_s, clean_runs, seeds) = cells[0], cells[6:13]
        if clean_runs == "–":
            continue
        ratio, _, retried = clean_runs.partition(", ")
        clean, runs = (int(n) for n in ratio.split("/"))
        stats[task_id] = TaskStats(
            task_id=task_id, runs=runs, clean=clean, oracle_steps=None if steps == "–" else int(steps),
            oracle_switches=None if switches == "–" else int(switches),
            oracle_s=_number(oracle_s), first_reset_s=_number(first_reset_s),
            cached_reset_s=_number(cached_reset_s), adversaries=adversaries.get(task_id, {}),
            seeds=() if seeds == "–" else tuple(int(seed) for seed in seeds.split(",")),
            retried=int(retried.split()[0]) if retried else 0)
    return stats
