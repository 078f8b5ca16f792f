"""Carrying a suite validation over to later runs (``weavegym validate --resume``).

Validating every task on three seeds takes longer here (about seven hours with two workers) than a working
session, a CI job or a host's uptime is sure to last, and ``validate --json`` writes the record as runs finish
(a folder with a file per task, or one file: :mod:`weavegym.ops.record_store`). Resuming keeps the runs the
record already holds and runs only the rest, so the suite's table still comes from one body of code: every
report is stamped with its seed and a digest of the code that decided its scores (:func:`code_digest`), and a
report made by other code is run again, never mixed in.

The digest is per task: the package outside the task suite (the env, the VM and guest agent, the evaluators,
the adversaries, the validation itself) plus the task's own modules, those they import from the suite and their
packages' fixtures. Fixing one task's oracle re-runs that task (and the tasks that share the changed module),
not the suite; a change to the env re-runs everything. ``validate --plan`` (:func:`plan_runs`) says which runs a
change sends back, and for about how long, before any VM time is spent.
"""

from __future__ import annotations

import ast
import hashlib
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weavegym.core.errors import WeaveGymError

Job = tuple[int, int, str]  # (seed, repeat, task id)
PACKAGE = Path(__file__).resolve().parents[1]  # weavegym/
SUITE = "weavegym.envs.tasks"
# What decides no score: the command line, the reports, and the tools around validation (but not validation).
NO_SCORE = ("cli.py", "ops", "reporting")
SCORES = ("ops/validation.py",)
CHANGED_DURING_RUN = "changed"  # the stamp of a report whose task's code changed on disk while it ran


def _hash_files(root: Path, files: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(set(files)):
        digest.update(str(path.relative_to(root.parent)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _files(folder: Path) -> Iterator[Path]:
    return (p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def core_files(root: Path = PACKAGE) -> list[Path]:
    """The package's files outside the task suite that can change a score."""
    suite = root.joinpath(*SUITE.split(".")[1:])
    kept = []
    for path in _files(root):
        relative = path.relative_to(root).as_posix()
        if path.is_relative_to(suite):
            continue
        if relative.split("/")[0] in NO_SCORE and relative not in SCORES:
            continue
        kept.append(path)
    return kept


def _module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split(".")[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(path: Path, package: str) -> Iterator[str]:
    """Every module name ``path`` may import (``from m import x`` also yields ``m.x``, which may be a module)."""
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def task_files(module: str, root: Path = PACKAGE) -> list[Path]:
    """The files of the task suite that the task in ``module`` depends on.

    Its module and what it imports from the suite (transitively, with the packages' ``__init__``), the
    ``fixtures`` folder of every package among them (setup copies those into the guest), and the suite's shared
    top-level modules (some are copied in as fixtures too).
    """
    suite_dir = root.joinpath(*SUITE.split(".")[1:])
    found: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in found or not (name == SUITE or name.startswith(SUITE + ".")):
            continue
        path = _module_file(root, name)
        if path is None:  # a name imported from a module, not a module
            continue
        found[name] = path
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        todo.append(package)
        todo.extend(_imported(path, package))
    files = set(found.values()) | set(suite_dir.glob("*.py"))
    for folder in {path.parent / "fixtures" for path in found.values()}:
        files.update(_files(folder))
    return sorted(files)


def task_module(task: object) -> str:
    """The name of the module that defines ``task`` as its ``TASK``: where its part of the suite starts."""
    for name, module in list(sys.modules.items()):
        if name.startswith(SUITE + ".") and getattr(module, "TASK", None) is task:
            return name
    raise WeaveGymError(f"no module of the suite defines {getattr(task, 'id', task)!r} as its TASK")


def code_digest(module: str, root: Path = PACKAGE) -> str:
    """A digest of the code that decides the scores of the task defined in ``module`` (:func:`task_module`).

    Documentation, tests and TASKS.md lie outside the package, so editing them does not end a resumable run.
    ``root`` may be another checkout's package, to stamp the reports that checkout made.
    """
    return _hash_files(root, [*core_files(root), *task_files(module, root)])


def stamp(report: dict[str, Any], seed: int, code: str) -> dict[str, Any]:
    """The report with what a later ``--resume`` compares: the seed and the code digest."""
    return report | {"seed": seed, "code": code}


def stamp_unless_changed(report: dict[str, Any], seed: int, module: str, code: str,
                         root: Path = PACKAGE) -> tuple[dict[str, Any], bool]:
    """Stamp a finished report with ``code``, the digest its run began with, if the task's code still has it.

    Workers import a task's code when its job starts, so if the files changed since the run began the report
    may come from either version: it is then stamped as no code's (a later ``--resume`` runs it again).
    Returns the stamped report and whether the code changed."""
    changed = code_digest(module, root) != code
    return stamp(report, seed, CHANGED_DURING_RUN if changed else code), changed


def job_of(report: Mapping[str, Any]) -> Job:
    return (report.get("seed"), report.get("repeat"), report.get("task_id"))  # type: ignore[return-value]


# Why a job runs (``validate --plan``).
NOT_RUN, OTHER_CODE, ENV_ERROR, NOT_RESUMED = ("no earlier run", "made by other code", "ended in an env error",
                                                "--resume not given")


@dataclass(frozen=True)
class Carried:
    """What a resumed run keeps from the record, and why it left the rest out."""

    kept: dict[Job, dict[str, Any]]
    other_code: int = 0  # made by other code: run again
    failed: int = 0  # ended in an env error (a worker died, a VM failed): run again
    unknown: int = 0  # a task of this run's, on another seed or repeat count: dropped from the record
    # The env errors of the failed ones (with those they had replaced), for the report of their new run.
    errors: dict[Job, list[str]] = field(default_factory=dict)
    # Why each job the record has a report of runs again: made by other code, or ended in an env error.
    why: dict[Job, str] = field(default_factory=dict)

    def summary(self, path: Path) -> str:
        parts = [f"kept {len(self.kept)} task run(s) from {path}"]
        if self.other_code:
            parts.append(f"{self.other_code} made by other code will run again")
        if self.failed:
            parts.append(f"{self.failed} that ended in an env error will run again")
        if self.unknown:
            parts.append(f"{self.unknown} of these tasks on other seeds or repeats are dropped")
        return "; ".join(parts)


def of_other_tasks(reports: Sequence[Mapping[str, Any]], task_ids: Iterable[str]) -> list[dict[str, Any]]:
    """The reports of tasks outside this run: they stay in the record as they are, so one record can keep a
    suite's runs while its tasks are validated a few at a time (``make validate-base``, one new task)."""
    ours = set(task_ids)
    return [dict(r) for r in reports if r.get("task_id") not in ours]


def carry_over(reports: Sequence[Mapping[str, Any]], jobs: Sequence[Job], codes: Mapping[str, str]) -> Carried:
    """The finished runs of ``jobs`` among ``reports``, made by the code ``codes`` gives for their task."""
    wanted = set(jobs)
    ours = {task_id for _seed, _k, task_id in jobs}
    kept: dict[Job, dict[str, Any]] = {}
    other = failed = unknown = 0
    errors: dict[Job, list[str]] = {}
    why: dict[Job, str] = {}
    for report in reports:
        job = job_of(report)
        if job[2] not in ours:
            continue  # another task's: it stays in the record (of_other_tasks), this run neither keeps nor drops it
        if job not in wanted or job in kept:
            unknown += 1
        elif report.get("code") != codes.get(job[2]):
            other += 1
            why[job] = OTHER_CODE
        elif report.get("error"):
            failed += 1
            errors[job] = [*report.get("earlier_errors", []), str(report["error"])]
            why[job] = ENV_ERROR
        else:
            kept[job] = dict(report)
    return Carried(kept, other, failed, unknown, errors, why)


def in_suite_order(reports: Iterable[dict[str, Any]], task_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Task by task in ``task_ids``' order (unknown tasks last); a task's reports keep the order they came in."""
    rank = {task_id: n for n, task_id in enumerate(task_ids)}
    return sorted(reports, key=lambda r: rank.get(r.get("task_id"), len(rank)))  # type: ignore[arg-type]


def in_job_order(jobs: Sequence[Job], reports: Mapping[Job, dict[str, Any]]) -> list[dict[str, Any]]:
    """The reports in the jobs' order, whichever run made them and when."""
    return [reports[job] for job in jobs if job in reports]


@dataclass(frozen=True)
class PlannedRun:
    """A task run a ``validate`` command would run (``--plan``), why the record does not keep it, and how long the
    task's earlier runs in the record took (their median, in minutes; None: it has none)."""

    job: Job
    why: str
    minutes: float | None


def plan_runs(jobs: Sequence[Job], reports: Sequence[Mapping[str, Any]], carried: Carried, *,
              resume: bool) -> list[PlannedRun]:
    """The jobs a run would run, in order: those ``carried`` does not keep, each with the reason and an estimate.

    The estimate comes from the record's finished runs of the same task on any seed and by any code: a change to a
    task rarely changes how long it takes as much as another task would."""
    walls: dict[str, list[float]] = defaultdict(list)
    for report in reports:
        if not report.get("error") and isinstance(report.get("wall_s"), (int, float)):
            walls[str(report.get("task_id"))].append(float(report["wall_s"]))
    in_file = {job_of(r) for r in reports}
    planned = []
    for job in jobs:
        if job in carried.kept:
            continue
        # carried.why is empty without --resume: then every run in the record runs again, for want of the flag.
        why = carried.why.get(job) or (NOT_RESUMED if job in in_file and not resume else NOT_RUN)
        task_walls = walls.get(job[2])
        planned.append(PlannedRun(job, why, statistics.median(task_walls) / 60 if task_walls else None))
    return planned


def planned_minutes(planned: Sequence[PlannedRun], workers: int) -> tuple[float, int]:
    """(about how many minutes the planned runs take with ``workers`` at once, how many had no earlier time)."""
    known = [run.minutes for run in planned if run.minutes is not None]
    return sum(known) / workers, len(planned) - len(known)
