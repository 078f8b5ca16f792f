"""The shared record reader and per-item verdict of the tasks with numbered items (unit)."""

from __future__ import annotations

import pytest

from weavegym.envs.tasks.item_records import numbered_records, per_item_verdict
from weavegym.testing.files_probe import FilesProbe

pytestmark = pytest.mark.unit
RECORD = "/var/lib/weavegym/task/record.jsonl"


def test_the_last_record_of_an_item_wins_and_junk_lines_are_skipped() -> None:
    lines = ['{"round": 1, "code": "AAAAAA"}', "not json", '["round", 2]', '{"round": "2", "code": "X"}',
             '{"round": 2, "code": "BBBBBB"}', '{"round": 1, "code": "CCCCCC"}', '{"round": 3, "code": "DD']
    probe = FilesProbe({RECORD: "\n".join(lines)})
    assert numbered_records(probe, RECORD, "round") == {1: {"round": 1, "code": "CCCCCC"},
                                                        2: {"round": 2, "code": "BBBBBB"}}
    assert numbered_records(FilesProbe({}), RECORD, "round") == {}  # no record file: nothing recorded


def test_accept_drops_records_such_as_refusals() -> None:
    probe = FilesProbe({RECORD: '{"problem": 1, "key": "e2e4"}\n{"problem": 1, "key": ""}\n{"problem": 2}\n'})
    accepted = numbered_records(probe, RECORD, "problem", accept=lambda r: bool(r.get("key")))
    assert accepted == {1: {"problem": 1, "key": "e2e4"}}


def test_the_verdict_is_satisfied_partial_or_failed_by_how_many_items_are_wrong() -> None:
    right = per_item_verdict(["", "", ""], "saved", noun="rounds")
    assert right.outcome == "satisfied" and right.evidence == "all 3 rounds: saved"
    some = per_item_verdict(["", "round 2: missing", ""], "saved")
    assert some.outcome == "partial" and some.evidence == "round 2: missing"
    assert per_item_verdict(["a", "b"], "saved").outcome == "failed"
    assert per_item_verdict([], "saved").outcome == "failed"  # no items is never a pass
