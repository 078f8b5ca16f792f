"""Account probes: who may use the X server, and what each account ran on a terminal.

The raw material of the channel rules (evaluators/channel_rules.py): the X server's access list, the
desktop account's live processes with their controlling terminals, and the kernel's process accounting
(one record per process that ended, with its uid and controlling tty). These say which account did
what, from the kernel's side, never from program names an agent can choose.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from weavegym.evaluators.probes_files import FileProbe

PACCT = "/var/log/account/pacct"  # linux/acct.h struct acct_v3 records, 64 bytes each
MAX_SCAN_OUTPUT = 1 << 20
ACCOUNTING_PAUSED = "Process accounting paused"  # the kernel's message when the disk fills up

# Runs in the guest as root: prints the accounting records of one uid that had a controlling tty and began at
# or after a time, one Python list literal per line. Filtering there keeps the transfer bounded however many
# processes the episode ran; the parsing of what it prints stays on the host (parse_scan).
SCAN_PACCT = r"""
import struct, sys
uid, since = int(sys.argv[1]), float(sys.argv[2])
rec = struct.Struct("<BBHIIIIIIf8H16s")
with open(sys.argv[3], "rb") as fh:
    while True:
        block = fh.read(rec.size * 4096)
        if not block:
            break
        for off in range(0, len(block) - rec.size + 1, rec.size):
            f = rec.unpack_from(block, off)
            if f[1] & 0x0F == 3 and f[4] == uid and f[2] != 0 and f[8] >= since:
                comm = f[-1].split(bytes(1), 1)[0].decode("ascii", "replace")
                print(repr([f[6], f[2], f[8], comm]))
"""


@dataclass(frozen=True)
class TerminalProcess:
    """A process that had a controlling terminal (``tty`` is ps's name live, the device number once ended)."""

    pid: int
    tty: str
    comm: str
    started: float = 0.0


def parse_scan(text: str) -> list[TerminalProcess]:
    """The records SCAN_PACCT printed."""
    found = []
    for line in text.splitlines():
        pid, tty, started, comm = ast.literal_eval(line)
        found.append(TerminalProcess(int(pid), str(tty), str(comm), float(started)))
    return found


class AccountProbe(FileProbe):
    """The X access list, terminal processes and process accounting."""

    def x_access_list(self) -> tuple[bool, list[str]]:
        """(access control on, the entries) of the desktop's X server, from ``xhost`` run as root."""
        result = self._exec(["xhost"], what="xhost (X access list)", max_output_bytes=1 << 16, check=True)
        lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
        enabled = bool(lines) and "access control enabled" in lines[0]
        return enabled, lines[1:] if enabled else lines

    def account_uid(self, account: str) -> int:
        return int(self._exec(["id", "-u", "--", account], what=f"uid of {account}", check=True).stdout.strip())

    def terminal_processes(self, account: str) -> list[TerminalProcess]:
        """The account's live processes that have a controlling terminal."""
        result = self._exec(["ps", "-u", account, "-o", "pid=,tty=,comm="], what=f"ps of {account}",
                            max_output_bytes=1 << 20)
        rows = [line.split(None, 2) for line in result.stdout.splitlines()]
        return [TerminalProcess(int(pid), tty, comm) for pid, tty, comm in (r for r in rows if len(r) == 3)
                if tty != "?"]

    def ended_terminal_processes(self, account: str, since: float) -> tuple[list[TerminalProcess], bool]:
        """(processes of the account that had a terminal and began at or after ``since`` (guest wall time) and
        have ended, whether there were more than the transfer holds)."""
        uid = self.account_uid(account)
        scan = self.client.exec(["python3", "-c", SCAN_PACCT, str(uid), f"{since:.3f}", PACCT],
                                timeout=self.timeout, max_output_bytes=MAX_SCAN_OUTPUT)
        if scan.exit_code != 0 or scan.timed_out:
            raise RuntimeError(f"process accounting scan failed (exit {scan.exit_code}): {scan.stderr[-300:]}")
        if scan.truncated:
            return [], True
        return parse_scan(scan.stdout), False

    def accounting_paused(self) -> bool:
        """The kernel paused process accounting since boot (the disk filled up), so its records have gaps."""
        return ACCOUNTING_PAUSED in self._exec(["dmesg"], what="kernel log", max_output_bytes=4 << 20).stdout
