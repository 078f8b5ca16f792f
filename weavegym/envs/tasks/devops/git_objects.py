"""Reading a guest's git repository through the checker's bounded probe (no TASK here).

The checker may not run git in the guest (the episode owns the repository: hooks, config and symlinks there are
the agent's), so it reads the few files it needs as bytes and parses them on the host: a ref (loose, else in
packed-refs) and a loose commit object (what `git commit`/`git revert` just wrote; an agent's new commits stay
loose until a gc, which nothing here asks for).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from weavegym.evaluators import Probe

SHA = re.compile(r"^[0-9a-f]{40}$")
MAX_OBJECT = 1 << 20


def ref_sha(probe: Probe, repo: str, ref: str) -> str | None:
    """The commit a ref such as ``refs/heads/main`` names, or None when there is no such ref."""
    loose = (probe.read_text(f"{repo}/.git/{ref}") or "").strip()
    if SHA.match(loose):
        return loose
    for line in (probe.read_text(f"{repo}/.git/packed-refs") or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == ref and SHA.match(parts[0]):
            return parts[0]
    return None


@dataclass(frozen=True)
class CommitObject:
    tree: str
    parents: tuple[str, ...]
    message: str


def loose_commit(probe: Probe, repo: str, sha: str) -> CommitObject | None:
    """A loose commit object, inflated on the host; None when it is missing, packed or not a commit."""
    if not SHA.match(sha):
        return None
    data = probe.read_bytes(f"{repo}/.git/objects/{sha[:2]}/{sha[2:]}", max_bytes=MAX_OBJECT)
    if data is None:
        return None
    try:
        raw = zlib.decompressobj().decompress(data, 4 * MAX_OBJECT)
    except zlib.error:
        return None
    header, _, body = raw.partition(b"\0")
    if not header.startswith(b"commit "):
        return None
    head, _, message = body.decode("utf-8", errors="replace").partition("\n\n")
    fields = [line.split(" ", 1) for line in head.splitlines() if " " in line]
    tree = next((value for key, value in fields if key == "tree"), "")
    parents = tuple(value for key, value in fields if key == "parent")
    return CommitObject(tree, parents, message)
