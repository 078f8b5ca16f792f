"""Carrying a cut-short suite validation over to a later run (``weavegym validate --resume``).

Validating every task takes longer here (about four hours with two workers) than a working session, a CI job or
a host's uptime is sure to last, and ``validate --json`` writes the file as runs finish. Resuming keeps the runs
that file already holds and runs only the rest, so the suite's table still comes from one body of code: every
report is stamped with the seed and a digest of the package's source, and a report made by other code (or
another seed) is run again, never mixed in.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weavegym.core.errors import WeaveGymError
from weavegym.machine.backends.prepared_states import code_hash

Job = tuple[int, str]  # (repeat, task id)
PACKAGE = Path(__file__).resolve().parents[1]  # weavegym/


def code_digest(root: Path | None = None) -> str:
    """A digest of the package's source files (paths and bytes): what decides every score a validation reports.

    Documentation, tests and TASKS.md lie outside the package, so editing them does not end a resumable run.
    """
    return code_hash(root or PACKAGE)


def stamp(report: dict[str, Any], seed: int, code: str) -> dict[str, Any]:
    """The report with what a later ``--resume`` compares: the seed and the code digest."""
    return report | {"seed": seed, "code": code}


@dataclass(frozen=True)
class Carried:
    """What a resumed run keeps from the file, and why it left the rest out."""

    kept: dict[Job, dict[str, Any]]
    other_code: int = 0  # made by other source or for another seed: run again
    failed: int = 0  # ended in an env error (a worker died, a VM failed): run again
    unknown: int = 0  # not one of this run's jobs (another pattern or repeat count): dropped from the file

    def summary(self, path: Path) -> str:
        parts = [f"kept {len(self.kept)} task run(s) from {path}"]
        if self.other_code:
            parts.append(f"{self.other_code} made by other code or for another seed will run again")
        if self.failed:
            parts.append(f"{self.failed} that ended in an env error will run again")
        if self.unknown:
            parts.append(f"{self.unknown} outside this run's tasks are dropped")
        return "; ".join(parts)


def carry_over(path: Path, jobs: Sequence[Job], seed: int, code: str) -> Carried:
    """The finished runs of ``jobs`` that ``path`` holds for this seed and code (none if it does not exist)."""
    if not path.exists():
        return Carried({})
    try:
        reports = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise WeaveGymError(f"cannot resume from {path}: {exc}") from None
    if not isinstance(reports, list) or not all(isinstance(r, dict) for r in reports):
        raise WeaveGymError(f"cannot resume from {path}: not a list of validation reports (`validate --json`)")
    wanted = set(jobs)
    kept: dict[Job, dict[str, Any]] = {}
    other = failed = unknown = 0
    for report in reports:
        job = (report.get("repeat"), report.get("task_id"))
        if job not in wanted or job in kept:
            unknown += 1
        elif report.get("seed") != seed or report.get("code") != code:
            other += 1
        elif report.get("error"):
            failed += 1
        else:
            kept[job] = report  # type: ignore[index]
    return Carried(kept, other, failed, unknown)


def in_job_order(jobs: Sequence[Job], reports: dict[Job, dict[str, Any]]) -> list[dict[str, Any]]:
    """The reports in the jobs' order (repeat, then suite order), whichever run made them and when."""
    return [reports[job] for job in jobs if job in reports]
