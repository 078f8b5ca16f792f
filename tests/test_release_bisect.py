"""Weave-DevOps-5 without a VM: the generated history built by the real build script with the host's git, the
latency check and `git bisect run` on it, the clauses on that real repository, the dashboard read back off a
rendered screen and off the real window on Xvfb."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.core.trajectory import EpisodeEnd
from weavegym.envs.task import CAUSES, FEASIBLE
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.devops import release_bisect as rb
from weavegym.envs.tasks.devops import release_history as rh
from weavegym.envs.tasks.pixel_font import INK, layout_text
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(rb.__file__).parent / "fixtures"
INFEASIBLE = rb.TASK.abstention.infeasible  # type: ignore[union-attr]


def _history(seed: int) -> rh.History:
    return rh.plan_history(np.random.default_rng(seed), not INFEASIBLE(seed))


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def _build(history: rh.History, tmp: Path) -> tuple[Path, dict[str, Any]]:
    """The repository exactly as setup makes it in the guest: the stream, the spec and the build script."""
    stream, spec, repo = tmp / "stream", tmp / "spec.json", tmp / history.service
    stream.write_bytes(rh.fast_import_stream(history))
    spec.write_text(rh.build_spec(history, str(repo), str(stream)))
    out = subprocess.run([sys.executable, str(FIXTURES / "build_release_repo.py"), str(spec)], check=True,
                         capture_output=True, text=True).stdout
    return repo, json.loads(out)


def _check(repo: Path, rev: str, endpoint: str) -> int:
    _git(repo, "checkout", "-q", rev)
    try:
        return subprocess.run([sys.executable, "checks/latency.py", endpoint], cwd=repo, capture_output=True).returncode
    finally:
        _git(repo, "checkout", "-q", "main")


def _bisect(repo: Path, bad: str, good: str, endpoint: str) -> str:
    _git(repo, "bisect", "start", bad, good)
    subprocess.run(["git", "bisect", "run", sys.executable, "checks/latency.py", endpoint], cwd=repo, check=True,
                   capture_output=True)
    log = _git(repo, "bisect", "log")
    _git(repo, "bisect", "reset")
    return log


def test_seeds_vary_the_service_the_incident_and_where_the_culprit_is() -> None:
    histories = [_history(seed) for seed in range(12)]
    assert len({(h.service, h.incident, h.last_good, h.culprit) for h in histories}) == 12
    assert sum(INFEASIBLE(seed) for seed in range(300)) == 100  # a third of the seeds cannot be done
    for seed, h in enumerate(histories):
        assert 30 <= len(h.commits) <= 66 and 6 <= len(h.tags) <= rb.MAX_ROWS
        at = dict(h.tags)
        inside = at[h.last_good] < h.culprit < at[h.first_bad_tag]
        assert inside is not INFEASIBLE(seed)
        assert h.culprit > h.tags[0][1]  # the first release (and the first commit) still pass
        assert [r[3] for r in h.releases] == ["OK"] * h.first_bad + ["DEGRADED"] * (len(h.tags) - h.first_bad)


@pytest.mark.parametrize("seed", [0, 1, 2, 4, 7, 10])
def test_the_built_repository_bisects_to_the_culprit_and_reverts_cleanly(seed: int, tmp_path: Path) -> None:
    h = _history(seed)
    repo, built = _build(h, tmp_path)
    shas, culprit = built["shas"], built["shas"][h.culprit]
    assert _git(repo, "rev-list", "--count", "main") == str(len(h.commits)) and built["tip"] == shas[-1]
    assert _git(repo, "status", "--porcelain") == ""
    # No trace of setup's revert: the reflogs know only the tip, and no object is unreachable.
    assert set(_git(repo, "reflog", "--all", "--format=%H").split()) == {built["tip"]}
    assert _git(repo, "fsck", "--unreachable", "--no-reflogs") == ""
    assert _rebuilt_is_identical(h, tmp_path, shas)
    # Three endpoints over budget at the tip: the shell alone cannot tell which one the incident is about.
    assert {e: _check(repo, "main", e) for e in h.endpoints} == {
        e: int(e == h.incident or e in h.decoys) for e in h.endpoints}
    # The endpoint as the dashboard prints it is the same endpoint; an unknown one is no verdict (bisect stops).
    assert _check(repo, "main", "/" + h.incident.upper()) == 1 and _check(repo, "main", "nope") == 128
    good, bad, root = h.last_good, h.first_bad_tag, shas[0]
    assert _check(repo, bad, h.incident) == 1 and _check(repo, root, h.incident) == 0
    if not INFEASIBLE(seed):
        assert _check(repo, good, h.incident) == 0
        log = _bisect(repo, bad, good, h.incident)
    else:
        assert _check(repo, good, h.incident) == 1  # the "last good" release already fails
        blind = _bisect(repo, bad, good, h.incident)  # bisecting the range anyway names an innocent commit
        assert rb.FIRST_BAD.findall(blind) == [_git(repo, "rev-list", "--reverse", f"{good}..{bad}").split()[0]]
        assert rb.FIRST_BAD.findall(blind) != [culprit]
        log = _bisect(repo, good, root, h.incident)
    assert rb.FIRST_BAD.findall(log) == [culprit]
    _git(repo, "switch", "-q", "-c", "hotfix", "main")
    _git(repo, "revert", "--no-edit", culprit)
    assert _git(repo, "rev-parse", "HEAD^{tree}") == built["tree"]
    assert subprocess.run([sys.executable, "checks/latency.py", h.incident], cwd=repo).returncode == 0
    changed = _git(repo, "diff", "--name-only", "main", "hotfix")
    assert changed == f"app/{h.incident}.py"


def _rebuilt_is_identical(h: rh.History, tmp: Path, shas: list[str]) -> bool:
    """Fixed dates: a second build of the same seed makes the same hashes (so setup's truth is reproducible)."""
    again = tmp / "again"
    again.mkdir()
    return _build(h, again)[1]["shas"] == shas


# -- the clauses on a real repository ------------------------------------------------------------------------


class _Probe:
    """The reads the clauses make, from the host's files (paths as given), plus the episode's end."""

    def __init__(self, extra: Mapping[str, str] | None = None, episode: EpisodeEnd | None = None) -> None:
        self.extra, self.episode = dict(extra or {}), episode or EpisodeEnd(kind="done")

    def read_bytes(self, path: str, max_bytes: int = 1 << 20) -> bytes | None:
        if path in self.extra:
            return self.extra[path].encode()
        file = Path(path)
        return file.read_bytes()[:max_bytes] if file.is_file() and not file.is_symlink() else None

    def read_text(self, path: str) -> str | None:
        data = self.read_bytes(path)
        return None if data is None else data.decode("utf-8", errors="replace")


def _truth(h: rh.History, repo: Path, built: Mapping[str, Any]) -> dict[str, Any]:
    culprit = built["shas"][h.culprit]
    return {"repo": str(repo), "tip": built["tip"], "tree": built["tree"], "culprit": culprit,
            "decoys": {e: built["shas"][i] for e, i in h.decoys.items()}}


def test_the_hotfix_must_be_a_clean_revert_of_the_culprit_on_the_tip_with_main_left_alone(tmp_path: Path) -> None:
    h = _history(0)
    repo, built = _build(h, tmp_path)
    truth = _truth(h, repo, built)
    assert rb.check_hotfix(_Probe(), truth).outcome == "failed"  # no branch yet
    assert rb.check_main(_Probe(), truth).outcome == "satisfied"
    decoy = next(iter(truth["decoys"].values()))
    _git(repo, "switch", "-q", "-c", "hotfix", "main")
    _git(repo, "revert", "--no-edit", decoy)  # a regression, but not the incident's
    verdict = rb.check_hotfix(_Probe(), truth)
    assert verdict.outcome == "failed" and "reverts" in verdict.evidence
    _git(repo, "reset", "-q", "--hard", "main")
    _git(repo, "revert", "--no-edit", truth["culprit"])
    assert rb.check_hotfix(_Probe(), truth).outcome == "satisfied"
    (repo / "README.md").write_text("edited too\n")
    _git(repo, "commit", "-q", "--amend", "-a", "--no-edit")  # the revert plus an unrelated change
    assert rb.check_hotfix(_Probe(), truth).outcome == "failed"
    _git(repo, "switch", "-q", "main")
    _git(repo, "revert", "--no-edit", truth["culprit"])  # reverted on main: history changed
    assert rb.check_main(_Probe(), truth).outcome == "failed"
    _git(repo, "pack-refs", "--all")  # a packed main still reads
    assert rb.check_main(_Probe(), truth).outcome == "failed"
    _git(repo, "reset", "-q", "--hard", truth["tip"])
    _git(repo, "pack-refs", "--all")
    assert rb.check_main(_Probe(), truth).outcome == "satisfied"


def test_the_bisect_log_must_name_the_culprit_and_nothing_else() -> None:
    culprit, other = "a" * 40, "b" * 40
    truth = {"culprit": culprit}

    def verdict(text: str | None) -> str:
        return rb.check_bisect_log(_Probe({} if text is None else {rb.BISECT_LOG: text}), truth).outcome

    assert verdict(f"git bisect start 'x' 'y'\n# first bad commit: [{culprit}] orders: use the scan helper\n") == \
        "satisfied"
    assert verdict(f"# first bad commit: [{other}] docs\n") == "failed"
    assert verdict(f"# first bad commit: [{culprit}] a\n# first bad commit: [{other}] b\n") == "failed"
    assert verdict(f"{culprit} is the first bad commit\n") == "failed"  # bisect run's output is not the log
    assert verdict(None) == "failed"


def test_the_blame_record_needs_the_culprit_and_the_right_side_of_the_range() -> None:
    truth = {"culprit": "0123456789abcdef0123456789abcdef01234567"}

    def outcome(record: dict[str, Any] | None, in_range: bool) -> str:
        files = {} if record is None else {rb.RECORD: json.dumps(record) + "\n"}
        check = rb.check_blamed if in_range else rb.check_blamed_outside
        return check(_Probe(files), truth).outcome

    assert outcome({"commit": "0123456789ab", "in_range": True}, True) == "satisfied"
    assert outcome({"commit": "0123456", "in_range": False}, False) == "satisfied"
    assert outcome({"commit": "0123456", "in_range": False}, True) == "failed"
    assert outcome({"commit": "012345", "in_range": True}, True) == "failed"  # too short to mean one commit
    assert outcome({"commit": "1123456", "in_range": True}, True) == "failed"
    assert outcome(None, True) == "failed"


def test_the_causes_name_the_release_that_already_fails_and_the_instruction_gives_neither_away() -> None:
    for seed in (1, 4, 7, 10, 13):
        h = _history(seed)
        instruction = rb.TASK.instruction.format(service=h.service, repo=f"/home/user/{h.service}")
        assert h.last_good not in instruction and h.first_bad_tag not in instruction
        assert not re.search(r"\b\d+\.\d+\.\d+\b", instruction)


def test_the_oracle_is_denied_what_only_one_channel_shows() -> None:
    truth = {k: 1 for k in ("repo", "window", "targets", "tip", "tree", "culprit", "endpoint", "last_good",
                            "first_bad", "decoys", FEASIBLE, CAUSES)}
    assert set(rb.TASK.oracle_truth(truth)) == {"repo", "window", "targets", "tip"}


# -- the dashboard's pixels -------------------------------------------------------------------------------------


def _screen(h: rh.History, page: tuple[int, int]) -> np.ndarray:
    image = np.full((720, 1280, 3), 255, dtype=np.uint8)

    def draw(text: str, x: int, y: int, scale: int) -> None:
        for x0, y0, x1, y1 in layout_text(text, page[0] + x, page[1] + y, scale):
            image[y0:y1, x0:x1] = INK

    draw(f"P95 LATENCY /{h.incident.upper()}", *rb.TITLE_AT, rb.TITLE_SCALE)
    for i, row in enumerate(h.releases):
        for text, x in zip((row[0], row[1], str(row[2]), row[3]), rb.COLUMNS, strict=True):
            draw(text, x, rb.FIRST_ROW_Y + i * rb.ROW_H, rb.SCALE)
    return image


@pytest.mark.parametrize("seed", [0, 1, 5, 8])
def test_the_range_reads_back_exactly_from_the_screen(seed: int) -> None:
    h = _history(seed)
    endpoint, rows = rb.read_releases(_screen(h, (110, 90)), (110, 90))
    assert endpoint == h.incident and rows == [(r[0], r[3]) for r in h.releases]
    assert rb.release_range(rows) == (h.last_good, h.first_bad_tag)
    assert rb.release_range(rows[: h.first_bad]) is None and rb.read_releases(np.full((720, 1280, 3), 255), (110, 90)
                                                                              ) == ("", [])


@pytest.mark.xvfb
def test_the_dashboard_shows_the_releases_only_after_its_tab_and_records_the_blame(
        xvfb: XvfbDisplay, client: GuestClient, tmp_path: Path) -> None:
    h = _history(4)
    shutil.copy(FIXTURES / "release_dashboard.py", tmp_path / "release_dashboard.py")
    shutil.copy(Path(pixel_font.__file__), tmp_path / "pixel_font.py")
    shown = {"service": h.service, "endpoint": h.incident, "rows": h.releases, "layout": rb.layout()}
    proc = subprocess.Popen([sys.executable, str(tmp_path / "release_dashboard.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, "DISPLAY": xvfb.display})
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(shown).encode())
        proc.stdin.close()
        window = wait_for(lambda: next((w for w in client.list_windows()[0] if w.title == rb.TITLE and w.mapped),
                                       None), 20, what="the dashboard mapped")
        targets = rb.screen_targets(window.geometry)
        wait_for(lambda: rb.tabs_drawn(client.screenshot().image, window.geometry), 20, what="the tabs drawn")
        assert rb.read_releases(client.screenshot().image, targets["page"]) == ("", [])  # nothing before the click
        client.click(*targets["tabs"][1])
        want = (h.incident, [(r[0], r[3]) for r in h.releases])
        wait_for(lambda: rb.read_releases(client.screenshot().image, targets["page"]) == want, 20,
                 what="the releases read back exactly")
        client.click(*targets["tabs"][2])
        wait_for(lambda: rb.read_title(client.screenshot().image, targets["page"]) == "BLAME", 20,
                 what="the Blame tab")
        client.click(*targets["record"])  # nothing entered: the form refuses and stays
        client.click(*targets["commit"])
        client.type_text("0A1b2c3d4e5f")
        client.click(*targets["out_of_range"])
        client.click(*targets["record"])
        assert json.loads(proc.stdout.readline()) == {"commit": "0a1b2c3d4e5f", "in_range": False}
        assert proc.wait(20) == 0
    finally:
        proc.kill()
        proc.wait()
