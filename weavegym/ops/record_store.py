"""Where ``weavegym validate --json`` keeps its reports: a record folder (one file per task) or a single file.

The suite's record (``record/``, committed beside TASKS.md) was one file, TASKS.json: 180 task runs of 60 tasks
made it 4.4 MiB, near the repository's 5 MiB limit for a tracked file, and the suite is to grow to 150 tasks on
five seeds with three more adversaries per run. So the record is a folder with a file per task
(``record/Weave-DevOps-1.json``): a run on a few tasks rewrites only their files, and no file holds more than
one task's runs. Each file is a JSON list with one compact report per line, so a re-run task's diff is its lines.

A clean task run (no violation: the oracle passed, the do-nothing run scored 0, every adversary stayed below
the threshold) keeps what TASKS.md, TASKS.svg, ``--resume`` and ``--plan`` read: scores, timing, seed, code
digest, image, every clause's name and verdict, the flags' rules, the rules that zeroed a run. Its clauses'
descriptions and evidence and its flags' messages and evidence are dropped (:func:`trimmed`): they restate the
task's code or say why a run that behaved was judged so. A run with a violation, or whose report does not say,
keeps its whole evaluation: that is the evidence someone will read.

A single file (``--json runs/mine.json``) still works as before, whole reports and all, for one's own runs and
for records kept before the folder; :func:`migrate` turns such a file into a folder.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from weavegym.core.errors import WeaveGymError

Report = dict[str, Any]
SUFFIX = ".json"
TRIMMED = "trimmed"  # a report's key: its evaluations keep only what the tables read (a clean run)
# What a clean run's evaluations drop: per clause and per flag, the bulky fields no table or resume reads.
CLAUSE_DETAIL = ("description", "evidence", "seconds", "weight", "cap")
FLAG_DETAIL = ("message", "evidence")


def is_folder(path: Path) -> bool:
    """Whether ``--json path`` means a record folder: a folder, or a path not yet there without a suffix
    (``record``); anything else (``runs/mine.json``) is a single file, as ``--json`` always took."""
    return path.is_dir() or (not path.exists() and not path.suffix)


def is_clean(report: Mapping[str, Any]) -> bool:
    """A task run without a violation, as TASKS.md counts it clean; a report that does not list its violations
    (or ended in an env error) is not known to be clean."""
    return report.get("violations") == [] and not report.get("error")


def trimmed(report: Mapping[str, Any]) -> Report:
    """The report as the record keeps it: a clean run's evaluations without the detail (see the module's
    docstring); any other report unchanged. Trimming a trimmed report changes nothing."""
    if not is_clean(report):
        return dict(report)
    results = {name: _trimmed_result(result) for name, result in (report.get("results") or {}).items()}
    return {**report, "results": results, TRIMMED: True}


def _trimmed_result(result: Mapping[str, Any]) -> dict[str, Any]:
    evaluation = result.get("evaluation")
    if not isinstance(evaluation, Mapping):
        return dict(result)
    slim = dict(evaluation)
    if isinstance(slim.get("clauses"), list):
        slim["clauses"] = [_without(clause, CLAUSE_DETAIL) for clause in slim["clauses"]]
    if isinstance(slim.get("flags"), list):
        slim["flags"] = [_without(flag, FLAG_DETAIL) for flag in slim["flags"]]
    return {**result, "evaluation": slim}


def _without(item: Any, keys: Sequence[str]) -> Any:
    return {k: v for k, v in item.items() if k not in keys} if isinstance(item, Mapping) else item


def task_file(folder: Path, task_id: str) -> Path:
    """The file of one task's runs; an id that is no plain file name is refused rather than written elsewhere."""
    if not task_id or task_id.startswith(".") or Path(task_id).name != task_id:
        raise WeaveGymError(f"{task_id!r} is not a task id the record can name a file after")
    return folder / f"{task_id}{SUFFIX}"


def task_text(reports: Sequence[Mapping[str, Any]]) -> str:
    """One task's file: a JSON list, a compact report per line (a re-run's diff is the lines it changed)."""
    lines = [json.dumps(trimmed(report), separators=(",", ":")) for report in reports]
    return "[\n" + ",\n".join(lines) + "\n]\n" if lines else "[]\n"


def _parse(path: Path, move_on: str) -> list[Report]:
    try:
        reports = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise WeaveGymError(f"cannot read the validation reports in {path}: {exc} ({move_on})") from None
    if not isinstance(reports, list) or not all(isinstance(r, dict) for r in reports):
        raise WeaveGymError(f"{path} is not a list of validation reports (`validate --json`); {move_on}")
    return reports


def read_folder(folder: Path) -> list[Report]:
    """Every task's reports in a record folder, file by file in name order (none if there is no folder).

    Anything that is not a task's list of its own reports is refused, naming the file, before a run writes
    anything: the folder may be the suite's record. Hidden files (a write cut short) are ignored."""
    if not folder.exists():
        return []
    reports: list[Report] = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):
            continue
        if not path.is_file() or path.suffix != SUFFIX:
            raise WeaveGymError(f"{folder} is not a validation record: it holds {path.name}, not a task's "
                                f"{SUFFIX} file (pick another --json folder, or move that away)")
        move_on = "fix it from git or delete it: it holds one task's runs, which a run then makes again"
        found = _parse(path, move_on)
        strays = sorted({str(r.get("task_id")) for r in found} - {path.stem})
        if strays:
            raise WeaveGymError(f"{path} holds runs of {', '.join(strays)}, not only of {path.stem}; {move_on}")
        reports.extend(found)
    return reports


def read_reports(path: Path) -> list[Report]:
    """The reports a ``validate --json`` file or record folder holds (none if there is nothing yet).

    Anything else there is refused, not overwritten: it may be a suite's record."""
    if is_folder(path):
        return read_folder(path)
    if not path.exists():
        return []
    return _parse(path, "pick another --json file, or move this one away")


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` whole: a suite run stopped mid-write must leave the last good file for --resume."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    os.replace(partial, path)


def write_folder(folder: Path, reports: Iterable[Mapping[str, Any]],
                 tasks: Collection[str] | None = None) -> list[Path]:
    """Write the files of ``tasks`` (default: every task ``reports`` covers) whose text changed; returns them.

    A task of ``tasks`` without a report keeps its file: a run cut short before its first run of the task
    leaves its earlier runs, which ``--resume`` keeps if its code is unchanged. Other tasks' files are not
    opened for writing."""
    by_task: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for report in reports:
        by_task[str(report.get("task_id"))].append(report)
    written = []
    for task_id in by_task if tasks is None else [t for t in tasks if t in by_task]:
        path, text = task_file(folder, task_id), task_text(by_task[task_id])
        if path.is_file() and path.read_bytes() == text.encode():
            continue
        folder.mkdir(parents=True, exist_ok=True)
        write_atomically(path, text)
        written.append(path)
    return written


def write_reports(path: Path, reports: Sequence[Mapping[str, Any]], tasks: Collection[str] | None = None) -> None:
    """Save the reports to a record folder (only ``tasks``' files, see :func:`write_folder`) or to one file.

    The file keeps every report whole, indented by one space as ``--json`` always wrote it: ``reports`` must
    then hold the other tasks' runs too."""
    if is_folder(path):
        write_folder(path, reports, tasks)
    else:
        write_atomically(path, json.dumps(list(reports), indent=1))


def migrate(source: Path, folder: Path) -> list[Path]:
    """Move a single-file record (TASKS.json) into a new record folder; returns the files written.

    Refuses a folder that already holds a record, so that no two records are mixed."""
    if source.is_dir():
        raise WeaveGymError(f"{source} is a folder, not a single-file record")
    if folder.exists() and any(p for p in folder.iterdir() if not p.name.startswith(".")):
        raise WeaveGymError(f"{folder} is not empty: migrate into a new folder")
    reports = read_reports(source)
    if not reports:
        raise WeaveGymError(f"{source} holds no validation reports")
    return write_folder(folder, reports)
