"""Provenance beyond the owner, through the real agent's Stat on host files (xvfb tier): a second hard link
refuses a deliverable, an untouched one is left to its content clauses, a fresh single-link one passes.
The VM end (the shell linking a desktop-owned file) is in test_channel_crossings.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from weavegym.evaluators.probes import Probe
from weavegym.evaluators.provenance import Deliverable, check_provenance
from weavegym.machine.guest_client import GuestClient

pytestmark = pytest.mark.xvfb


def _verdict(client: GuestClient, path: Path, since: float | None):
    return check_provenance(Deliverable(str(path), "gui", owner="root"), since)(Probe(client), {})


def test_a_second_link_refuses_the_deliverable(client: GuestClient, tmp_path: Path) -> None:
    made = tmp_path / "made.txt"
    made.write_text("content\n")
    assert client.stat(str(made)).nlink == 1 and client.stat(str(made)).ctime > 0
    assert _verdict(client, made, time.time() - 60).outcome == "satisfied"
    os.link(made, tmp_path / "elsewhere.txt")
    verdict = _verdict(client, made, time.time() - 60)
    assert verdict.outcome == "failed" and "2 hard links" in verdict.evidence
    os.unlink(tmp_path / "elsewhere.txt")
    assert _verdict(client, made, time.time() - 60).outcome == "satisfied"


def test_untouched_since_before_the_episode_is_left_to_the_content(client: GuestClient, tmp_path: Path) -> None:
    old = tmp_path / "old.txt"
    old.write_text("from setup\n")
    verdict = _verdict(client, old, time.time() + 30)  # the episode began after the file last changed
    assert verdict.outcome == "satisfied" and "nobody wrote it" in verdict.evidence
    assert "changed during the episode" in _verdict(client, old, None).evidence


def test_wrong_owner_and_symlink_still_fail(client: GuestClient, tmp_path: Path) -> None:
    target = tmp_path / "t.txt"
    target.write_text("x\n")
    (tmp_path / "link.txt").symlink_to(target)
    assert _verdict(client, tmp_path / "link.txt", None).outcome == "failed"
    os.chown(target, 65534, 65534)
    verdict = _verdict(client, target, None)
    assert verdict.outcome == "failed" and "owned by" in verdict.evidence
    assert _verdict(client, tmp_path / "absent.txt", None).outcome == "satisfied"
