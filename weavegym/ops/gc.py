"""`weavegym gc`: find and remove what crashed weavegym processes left behind.

A VM's record, port locks and overlay belong to a dead process exactly when
nobody holds the record's flock any more (the kernel releases it at process
death), so gc never touches a live env, not even one of another user session.
A ``weavegym-*`` domain without a record here may belong to another cache
folder: it is removed only when its name's owner pid (``weavegym-<pid>-…``) is
provably dead on this host; domains of live or unknown owners are left alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from weavegym.core.extras import missing_extra
from weavegym.machine.backends import resources
from weavegym.machine.backends.prepared_states import stale_states

try:
    import libvirt
except ModuleNotFoundError as _missing:  # an optional extra (core/extras.py)
    raise missing_extra(_missing) from None

# Errors arrive as exceptions; without this libvirt also prints each one, e.g. "Domain not found" for a
# leftover that vanished between listing and destroying it.
libvirt.registerErrorHandler(lambda _ctx, _err: None, None)


@dataclass
class GcReport:
    domains_destroyed: list[str] = field(default_factory=list)
    run_dirs_removed: list[str] = field(default_factory=list)
    records_removed: list[str] = field(default_factory=list)
    locks_removed: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)
    others: list[str] = field(default_factory=list)  # weavegym domains gc cannot prove orphaned: left alone
    states_removed: list[str] = field(default_factory=list)  # prepared states of images that are gone
    errors: list[str] = field(default_factory=list)


def collect(cache_dir: Path, uris: list[str], dry_run: bool = False) -> GcReport:
    report = GcReport()
    run_root = cache_dir / "run"
    live_names: set[str] = set()
    dead_names: set[str] = set()
    for path, record in resources.read_records(run_root):
        if resources.is_locked(path):
            live_names.add(record.name)
            report.live.append(record.name)
            continue
        dead_names.add(record.name)
        if record.uri and record.uri not in uris:
            uris = [*uris, record.uri]
        if not dry_run:
            if record.run_dir:
                shutil.rmtree(record.run_dir, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        report.records_removed.append(record.name)
        if record.run_dir:
            report.run_dirs_removed.append(record.run_dir)

    for uri in uris:
        try:
            conn = libvirt.open(uri)
        except libvirt.libvirtError as exc:
            report.errors.append(f"{uri}: {exc}")
            continue
        try:
            for domain in conn.listAllDomains():
                name = domain.name()
                if not name.startswith(resources.NAME_PREFIX) or name in live_names:
                    continue
                if name not in dead_names and not _owner_provably_dead(name, uri):
                    report.others.append(name)
                    continue
                if not dry_run:
                    with contextlib.suppress(libvirt.libvirtError):
                        if domain.isActive():
                            domain.destroy()
                    with contextlib.suppress(libvirt.libvirtError):
                        domain.undefine()
                report.domains_destroyed.append(name)
        finally:
            conn.close()

    # Run dirs without any record (a crash between mkdir and writing the record).
    if run_root.is_dir():
        for child in run_root.iterdir():
            if child.is_dir() and child.name.startswith(resources.NAME_PREFIX) and child.name not in live_names:
                if not dry_run:
                    shutil.rmtree(child, ignore_errors=True)
                if str(child) not in report.run_dirs_removed:
                    report.run_dirs_removed.append(str(child))
    for stale in stale_states(cache_dir / "states", cache_dir / "images"):
        if not dry_run:  # a VM still restored from one keeps its open RAM mapping and disk
            shutil.rmtree(stale, ignore_errors=True)
        report.states_removed.append(str(stale))
    lock_dir = cache_dir / "locks"
    if lock_dir.is_dir():
        for lock in lock_dir.glob("*.lock"):
            if not resources.is_locked(lock):
                if not dry_run:
                    with contextlib.suppress(FileNotFoundError):
                        lock.unlink()
                report.locks_removed.append(lock.name)
    return report


def _owner_provably_dead(name: str, uri: str) -> bool:
    """True when the domain's name says its owner was a process on this host and no such process runs."""
    if "://" in uri and not uri.split("://", 1)[1].startswith("/"):
        return False  # a remote libvirt: its owner's pid means nothing here
    pid_text = name.removeprefix(resources.NAME_PREFIX).split("-", 1)[0]
    if not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False
