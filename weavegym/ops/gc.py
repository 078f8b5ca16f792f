"""`weavegym gc`: find and remove what crashed weavegym processes left behind.

A VM's record, port locks and overlay belong to a dead process exactly when
nobody holds the record's flock any more (the kernel releases it at process
death), so gc never touches a live env, not even one of another user session.
Domains named ``weavegym-*`` that have no live record are leftovers too.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import libvirt

from weavegym.machine.backends import resources

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
    errors: list[str] = field(default_factory=list)


def collect(cache_dir: Path, uris: list[str], dry_run: bool = False) -> GcReport:
    report = GcReport()
    run_root = cache_dir / "run"
    live_names: set[str] = set()
    for path, record in resources.read_records(run_root):
        if resources.is_locked(path):
            live_names.add(record.name)
            report.live.append(record.name)
            continue
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
    lock_dir = cache_dir / "locks"
    if lock_dir.is_dir():
        for lock in lock_dir.glob("*.lock"):
            if not resources.is_locked(lock):
                if not dry_run:
                    with contextlib.suppress(FileNotFoundError):
                        lock.unlink()
                report.locks_removed.append(lock.name)
    return report
