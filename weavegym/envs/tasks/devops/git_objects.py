"""Reading a guest's git repository through the checker's bounded probe (no TASK here).

The checker may not run git in the guest (the episode owns the repository: hooks, config and symlinks there are
the agent's), so it reads the few files it needs as bytes and parses them on the host: a ref (loose, else in
packed-refs) and a commit object, loose (what `git commit`/`git revert` just wrote) or, after an agent's
`git gc` or `git repack`, in a pack (found through the pack's index, deltas applied).
"""

from __future__ import annotations

import hashlib
import re
import struct
import zlib
from dataclasses import dataclass

from weavegym.evaluators import Probe

SHA = re.compile(r"^[0-9a-f]{40}$")
MAX_OBJECT = 1 << 20
MAX_PACK = 64 << 20  # the task repositories are a few hundred KiB; a bigger pack is not read
MAX_DELTA_DEPTH = 64
IDX_MAGIC = b"\xfftOc"
COMMIT, OFS_DELTA, REF_DELTA = 1, 6, 7
TYPE_NAMES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}


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


def head_sha(probe: Probe, repo: str) -> str | None:
    """The commit HEAD is at: through the branch it names, or detached."""
    head = (probe.read_text(f"{repo}/.git/HEAD") or "").strip()
    if head.startswith("ref: "):
        return ref_sha(probe, repo, head[5:].strip())
    return head if SHA.match(head) else None


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
    return parse_commit(body) if header.startswith(b"commit ") and _names(sha, body) else None


def read_commit(probe: Probe, repo: str, sha: str) -> CommitObject | None:
    """A commit object wherever git keeps it: loose, else in one of the repository's packs."""
    found = loose_commit(probe, repo, sha)
    if found is not None or not SHA.match(sha):
        return found
    folder = f"{repo}/.git/objects/pack"
    for name in probe.list_dir(folder) or []:
        if not name.endswith(".idx"):
            continue
        try:
            index = probe.read_bytes(f"{folder}/{name}", max_bytes=MAX_PACK)
            offset = pack_offset(index or b"", sha)
            if offset is None:
                continue
            pack = probe.read_bytes(f"{folder}/{name[:-4]}.pack", max_bytes=MAX_PACK)
            kind, body = unpack_object(pack or b"", offset)
        except (ValueError, zlib.error, struct.error, IndexError):
            # A damaged or hand-made pack holds no commit the checker can trust; one over MAX_PACK the probe
            # refuses to read (AgentRequestError is a ValueError).
            return None
        return parse_commit(body) if kind == COMMIT and _names(sha, body) else None
    return None


def _names(sha: str, body: bytes) -> bool:
    """The commit's bytes hash to its name, as git would check: a hand-edited object is no commit of git's."""
    return hashlib.sha1(b"commit %d\0" % len(body) + body, usedforsecurity=False).hexdigest() == sha


def parse_commit(body: bytes) -> CommitObject:
    head, _, message = body.decode("utf-8", errors="replace").partition("\n\n")
    fields = [line.split(" ", 1) for line in head.splitlines() if " " in line]
    tree = next((value for key, value in fields if key == "tree"), "")
    parents = tuple(value for key, value in fields if key == "parent")
    return CommitObject(tree, parents, message)


def pack_offset(index: bytes, sha: str) -> int | None:
    """Where a version-2 pack index puts ``sha`` in its pack, or None when that pack does not hold it."""
    if index[:4] != IDX_MAGIC or struct.unpack(">I", index[4:8])[0] != 2:
        raise ValueError("not a version-2 pack index")
    fanout = struct.unpack(">256I", index[8:8 + 1024])
    count, want, first = fanout[255], bytes.fromhex(sha), bytes.fromhex(sha)[0]
    low, high = (fanout[first - 1] if first else 0), fanout[first]
    names = 8 + 1024
    while low < high:  # the names are sorted: binary search within the first byte's bucket
        mid = (low + high) // 2
        name = index[names + 20 * mid:names + 20 * mid + 20]
        if name == want:
            offsets = names + 24 * count  # past the names and the CRC32s
            (offset,) = struct.unpack(">I", index[offsets + 4 * mid:offsets + 4 * mid + 4])
            if offset & 0x80000000:  # an index into the table of 8-byte offsets that follows
                large = offsets + 4 * count + 8 * (offset & 0x7FFFFFFF)
                (offset,) = struct.unpack(">Q", index[large:large + 8])
            return offset
        low, high = (mid + 1, high) if name < want else (low, mid)
    return None


def unpack_object(pack: bytes, offset: int, depth: int = 0) -> tuple[int, bytes]:
    """(type, body) of the object at ``offset`` of a pack, with its delta chain resolved within the pack."""
    if pack[:4] != b"PACK" or depth > MAX_DELTA_DEPTH:
        raise ValueError("not a pack, or a delta chain too deep")
    byte = pack[offset]
    kind, pos = (byte >> 4) & 7, offset + 1
    while byte & 0x80:  # the size's continuation bytes: zlib tells the real length anyway
        byte, pos = pack[pos], pos + 1
    if kind == OFS_DELTA:
        byte, pos = pack[pos], pos + 1
        distance = byte & 0x7F
        while byte & 0x80:
            byte, pos = pack[pos], pos + 1
            distance = ((distance + 1) << 7) | (byte & 0x7F)
        base_kind, base = unpack_object(pack, offset - distance, depth + 1)
        return base_kind, apply_delta(base, _inflate(pack, pos))
    if kind == REF_DELTA:
        raise ValueError("a delta against an object outside the pack (a thin pack)")
    if kind not in TYPE_NAMES:
        raise ValueError(f"unknown object type {kind}")
    return kind, _inflate(pack, pos)


def _inflate(pack: bytes, pos: int) -> bytes:
    inflater = zlib.decompressobj()
    data = inflater.decompress(pack[pos:pos + 8 * MAX_OBJECT], 4 * MAX_OBJECT)
    if not inflater.eof:
        raise ValueError("an object larger than the checker reads, or a truncated pack")
    return data


def apply_delta(base: bytes, delta: bytes) -> bytes:
    """git's delta: the base's size, the result's size, then copy-from-base and insert instructions."""
    pos = 0
    sizes = []
    for _ in range(2):
        size = shift = 0
        while True:
            byte, pos = delta[pos], pos + 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        sizes.append(size)
    if sizes[0] != len(base):
        raise ValueError("a delta for another base")
    out = bytearray()
    while pos < len(delta):
        op, pos = delta[pos], pos + 1
        if op & 0x80:
            start = length = 0
            for bit in range(4):
                if op & (1 << bit):
                    start, pos = start | (delta[pos] << (8 * bit)), pos + 1
            for bit in range(3):
                if op & (0x10 << bit):
                    length, pos = length | (delta[pos] << (8 * bit)), pos + 1
            length = length or 0x10000
            if start + length > len(base):
                raise ValueError("a delta copies past its base")
            out += base[start:start + length]
        elif op:
            out += delta[pos:pos + op]
            pos += op
        else:
            raise ValueError("a delta's reserved instruction 0")
    if len(out) != sizes[1]:
        raise ValueError("a delta whose result has the wrong size")
    return bytes(out)
