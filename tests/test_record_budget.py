"""The record's room: the suite is to grow to 150 tasks validated on five seeds, each run meeting three more
adversaries (backdoor, linker, swapper). Projected from the committed record's own per-run sizes, its largest
file must stay under the repository's 5 MiB limit for a tracked file, and the whole record under 25 MiB.

The same projection of the single file the record used to be (TASKS.json: every task's runs in one file) fails
the limit several times over; a test holds it to that, so the budget is one a layout can fail."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from weavegym.ops.record_store import SUFFIX, TRIMMED, is_clean, read_reports, task_text, write_reports

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
MiB = 2**20
FILE_LIMIT = 5 * MiB  # the repository's limit for one tracked file
RECORD_BUDGET = 25 * MiB  # what the whole record may take in a clone
TASKS, SEEDS = 150, 5
NEW_ADVERSARIES = ("backdoor", "linker", "swapper")
# A run with a violation keeps its whole evaluation. Measured on TASKS.json (180 task runs, 1005 episodes) when
# it became the folder: an episode's whole evaluation was at most 4.45 times its trimmed one (2.9 on average).
FULL_PER_TRIMMED = 4.5
# Of the task runs, how many the total assumes have a violation (whole evaluations): the record had none of 180,
# its first run 1 of 99; a quarter leaves room for what the new adversaries will find. The largest file is
# projected with every run unclean.
UNCLEAN_SHARE = 0.25

Report = Mapping[str, Any]


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")))


def projected_run(report: Report, *, unclean: bool) -> float:
    """Bytes of one task run's compact line with three more adversaries on each of its seeds (a task with
    infeasible variants runs on two), each as large as its largest adversary there; whole evaluations if
    ``unclean``."""
    results: Mapping[str, Any] = report.get("results") or {}
    grow = FULL_PER_TRIMMED if unclean and report.get(TRIMMED) else 1.0  # others' evaluations are whole already
    episodes = {name: _size(result) for name, result in results.items()}
    overhead = _size(report) - sum(episodes.values())
    by_seed: dict[str, list[int]] = {}
    for name, size in episodes.items():
        kind, _, suffix = name.partition("/")
        if kind not in ("oracle", "noop"):
            by_seed.setdefault(suffix, []).append(size)
    # Each new episode: its result, and its key ("backdoor/infeasible":) with the comma before it.
    added = sum(max(sizes) + len(name + (suffix and f"/{suffix}")) + 4
                for suffix, sizes in by_seed.items() for name in NEW_ADVERSARIES)
    return overhead + (sum(episodes.values()) + added) * grow + 2  # ",\n" between lines


def projected_task(reports: Sequence[Report], unclean_share: float) -> float:
    """A task's runs on five seeds, each as large as its largest run today, ``unclean_share`` of them unclean."""
    largest = {unclean: max(projected_run(r, unclean=unclean) for r in reports) for unclean in (False, True)}
    return SEEDS * ((1 - unclean_share) * largest[False] + unclean_share * largest[True])


def projected_file(path: Path, reports: Sequence[Report], unclean_share: float) -> float:
    """The file's bytes when its tasks run as :func:`projected_task` says, written as it is written now (a file
    indented as TASKS.json was takes the room its indentation takes today)."""
    by_task: dict[str, list[Report]] = {}
    for report in reports:
        by_task.setdefault(str(report["task_id"]), []).append(report)
    as_written = path.stat().st_size / (sum(_size(r) + 2 for r in reports) + 2)
    return as_written * sum(projected_task(runs, unclean_share) for runs in by_task.values())


def record_files(repo: Path) -> list[Path]:
    """The files the record is kept in: a file per task in record/, or the single file it used to be."""
    if (repo / "record").is_dir():
        return sorted((repo / "record").glob(f"*{SUFFIX}"))
    if (repo / "TASKS.json").is_file():
        return [repo / "TASKS.json"]
    pytest.skip("no record/ (deleted to start the record over): nothing to project from")


def projected_record(repo: Path) -> tuple[float, float]:
    """(the largest file, the whole record) for 150 tasks: a file of one task's runs keeps its size as tasks are
    added, a file of several grows with the suite, and so does the record."""
    files = {path: read_reports(path) for path in record_files(repo)}
    tasks_now = len({r["task_id"] for reports in files.values() for r in reports})
    growth = TASKS / tasks_now
    largest = max(projected_file(path, reports, 1.0) * (growth if len({r["task_id"] for r in reports}) > 1 else 1)
                  for path, reports in files.items())
    total = growth * sum(projected_file(path, reports, UNCLEAN_SHARE) for path, reports in files.items())
    return largest, total


def test_the_record_holds_150_tasks_on_five_seeds_with_three_more_adversaries() -> None:
    largest, total = projected_record(REPO)
    assert largest < FILE_LIMIT, f"the largest file, every run unclean: {largest / MiB:.2f} MiB"
    assert total < RECORD_BUDGET, f"the record, a quarter of the runs unclean: {total / MiB:.1f} MiB"


def test_the_single_file_the_record_was_would_not_hold_it(tmp_path: Path) -> None:
    """The record's runs as the old layout kept them, one file for every task: the same projection fails."""
    reports = [r for path in record_files(REPO) for r in read_reports(path)]
    write_reports(tmp_path / "TASKS.json", reports)
    largest, _total = projected_record(tmp_path)
    assert largest > FILE_LIMIT, f"one file: {largest / MiB:.1f} MiB"


def test_the_projection_counts_what_the_store_writes() -> None:
    """With no new adversary, seed or violation, the projection of a task's file is the file."""
    for path in record_files(REPO)[:10]:
        reports = read_reports(path)
        assert all(is_clean(r) == bool(r.get(TRIMMED)) for r in reports), "the clean runs, and only they, trimmed"
        assert path.read_text() == task_text(reports)
        bare = [r | {"results": {k: v for k, v in r["results"].items() if k.split("/")[0] in ("oracle", "noop")}}
                for r in reports]
        assert all(projected_run(r, unclean=False) == _size(r) + 2 for r in bare)
        assert abs(len(task_text(reports)) - (sum(_size(r) + 2 for r in reports) + 2)) <= 4
