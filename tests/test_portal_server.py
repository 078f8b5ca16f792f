"""The Web tasks' portal server on the host: it serves only regular files that really lie in its site dir.

The site dir belongs to the episode's shell, which may plant symlinks and FIFOs or swap a folder for a
symlink while a request is being served. (The same server in a VM, under its own account, is in
test_hostile.py.)
"""

from __future__ import annotations

import getpass
import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

SERVER = resources.files("weavegym.envs.tasks.web") / "fixtures" / "portal_server.py"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen, deadline_s: float = 20.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"the portal server exited: {proc.stderr.read() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)  # polling a condition (the port) with a deadline
    raise AssertionError(f"the portal server did not listen on {port} within {deadline_s} s")


@pytest.fixture()
def portal(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    site, outside = tmp_path / "site", tmp_path / "outside"
    (site / "real").mkdir(parents=True)
    outside.mkdir()
    (site / "index.html").write_text("<title>portal</title>\n")
    (site / "real" / "secret.txt").write_text("decoy\n")
    (outside / "secret.txt").write_text("SECRET outside the site\n")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-I", str(SERVER), "--port", str(port), "--log", str(tmp_path / "log"),
                             "--site", str(site)], stderr=subprocess.PIPE, text=True)
    try:
        _wait_listening(port, proc)
        yield f"http://127.0.0.1:{port}", site
    finally:
        proc.kill()
        proc.wait()


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=3) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as err:
        return err.code, b""
    except (OSError, http.client.HTTPException):  # the server dropped or hung the request: no status at all
        return 0, b""


def test_pages_in_the_site_are_served(portal: tuple[str, Path]) -> None:
    base, _site = portal
    assert _get(f"{base}/") == (200, b"<title>portal</title>\n")
    assert _get(f"{base}/real/secret.txt") == (200, b"decoy\n")


def test_symlinks_fifos_and_dot_dots_out_of_the_site_are_not_found(portal: tuple[str, Path]) -> None:
    base, site = portal
    (site / "final").symlink_to(site.parent / "outside" / "secret.txt")
    (site / "folder").symlink_to(site.parent / "outside")
    (site / "inside").symlink_to(site / "index.html")  # even one that stays inside: a final link is refused
    os.mkfifo(site / "pipe")
    for path in ("/final", "/folder/secret.txt", "/inside", "/pipe", "/../outside/secret.txt",
                 "/%2e%2e/outside/secret.txt", "/real/../../outside/secret.txt"):
        assert _get(base + path)[0] == 404, path


# Flips ~/site/real between the real folder and a symlink to the outside folder, as fast as it can.
SWAPPER = """
import os, sys
site, outside = sys.argv[1], sys.argv[2]
while True:
    os.rename(site + "/real", site + "/stash")
    os.symlink(outside, site + "/real")
    os.unlink(site + "/real")
    os.rename(site + "/stash", site + "/real")
"""


def test_a_folder_swapped_for_a_symlink_mid_request_never_serves_what_is_outside(portal: tuple[str, Path]) -> None:
    """A server that resolves the path, checks it, then opens it again reads outside in that window."""
    base, site = portal
    # In its own process, so that it swaps while the server is between its check and its read.
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(site), str(site.parent / "outside")])
    try:
        replies = [_get(f"{base}/real/secret.txt") for _ in range(2000)]
    finally:
        swapper.kill()
        swapper.wait()
    statuses = {status for status, _ in replies}
    assert statuses == {200, 404}, statuses  # both sides of the swap were hit
    assert not [body for _, body in replies if b"SECRET" in body]


def _server(tmp_path: Path, *args: str) -> tuple[str, subprocess.Popen[str]]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-I", str(SERVER), "--port", str(port), "--log", str(tmp_path / "log"),
                             *args], stderr=subprocess.PIPE, text=True)
    _wait_listening(port, proc)
    return f"http://127.0.0.1:{port}", proc


@pytest.mark.parametrize(("desktop", "status"), [(getpass.getuser(), 200), ("nobody-here", 403), ("", 403)])
def test_desktop_only_pages_are_served_to_the_desktop_accounts_sockets_alone(tmp_path: Path, desktop: str,
                                                                             status: int) -> None:
    """Weave-Web-4's receipts: a client of another account (the shell's curl) gets 403; other paths stay open."""
    site = tmp_path / "site"
    (site / "receipts").mkdir(parents=True)
    (site / "receipts" / "r.png").write_bytes(b"PNG")
    (site / "index.html").write_text("open\n")
    base, proc = _server(tmp_path, "--site", str(site), "--desktop-only", "/receipts/",
                         *(["--desktop", desktop] if desktop else []))
    try:
        assert _get(f"{base}/receipts/r.png") == (status, b"PNG" if status == 200 else b"")
        assert _get(f"{base}/%72eceipts/r.png")[0] == status  # decoded before the prefix is compared
        assert _get(f"{base}/index.html") == (200, b"open\n")
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("issue", [True, False])
def test_issue_codes_answers_and_records_a_fresh_code_per_accepted_submission(tmp_path: Path, issue: bool) -> None:
    records = tmp_path / "records.jsonl"
    base, proc = _server(tmp_path, "--records", str(records), "--form", "f", *(["--issue-codes"] if issue else []))
    try:
        replies = []
        for origin in (base, base, "http://evil.example"):
            request = urllib.request.Request(f"{base}/api/f", data=b'{"a": 1}', method="POST",
                                             headers={"Content-Type": "application/json", "Origin": origin})
            try:
                with urllib.request.urlopen(request, timeout=3) as reply:
                    replies.append(json.loads(reply.read()))
            except urllib.error.HTTPError as err:
                replies.append(json.loads(err.read()))
    finally:
        proc.kill()
        proc.wait()
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    if issue:
        codes = [r["code"] for r in replies[:2]]
        assert codes[0] != codes[1] and all(len(c) == 6 for c in codes)
        assert [r.get("code") for r in lines] == [*codes, None]  # a refused one gets none
    else:
        assert all("code" not in r for r in replies + lines)
    assert replies[2]["ok"] is False
