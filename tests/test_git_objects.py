"""The checker's git reader (weavegym/envs/tasks/devops/git_objects.py) against repositories made by real git.

The DevOps tasks score a revert by reading the commit a branch names. An agent may well run `git gc` (or git may
run it by itself): its commits then move from loose objects into a pack, with deltas. These tests read every
object of such a pack and compare it with what `git cat-file` prints, and score a revert before and after a gc.
"""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import pytest

from weavegym.envs.tasks.devops.git_objects import apply_delta, head_sha, pack_offset, read_commit, unpack_object
from weavegym.envs.tasks.devops.release_bisect import check_hotfix
from weavegym.evaluators.scoring import Outcome

pytestmark = pytest.mark.unit

GIT_ENV = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.org", "GIT_COMMITTER_NAME": "Ada",
           "GIT_COMMITTER_EMAIL": "ada@example.org", "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"}


class HostProbe:
    """The three reads git_objects makes, from the host's file system (the guest probe's contract)."""

    def read_bytes(self, path: str, max_bytes: int = 1 << 20) -> bytes | None:
        p = Path(path)
        if not p.is_file():
            return None
        if p.stat().st_size > max_bytes:
            raise ValueError(f"{path} is over {max_bytes} bytes")
        return p.read_bytes()

    def read_text(self, path: str) -> str | None:
        data = self.read_bytes(path)
        return None if data is None else data.decode("utf-8", errors="replace")

    def list_dir(self, path: str) -> list[str] | None:
        return sorted(os.listdir(path)) if os.path.isdir(path) else None


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env).stdout.decode()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A service whose fifth commit broke it, then a revert of that commit on a hotfix branch."""
    _git(tmp_path, "init", "-q", "-b", "main")
    body = "\n".join(f"line {i}: {'x' * (i % 40)}" for i in range(400))
    for n in range(8):  # similar large files, so that the gc stores most of them as deltas
        (tmp_path / f"module{n}.py").write_text(body + f"\n# module {n}\n" + "y" * n)
        _git(tmp_path, "add", ".")
        _git(tmp_path, "commit", "-q", "-m", f"change {n}")
    culprit = _git(tmp_path, "rev-parse", "HEAD~3").strip()
    _git(tmp_path, "switch", "-q", "-c", "hotfix")
    _git(tmp_path, "revert", "--no-edit", culprit)
    _git(tmp_path, "switch", "-q", "main")
    return tmp_path


def _truth(repo: Path) -> dict[str, str]:
    return {"repo": str(repo), "culprit": _git(repo, "rev-parse", "main~3").strip(),
            "tip": _git(repo, "rev-parse", "main").strip(), "tree": _git(repo, "rev-parse", "hotfix^{tree}").strip()}


def test_a_revert_scores_the_same_loose_and_after_a_gc_packed_it(repo: Path) -> None:
    truth = _truth(repo)
    probe = HostProbe()
    assert check_hotfix(probe, truth).outcome == Outcome.SATISFIED
    _git(repo, "gc", "-q", "--aggressive", "--prune=now")
    assert not any((repo / ".git/objects").glob("[0-9a-f][0-9a-f]/*")), "the gc left loose objects"
    verdict = check_hotfix(probe, truth)
    assert verdict.outcome == Outcome.SATISFIED, verdict.evidence
    hotfix = _git(repo, "rev-parse", "hotfix").strip()
    commit = read_commit(probe, str(repo), hotfix)
    assert commit is not None and commit.parents == (truth["tip"],) and commit.tree == truth["tree"]
    assert head_sha(probe, str(repo)) == truth["tip"]
    # A commit that is not there is None, packed or not; so is a name that is no commit id.
    assert read_commit(probe, str(repo), "0" * 40) is None and read_commit(probe, str(repo), "HEAD") is None


def test_every_object_of_a_gc_pack_reads_back_as_git_prints_it(repo: Path) -> None:
    _git(repo, "gc", "-q", "--aggressive", "--prune=now")
    (index,) = (repo / ".git/objects/pack").glob("*.idx")
    pack = index.with_suffix(".pack").read_bytes()
    listed = _git(repo, "verify-pack", "-v", str(index)).splitlines()
    objects = [line.split() for line in listed if len(line.split()) >= 5 and len(line.split()[0]) == 40]
    deltas = [fields for fields in objects if len(fields) == 7]  # verify-pack adds depth and base to a delta
    assert deltas, "the gc stored no deltas: this test would not exercise them"
    kinds = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}
    for sha, kind, *_rest in objects:
        got_kind, body = unpack_object(pack, pack_offset(index.read_bytes(), sha))
        assert kinds[got_kind] == kind
        assert body == subprocess.run(["git", "-C", str(repo), "cat-file", kind, sha], check=True,
                                      capture_output=True).stdout, sha


def test_a_hand_written_object_under_a_commit_s_name_is_not_read_as_that_commit(repo: Path) -> None:
    """An agent cannot make the hotfix branch's commit say something else by rewriting its object file."""
    truth = _truth(repo)
    hotfix = _git(repo, "rev-parse", "hotfix").strip()
    path = repo / ".git/objects" / hotfix[:2] / hotfix[2:]
    body = f"tree {truth['tree']}\nparent {truth['tip']}\n\nThis reverts commit {truth['culprit']}.\n".encode()
    path.chmod(0o644)
    path.write_bytes(zlib.compress(b"commit %d\0" % len(body) + body))
    assert read_commit(HostProbe(), str(repo), hotfix) is None
    assert check_hotfix(HostProbe(), truth).outcome == Outcome.FAILED


def test_damaged_packs_and_deltas_are_refused_not_misread(repo: Path) -> None:
    _git(repo, "gc", "-q", "--prune=now")
    (index,) = (repo / ".git/objects/pack").glob("*.idx")
    hotfix = _git(repo, "rev-parse", "hotfix").strip()
    data = bytearray(index.with_suffix(".pack").read_bytes())
    offset = pack_offset(index.read_bytes(), hotfix)
    assert offset is not None
    data[offset + 4:offset + 12] = b"\x00" * 8  # inside the commit's deflated bytes
    index.with_suffix(".pack").chmod(0o644)
    index.with_suffix(".pack").write_bytes(bytes(data))
    assert read_commit(HostProbe(), str(repo), hotfix) is None
    with pytest.raises(ValueError, match="another base"):
        apply_delta(b"abc", bytes([4, 3, 0x90, 3]))
    with pytest.raises(ValueError, match="past its base"):
        apply_delta(b"abc", bytes([3, 4, 0x90, 4]))
    assert apply_delta(b"abcdef", bytes([6, 5, 0x91, 2, 3, 2]) + b"XY") == b"cdeXY"
    with pytest.raises(ValueError, match="version-2 pack index"):
        pack_offset(b"not an index", hotfix)
