"""The process-accounting scan of NoDesktopTerminalWork, on accounting records built here (no VM).

The VM test (tests/test_channels.py) runs it against the kernel's real records; this one pins the record
layout and the filter: only the desktop account's processes, with a controlling tty, begun in the episode.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

from weavegym.evaluators.probes_accounts import SCAN_PACCT, parse_scan

RECORD = struct.Struct("<BBHIIIIIIf8H16s")  # linux/acct.h: struct acct_v3
NOW = 1_800_000_000


def _record(uid: int, tty: int, pid: int, started: int, comm: bytes, version: int = 3) -> bytes:
    return RECORD.pack(0, version, tty, 0, uid, 1000, pid, 1, started, 0.0, *([0] * 8), comm + b"\0")


def test_scan_keeps_only_the_desktop_accounts_terminal_programs_of_the_episode(tmp_path: Path) -> None:
    assert RECORD.size == 64
    pacct = tmp_path / "pacct"
    pacct.write_bytes(b"".join((
        _record(1000, 34816, 42, NOW, b"cp"),           # typed into a terminal during the episode
        _record(1000, 0, 43, NOW, b"soffice.bin"),      # a GUI app: no controlling tty
        _record(1001, 34817, 44, NOW, b"bash"),         # the workspace account (the shell channel)
        _record(1000, 34816, 45, NOW - 100, b"ls"),     # before the episode (setup, snapshot)
        _record(1000, 34816, 46, NOW + 5, b"x" * 16),   # a 16-byte name leaves no NUL
        _record(1000, 34816, 47, NOW, b"v2", version=2),  # not a v3 record
    )))
    out = subprocess.run([sys.executable, "-c", SCAN_PACCT, "1000", str(NOW - 2), str(pacct)],
                         capture_output=True, text=True, check=True)
    found = parse_scan(out.stdout)
    assert [(p.pid, p.comm) for p in found] == [(42, "cp"), (46, "x" * 16)]
    assert found[0].tty == "34816" and found[0].started == NOW


def test_scan_of_an_empty_log_finds_nothing(tmp_path: Path) -> None:
    pacct = tmp_path / "pacct"
    pacct.write_bytes(b"")
    out = subprocess.run([sys.executable, "-c", SCAN_PACCT, "1000", "0", str(pacct)],
                         capture_output=True, text=True, check=True)
    assert parse_scan(out.stdout) == []
