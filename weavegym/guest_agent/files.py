"""File transfer and inspection in the guest.

Uploads are written to a temporary file in the target directory and renamed
into place only once complete (and, when the client said how big it is, the
size matches), so an interrupted upload never leaves a half-written file where
a task or checker would read it.
"""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import stat as statmod
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from weavegym.guest_agent.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied

DEFAULT_CHUNK = 1 << 20
MAX_CHUNK = 4 << 20
DEFAULT_MAX_ENTRIES = 10_000


@dataclass
class StatInfo:
    path: str
    exists: bool
    type: str = ""  # "file" | "dir" | "symlink" | "other"
    size: int = 0
    mode: int = 0
    owner: str = ""
    group: str = ""
    mtime: float = 0.0
    link_target: str = ""


def _check_path(path: str) -> str:
    if not path:
        raise InvalidArgument("path is empty")
    if "\x00" in path:
        raise InvalidArgument("path contains a NUL byte")
    if not os.path.isabs(path):
        raise InvalidArgument(f"path must be absolute, got {path!r}")
    return os.path.normpath(path)


def _name(lookup, ident: int) -> str:
    try:
        return lookup(ident)[0]
    except KeyError:
        return str(ident)


def stat_path(path: str, follow_symlinks: bool = False) -> StatInfo:
    path = _check_path(path)
    try:
        st = os.stat(path, follow_symlinks=follow_symlinks)
    except FileNotFoundError:
        return StatInfo(path=path, exists=False)
    except PermissionError as exc:
        raise PermissionDenied(str(exc)) from None
    if statmod.S_ISREG(st.st_mode):
        kind = "file"
    elif statmod.S_ISDIR(st.st_mode):
        kind = "dir"
    elif statmod.S_ISLNK(st.st_mode):
        kind = "symlink"
    else:
        kind = "other"
    return StatInfo(
        path=path,
        exists=True,
        type=kind,
        size=st.st_size,
        mode=statmod.S_IMODE(st.st_mode),
        owner=_name(pwd.getpwuid, st.st_uid),
        group=_name(grp.getgrgid, st.st_gid),
        mtime=st.st_mtime,
        link_target=os.readlink(path) if kind == "symlink" else "",
    )


def list_dir(path: str, max_entries: int = 0) -> tuple[list[StatInfo], bool]:
    path = _check_path(path)
    limit = max_entries if max_entries > 0 else DEFAULT_MAX_ENTRIES
    try:
        names = sorted(os.listdir(path))
    except FileNotFoundError:
        raise NotFound(f"{path!r} does not exist") from None
    except NotADirectoryError:
        raise InvalidArgument(f"{path!r} is not a directory") from None
    except PermissionError as exc:
        raise PermissionDenied(str(exc)) from None
    entries = [stat_path(os.path.join(path, n)) for n in names[:limit]]
    return entries, len(names) > limit


def upload(path: str, chunks: Iterable[bytes], mode: int = 0, owner: str = "",
           make_parents: bool = False, expected_size: int = 0) -> tuple[str, int, str]:
    """Write ``chunks`` to ``path`` atomically; returns (path, size, sha256)."""
    path = _check_path(path)
    directory = os.path.dirname(path)
    if os.path.isdir(path):
        raise InvalidArgument(f"{path!r} is a directory")
    uid = gid = -1
    if owner:  # "user" (the user's own group) or "user:group"
        user, _, group = owner.partition(":")
        try:
            account = pwd.getpwnam(user)
        except KeyError:
            raise InvalidArgument(f"no such user {user!r}") from None
        uid, gid = account.pw_uid, account.pw_gid
        if group:
            try:
                gid = grp.getgrnam(group).gr_gid
            except KeyError:
                raise InvalidArgument(f"no such group {group!r}") from None
        if uid != os.getuid() and os.getuid() != 0:
            raise PermissionDenied(f"the agent cannot give files to {owner!r}")
    if not os.path.isdir(directory):
        if not make_parents:
            raise NotFound(f"directory {directory!r} does not exist (set make_parents)")
        os.makedirs(directory, exist_ok=True)
        if uid >= 0:
            os.chown(directory, uid, gid)
    digest = hashlib.sha256()
    size = 0
    fd, tmp = tempfile.mkstemp(prefix=".weavegym-upload-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
                digest.update(chunk)
                size += len(chunk)
        if expected_size and size != expected_size:
            raise InvalidArgument(f"upload ended after {size} bytes, expected {expected_size}")
        os.chmod(tmp, mode if mode else 0o644)
        if uid >= 0:
            os.chown(tmp, uid, gid)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path, size, digest.hexdigest()


def download(path: str, chunk_size: int = 0, max_bytes: int = 0) -> Iterator[StatInfo | bytes | str]:
    """Yield the StatInfo, the data chunks, then the hex SHA-256 of what was sent."""
    info = stat_path(path, follow_symlinks=True)
    if not info.exists:
        raise NotFound(f"{info.path!r} does not exist")
    if info.type != "file":
        raise InvalidArgument(f"{info.path!r} is not a regular file")
    if max_bytes and info.size > max_bytes:
        raise FailedPrecondition(f"{info.path!r} is {info.size} bytes, over max_bytes={max_bytes}")
    if chunk_size < 0 or chunk_size > MAX_CHUNK:
        raise InvalidArgument(f"chunk_size must be between 1 and {MAX_CHUNK}")
    size = chunk_size or DEFAULT_CHUNK
    try:
        fh = open(info.path, "rb")  # noqa: SIM115 (the generator closes it)
    except PermissionError as exc:
        raise PermissionDenied(str(exc)) from None
    digest = hashlib.sha256()
    yield info
    with fh:
        while data := fh.read(size):
            digest.update(data)
            yield data
    yield digest.hexdigest()
