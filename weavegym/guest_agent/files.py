"""File transfer and inspection in the guest.

Uploads are written to a temporary file in the target directory and renamed
into place only once complete (and, when the client said how big it is, the
size matches), so an interrupted upload never leaves a half-written file where
a task or checker would read it.
"""

from __future__ import annotations

import errno
import grp
import hashlib
import os
import pwd
import stat as statmod
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

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
    nlink: int = 0
    ctime: float = 0.0


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
        nlink=st.st_nlink,
        ctime=st.st_ctime,
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
        if uid >= 0:  # on a descriptor of the folder itself, never through a path someone could swap
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.fchown(dir_fd, uid, gid)
            finally:
                os.close(dir_fd)
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
            # On the open file, not its name: the folder may be another account's, which could swap the
            # temporary name for a symlink to /etc/shadow while the data is written (root's chown follows it).
            os.fchmod(fh.fileno(), mode if mode else 0o644)
            if uid >= 0:
                os.fchown(fh.fileno(), uid, gid)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path, size, digest.hexdigest()


def download(path: str, chunk_size: int = 0, max_bytes: int = 0,
             follow_symlinks: bool = False) -> Iterator[StatInfo | bytes | str]:
    """Yield the StatInfo, the data chunks, then the hex SHA-256 of what was sent.

    The file is opened first and everything is checked on the open descriptor, so a path swapped
    between the checks and the read changes nothing: it must be a regular file (a FIFO or device would
    block or never end), reached without symlinks unless ``follow_symlinks`` (the kernel resolves the
    path; the descriptor's own path must be the one asked for), and ``max_bytes`` bounds what is read,
    not just the size stat reported (procfs files say 0 and a growing file outruns its stat).
    """
    path = _check_path(path)
    if chunk_size < 0 or chunk_size > MAX_CHUNK:
        raise InvalidArgument(f"chunk_size must be between 1 and {MAX_CHUNK}")
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise NotFound(f"{path!r} does not exist") from None
    except PermissionError as exc:
        raise PermissionDenied(str(exc)) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidArgument(f"{path!r} is a symlink; it is not followed") from None
        raise InvalidArgument(f"cannot open {path!r}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not statmod.S_ISREG(st.st_mode):
            raise InvalidArgument(f"{path!r} is not a regular file")
        real = os.readlink(f"/proc/self/fd/{fd}")
        if not follow_symlinks and real != path:
            raise InvalidArgument(f"{path!r} leads through a symlink (to {real!r}); it is not followed")
        if max_bytes and st.st_size > max_bytes:
            raise FailedPrecondition(f"{path!r} is {st.st_size} bytes, over max_bytes={max_bytes}")
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return _stream(fh, stat_path(real, follow_symlinks=False), chunk_size or DEFAULT_CHUNK, max_bytes)


def _stream(fh: BinaryIO, info: StatInfo, size: int, max_bytes: int) -> Iterator[StatInfo | bytes | str]:
    digest, sent = hashlib.sha256(), 0
    with fh:
        yield info
        while data := fh.read(size if not max_bytes else min(size, max_bytes + 1 - sent)):
            sent += len(data)
            if max_bytes and sent > max_bytes:
                raise FailedPrecondition(f"{info.path!r} grew past max_bytes={max_bytes} while it was read")
            digest.update(data)
            yield data
    yield digest.hexdigest()
