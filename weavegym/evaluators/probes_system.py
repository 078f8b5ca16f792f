"""System probes: listening sockets, processes, systemd units, HTTP answers, windows.

The raw material (``/proc/net/tcp*``, ``ps`` output, an HTTP response) comes
from the guest; the interpretation happens here. ``/proc/net`` is read instead
of running ``ss`` so the probe does not depend on iproute2 being installed.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import re
from dataclasses import dataclass

from weavegym.core.errors import AgentInternalError
from weavegym.evaluators.probes_files import FileProbe
from weavegym.machine.guest_client import WindowInfo

TCP_LISTEN = "0A"
HTTP_MAX_BODY = 8 << 20
PROCESS_OUTPUT_BYTES = 32 << 20
_NO_SYSTEMD = ("Failed to connect to bus", "not been booted with systemd")

# Runs in the guest with the URL and timeout as arguments; prints one JSON line. Only transport
# facts travel back (status, body); deciding what the body must contain stays on the host.
_HTTP_SCRIPT = r"""
import base64, http.client, json, sys, urllib.error, urllib.request
url, timeout, limit = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    try:
        resp = opener.open(url, timeout=timeout)
    except urllib.error.HTTPError as err:
        resp = err
    body = resp.read(limit)
    charset = resp.headers.get_content_charset() or "utf-8"
    out = {"status": resp.status if hasattr(resp, "status") else resp.code, "charset": charset,
           "body": base64.b64encode(body).decode()}
except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as err:
    out = {"error": f"{type(err).__name__}: {err}"}
print(json.dumps(out))
"""


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    user: str
    command_line: str


@dataclass(frozen=True)
class ListeningSocket:
    address: str  # "0.0.0.0", "127.0.0.1", "::", …
    port: int


def _proc_net_address(hex_address: str) -> str:
    """/proc/net/tcp writes addresses as host-order 32-bit words in hex; undo that per word."""
    raw = bytes.fromhex(hex_address)
    swapped = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(swapped))


def parse_proc_net_tcp(text: str) -> list[ListeningSocket]:
    """Sockets in LISTEN state from the concatenated /proc/net/tcp and /proc/net/tcp6 tables."""
    found: list[ListeningSocket] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[3] != TCP_LISTEN or ":" not in fields[1]:
            continue  # headers and non-listening sockets
        address, _, port = fields[1].partition(":")
        found.append(ListeningSocket(_proc_net_address(address), int(port, 16)))
    return found


class SystemProbe(FileProbe):
    """Sockets, processes, services, HTTP and windows."""

    def listening_sockets(self) -> list[ListeningSocket]:
        result = self._exec("cat /proc/net/tcp && { cat /proc/net/tcp6 2>/dev/null || true; }",
                            what="read /proc/net/tcp", check=True, max_output_bytes=PROCESS_OUTPUT_BYTES)
        return parse_proc_net_tcp(result.stdout)

    def listening_ports(self) -> set[int]:
        """TCP ports in LISTEN on any address (IPv4 or IPv6)."""
        return {s.port for s in self.listening_sockets()}

    def port_open(self, port: int) -> bool:
        return port in self.listening_ports()

    def processes(self) -> list[ProcessInfo]:
        """Every process except the probe's own ``ps``; kernel threads show as ``[name]``."""
        result = self._exec(["ps", "-ww", "-eo", "pid=,user:64=,args="], what="ps", check=True,
                            max_output_bytes=PROCESS_OUTPUT_BYTES)
        found = []
        for line in result.stdout.splitlines():
            parts = line.split(None, 2)
            if len(parts) < 2 or not parts[0].isdigit() or int(parts[0]) == result.pid:
                continue
            found.append(ProcessInfo(int(parts[0]), parts[1], parts[2] if len(parts) > 2 else ""))
        return found

    def process_running(self, pattern: str) -> bool:
        """True when a command line matches the regex (``re.search``)."""
        regex = re.compile(pattern)
        return any(regex.search(p.command_line) for p in self.processes())

    def service_active(self, unit: str) -> bool:
        """``systemctl is-active``; raises when systemd itself is unreachable (a broken guest, not an answer)."""
        result = self._exec(["systemctl", "is-active", "--quiet", "--", unit], what=f"systemctl is-active {unit}")
        if result.exit_code == 0:
            return True
        if any(marker in result.stderr for marker in _NO_SYSTEMD):
            raise AgentInternalError(f"systemd is not reachable in the guest: {result.stderr.strip()[:300]}",
                                     method="Exec")
        return False

    def http_get(self, url: str, timeout: float = 5.0) -> tuple[int, str] | None:
        """(status, body) of a GET made inside the guest, HTTP errors included (e.g. 404).

        None when no HTTP answer came back at all: connection refused, unreachable, timeout, bad URL.
        """
        result = self._exec(["python3", "-c", _HTTP_SCRIPT, url, str(timeout), str(HTTP_MAX_BODY)],
                            what=f"http_get {url}", timeout=max(self.timeout, timeout + 10), check=True,
                            max_output_bytes=HTTP_MAX_BODY * 2)
        answer = json.loads(result.stdout)
        if "error" in answer:
            return None
        body = base64.b64decode(answer["body"])
        try:
            text = body.decode(answer["charset"], errors="replace")
        except LookupError:
            text = body.decode("utf-8", errors="replace")
        return int(answer["status"]), text

    def windows(self) -> list[WindowInfo]:
        return self.client.list_windows(timeout=self.timeout)[0]

    def window_titles(self) -> list[str]:
        return [w.title for w in self.windows()]

    def window(self, title_regex: str) -> WindowInfo | None:
        """The first mapped top-level window whose title matches (``re.search``)."""
        regex = re.compile(title_regex)
        return next((w for w in self.windows() if regex.search(w.title)), None)
