"""The Web tasks' submission clauses, on recorded submissions: only the browser's (the desktop account's,
from the portal's own origin) counts, and each field clause compares what was sent with the truth."""

from __future__ import annotations

import json
from typing import Any

import pytest

from weavegym.envs.tasks import get_task
from weavegym.envs.tasks.web import backup_signoff, incident_report, vm_request
from weavegym.envs.tasks.web._portal import RECORDS

ORIGIN = "http://127.0.0.1:8080"
TRUTH: dict[str, Any] = {
    "origin": ORIGIN, "endpoint": "/api/orders", "errors": 12, "reporter": "a.jensen", "archive": "db-0412.tar.gz",
    "sha256": "f" * 64, "size": 5120, "reviewer": "r.santos", "flavor": "m2.large", "project": "atlas-42",
    "peak_cpu": 1.5, "peak_mem": 2.25, "ids": [],
}
CASES = [
    ("Weave-Web-1", incident_report.FORM, {"endpoint": "/api/orders", "errors": 12, "reporter": "a.jensen"}),
    ("Weave-Web-2", vm_request.FORM, {"flavor": "m2.large", "project": "atlas-42", "peak_cpu": "1.50",
                                      "peak_mem": "2.25"}),
    ("Weave-Web-3", backup_signoff.FORM, {"archive": "db-0412.tar.gz", "sha256": "f" * 64, "size": 5120,
                                          "reviewer": "r.santos"}),
]


class RecordsProbe:
    """Just what the submission clauses read: the portal's root-only records file."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records

    def read_text(self, path: str, *_: Any, **__: Any) -> str | None:
        return "\n".join(json.dumps(r) for r in self.records) if path == RECORDS else None


def _outcomes(task_id: str, records: list[dict[str, Any]]) -> dict[str, str]:
    clauses = [c for c in get_task(task_id).clauses if c.name not in ("source_fixed", "config_fixed", "catalog_fixed")]
    return {c.name: c.check(RecordsProbe(records), TRUTH).outcome.value for c in clauses}


@pytest.mark.parametrize(("task_id", "form", "data"), CASES, ids=[c[0] for c in CASES])
def test_only_the_browsers_right_submission_passes(task_id: str, form: str, data: dict[str, Any]) -> None:
    browser = {"form": form, "data": data, "client": "user", "origin": ORIGIN}
    assert set(_outcomes(task_id, [browser]).values()) == {"satisfied"}
    shell = {**browser, "client": "workspace"}  # curl from the shell: the socket's owner is the workspace
    assert set(_outcomes(task_id, [shell]).values()) == {"failed"}
    elsewhere = {**browser, "origin": "http://127.0.0.1:9999"}  # a page the shell served itself
    assert set(_outcomes(task_id, [elsewhere]).values()) == {"failed"}
    refused = {**browser, "refused": "bad content type"}
    assert set(_outcomes(task_id, [refused]).values()) == {"failed"}
    wrong = {**browser, "data": {key: "zz" for key in data}}
    sent, *fields = _outcomes(task_id, [wrong]).values()
    assert sent == "satisfied" and set(fields) == {"failed"}
    # The last accepted browser submission is the one that counts.
    assert set(_outcomes(task_id, [wrong, browser]).values()) == {"satisfied"}
