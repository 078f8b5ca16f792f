"""The guest agent through its real gRPC interface, on a real Xvfb display with real X clients.

These cover issue #2's acceptance list end to end: Unicode typing into a GTK
entry, pixel-exact screenshots, click coordinates, 50 MB transfers, capped
output, deadline kills, tokens, concurrency, and bad requests that must leave
the agent serving.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import select
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import numpy as np
import pytest
from Xlib import X
from Xlib import display as xdisplay

from weavegym.agent.v1 import agent_pb2 as pb
from weavegym.agent.v1 import agent_pb2_grpc as pb_grpc
from weavegym.core.deadline import wait_for
from weavegym.core.errors import (
    AgentAuthError,
    AgentError,
    AgentRequestError,
    AgentUnavailableError,
    GuestPathNotFoundError,
)
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.local_agent import LocalAgent, LocalAgentConfig
from weavegym.testing.xvfb import XvfbDisplay

COLOUR = (0x33, 0x99, 0xCC)


class XWindow:
    """A real X client window (own connection), solid colour, recording pointer events."""

    def __init__(self, display: str, x: int, y: int, w: int, h: int, colour=COLOUR, title: str = "") -> None:
        self.d = xdisplay.Display(display)
        screen = self.d.screen()
        pixel = (colour[0] << 16) | (colour[1] << 8) | colour[2]
        self.win = screen.root.create_window(
            x, y, w, h, 0, screen.root_depth, background_pixel=pixel, override_redirect=not title,
            event_mask=X.ButtonPressMask | X.ButtonReleaseMask | X.StructureNotifyMask | X.ExposureMask,
        )
        if title:
            self.win.set_wm_name(title)
            self.win.set_wm_class("weavegym-test", "WeavegymTest")
        self.win.map()
        self.d.flush()
        self.wait_for_event(X.Expose)

    def events(self, timeout: float = 5.0, stop_after: int = 1, kinds: tuple[int, ...] = ()) -> list:
        got: list = []
        end = time.monotonic() + timeout
        while len(got) < stop_after and time.monotonic() < end:
            if not self.d.pending_events():
                select.select([self.d.fileno()], [], [], max(0.0, end - time.monotonic()))
                if not self.d.pending_events():
                    continue
            ev = self.d.next_event()
            if not kinds or ev.type in kinds:
                got.append(ev)
        return got

    def wait_for_event(self, kind: int) -> None:
        assert self.events(kinds=(kind,)), f"no X event {kind} within the deadline"

    def close(self) -> None:
        self.win.destroy()
        self.d.close()


@pytest.fixture()
def colour_window(xvfb):
    win = XWindow(xvfb.display, 200, 100, 300, 150)
    yield win
    win.close()


# ------------------------------------------------------------------------------------------ info/screen


def test_info_reports_display_and_capture(client: GuestClient) -> None:
    info = client.info()
    assert info.protocol == "weavegym.agent.v1"
    assert (info.screen_width, info.screen_height, info.screen_depth) == (1280, 720, 24)
    assert info.capture_method == "mit-shm"
    assert info.has_xtest and info.has_xfixes


def test_known_colour_window_shows_at_exact_pixels(client: GuestClient, colour_window: XWindow) -> None:
    client.move(1000, 600)  # keep the pointer out of the window
    shot = client.screenshot(hide_cursor=True)
    img = shot.image
    assert img.shape == (720, 1280, 3) and img.dtype == np.uint8
    assert (img[100:250, 200:500] == COLOUR).all()
    assert tuple(img[99, 200]) != COLOUR and tuple(img[100, 199]) != COLOUR
    assert tuple(img[250, 200]) != COLOUR and tuple(img[100, 500]) != COLOUR
    region = client.screenshot(region=(190, 90, 20, 20), hide_cursor=True).image
    assert region.shape == (20, 20, 3)
    assert (region[10:, 10:] == COLOUR).all() and tuple(region[0, 0]) != COLOUR
    for encoding in ("zlib", "png", "jpeg"):
        other = client.screenshot(encoding=encoding, hide_cursor=True, quality=95).image
        if encoding == "jpeg":
            assert np.abs(other[110:240, 210:490].astype(int) - COLOUR).max() <= 8
        else:
            assert np.array_equal(other, img), encoding


def test_cursor_is_drawn_unless_hidden(client: GuestClient, colour_window: XWindow) -> None:
    client.move(350, 175)
    with_cursor = client.screenshot()
    assert with_cursor.cursor == (350, 175)
    assert not (with_cursor.image[165:185, 340:360] == COLOUR).all(), "no cursor drawn near the pointer"
    hidden = client.screenshot(hide_cursor=True).image
    assert (hidden[100:250, 200:500] == COLOUR).all()


# ----------------------------------------------------------------------------------------------- input


def test_clicks_land_at_the_requested_coordinates(client: GuestClient, xvfb) -> None:
    win = XWindow(xvfb.display, 0, 0, 1280, 720)
    try:
        for (x, y), button, number in [((123, 456), "left", 1), ((1000, 50), "right", 3), ((1279, 719), "middle", 2)]:
            client.click(x, y, button=button)
            press, release = win.events(stop_after=2, kinds=(X.ButtonPress, X.ButtonRelease))
            assert (press.root_x, press.root_y, press.detail) == (x, y, number)
            assert release.type == X.ButtonRelease and release.detail == number
        client.click(640, 360, count=2)
        presses = win.events(stop_after=2, kinds=(X.ButtonPress,))
        assert [(e.root_x, e.root_y) for e in presses] == [(640, 360), (640, 360)]
    finally:
        win.close()


def _zenity_entry(display: str, title: str) -> subprocess.Popen:
    return subprocess.Popen(
        ["zenity", "--entry", "--title", title, "--text", "type here"],
        env={**os.environ, "DISPLAY": display, "NO_AT_BRIDGE": "1", "GDK_BACKEND": "x11"},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )


def test_unicode_typing_reaches_a_gtk_entry_exactly(client: GuestClient, xvfb) -> None:
    text = "héllo wörld 你好 😀"
    proc = _zenity_entry(xvfb.display, "weavegym-unicode-entry")
    try:
        window = wait_for(
            lambda: next((w for w in client.list_windows()[0] if w.title == "weavegym-unicode-entry"), None),
            20, what="the zenity window")
        wait_for(lambda: client.activate_window(window.id).focused, 10, what="focus on zenity")
        client.type_text(text)
        client.key("Return")
        out, _ = proc.communicate(timeout=20)
    finally:
        proc.kill()
        proc.wait()
    assert out.decode("utf-8").rstrip("\n") == text


# ------------------------------------------------------------------------------------------------ exec


def test_exec_reports_exit_code_and_separate_streams(client: GuestClient) -> None:
    result = client.exec("echo out; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.timed_out and not result.truncated
    unicode = client.exec('printf "%s" "$GREETING"', env={"GREETING": "你好 😀 ünï"})
    assert unicode.stdout == "你好 😀 ünï"
    assert client.exec(["printf", "%s|", "a b", "c"]).stdout == "a b|c|"
    assert client.exec("pwd", cwd="/tmp").stdout == "/tmp\n"
    assert client.exec("cat", stdin="piped ✓").stdout == "piped ✓"
    assert client.exec("echo $DISPLAY").stdout.strip().startswith(":")


def test_command_printing_100mb_is_capped_and_flagged(client: GuestClient) -> None:
    result = client.exec("head -c 100000000 /dev/zero; echo done >&2", max_output_bytes=1 << 20, timeout=120)
    assert result.exit_code == 0
    assert len(result.stdout_raw) == 1 << 20 and result.stdout_truncated
    assert result.stdout_total == 100_000_000
    assert result.stderr == "done\n" and not result.stderr_truncated


def test_hung_command_is_killed_at_deadline_with_its_process_group(client: GuestClient) -> None:
    result = client.exec("sleep 1000 & sleep 1000", timeout=2)
    assert result.timed_out and result.exit_code == -9
    assert 2.0 <= result.duration_s < 10
    pgid = result.pid
    # Zombies are dead already (waiting for init to reap them); anything else in the group is a leak.
    left = client.exec(f"ps -eo pid=,pgid=,stat= | awk '$2 == {pgid} && $3 !~ /^Z/'")
    assert left.stdout == "", f"processes of group {pgid} survived: {left.stdout}"
    assert client.exec("echo alive").stdout == "alive\n"


def test_output_streams_before_the_command_ends(client: GuestClient, tmp_path: Path) -> None:
    """The command blocks until the test has seen its first line: only a streaming agent can finish it."""
    flag = tmp_path / "flag"
    request = pb.ExecRequest(
        shell=f"echo first; while [ ! -e {flag} ]; do sleep 0.02; done; echo second",
        options=pb.ExecOptions(timeout_s=20),
    )
    kinds, output = [], b""
    for event in client.exec_stream(request):
        kinds.append(event.WhichOneof("event"))
        if kinds[-1] == "output":
            output += event.output.data
            if output == b"first\n":
                flag.touch()
        elif kinds[-1] == "exit":
            assert not event.exit.timed_out and event.exit.exit_code == 0
    assert output == b"first\nsecond\n"
    assert kinds[0] == "started" and kinds[-1] == "exit"


def test_background_children_survive_and_are_not_killed_by_sigpipe(client: GuestClient, tmp_path: Path) -> None:
    flag = tmp_path / "late"
    result = client.exec(f"(sleep 1; echo late-stderr >&2; echo late-stdout; touch {flag}) & echo started")
    assert result.stdout == "started\n" and result.exit_code == 0
    wait_for(flag.exists, 15, what="the background child to finish")


def test_run_python_in_a_fresh_interpreter(client: GuestClient) -> None:
    result = client.python("import sys, os\nprint(sys.version_info[0], os.environ['X'])", env={"X": "42"})
    assert (result.exit_code, result.stdout) == (0, "3 42\n")
    failing = client.python("raise SystemExit('bad ✗')")
    assert failing.exit_code == 1 and "bad ✗" in failing.stderr
    big = "x = 1\n" * 50_000 + "print(x)\n"  # 300 KB: over the argv limit, so it must go through a file
    assert client.python(big).stdout == "1\n"
    looping = client.python("while True: pass", timeout=1.5)
    assert looping.timed_out


@pytest.mark.skipif(os.getuid() != 0, reason="switching users needs the agent to run as root")
def test_exec_as_another_user(client: GuestClient) -> None:
    result = client.exec("id -un; echo $HOME", user="nobody", cwd="/")
    assert result.stdout.splitlines()[0] == "nobody"
    # Every start must succeed: forking the threaded agent to switch users killed about one child in
    # three with SIGSEGV under grpcio 1.85, so 30 in a row fail with near certainty if that comes back.
    codes = [client.exec(["id", "-u", "-n"], user="nobody", cwd="/").exit_code for _ in range(30)]
    assert codes == [0] * 30, codes
    with pytest.raises(GuestPathNotFoundError, match="command not found"):  # as for root: before the switch
        client.exec(["no-such-command-here"], user="nobody", cwd="/")


# ----------------------------------------------------------------------------------------------- files


def test_50mb_upload_download_round_trip(client: GuestClient, tmp_path: Path) -> None:
    payload = os.urandom(50 * 1024 * 1024)
    digest = hashlib.sha256(payload).hexdigest()
    remote = str(tmp_path / "sub" / "big.bin")
    resp = client.upload(payload, remote, mode=0o600, make_parents=True)
    assert (resp.size, resp.sha256) == (len(payload), digest)
    assert client.exec(["sha256sum", remote]).stdout.split()[0] == digest
    st = client.stat(remote)
    assert (st.exists, st.type, st.size, st.mode) == (True, "file", len(payload), 0o600)
    back = client.download(remote)
    assert hashlib.sha256(back).hexdigest() == digest
    entries, truncated = client.list_dir(str(tmp_path / "sub"))
    assert [e.path for e in entries] == [remote] and not truncated


def test_download_refuses_symlinks_special_files_and_overflow(client: GuestClient, tmp_path: Path) -> None:
    """The checker reads, as root, paths the episode controls: none of these may become a root read of
    something else, a hang, or an unbounded stream."""
    secret = tmp_path / "root-only"
    secret.write_bytes(b"token bytes")
    secret.chmod(0o600)
    (tmp_path / "deliverable").symlink_to(secret)
    with pytest.raises(AgentRequestError, match="symlink"):
        client.download(str(tmp_path / "deliverable"))
    assert client.download(str(tmp_path / "deliverable"), follow_symlinks=True) == b"token bytes"
    (tmp_path / "linked-dir").symlink_to(tmp_path)  # a symlink in the middle of the path
    with pytest.raises(AgentRequestError, match="symlink"):
        client.download(str(tmp_path / "linked-dir" / "root-only"))
    os.mkfifo(tmp_path / "fifo")  # opening it for reading would block forever without a writer
    start = time.monotonic()
    with pytest.raises(AgentRequestError, match="not a regular file"):
        client.download(str(tmp_path / "fifo"), timeout=10)
    assert time.monotonic() - start < 5
    # procfs reports size 0 and then streams: the cap holds while reading, not just against stat.
    assert len(Path("/proc/self/smaps").read_bytes()) > 4096
    with pytest.raises(AgentRequestError, match="grew past max_bytes"):
        client.download("/proc/self/smaps", max_bytes=4096, follow_symlinks=True)  # /proc/self is a link
    assert client.download(str(secret), max_bytes=11) == b"token bytes"
    with pytest.raises(AgentRequestError, match="over max_bytes"):
        client.download(str(secret), max_bytes=10)


def test_file_errors_are_clear_and_leave_nothing_behind(client: GuestClient, agent: LocalAgent, tmp_path) -> None:
    with pytest.raises(GuestPathNotFoundError):
        client.download(str(tmp_path / "missing"))
    with pytest.raises(GuestPathNotFoundError):
        client.upload(b"x", str(tmp_path / "no" / "dir" / "f"))
    with pytest.raises(AgentRequestError, match="absolute"):
        client.stat("relative/path")
    assert client.stat(str(tmp_path / "missing")).exists is False
    # An upload that ends short of its announced size must not leave a file (or a temp file) behind.
    stub = pb_grpc.GuestAgentStub(grpc.insecure_channel(agent.target))
    target = tmp_path / "short.bin"
    chunks = iter([pb.UploadChunk(header=pb.UploadHeader(path=str(target), expected_size=100)),
                   pb.UploadChunk(data=b"y" * 50)])
    with pytest.raises(grpc.RpcError) as info:
        stub.Upload(chunks, metadata=(("authorization", f"Bearer {agent.token}"),), timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert list(tmp_path.iterdir()) == []


def test_an_upload_into_a_folder_its_owner_races_never_chowns_what_a_swapped_name_points_to(
        client: GuestClient, tmp_path: Path) -> None:
    """The folder's owner swaps the upload's temporary file for a symlink to a root file while data flows."""
    folder, victim = tmp_path / "theirs", tmp_path / "root-only.conf"
    folder.mkdir()
    victim.write_text("root's\n")
    victim.chmod(0o600)
    stop = threading.Event()
    swapped = []

    def swap() -> None:
        while not stop.is_set():
            for name in os.listdir(folder):
                if name.startswith(".weavegym-upload-") and not (folder / name).is_symlink():
                    with contextlib.suppress(OSError):
                        (folder / name).unlink()
                        (folder / name).symlink_to(victim)
                        swapped.append(name)

    racer = threading.Thread(target=swap, daemon=True)
    racer.start()
    try:
        for i in range(5):
            with contextlib.suppress(AgentError):  # the swap may make the upload itself fail: that is fine
                client.upload(os.urandom(16 << 20), str(folder / f"big-{i}.bin"), owner="nobody", mode=0o666)
    finally:
        stop.set()
        racer.join()
    assert swapped, "the race never hit: the test proved nothing"
    st = victim.stat()
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o600), (st.st_uid, oct(st.st_mode))
    assert victim.read_text() == "root's\n"


# ----------------------------------------------------------------------------------- auth, concurrency


def test_wrong_or_missing_token_is_refused(agent: LocalAgent, tmp_path: Path) -> None:
    marker = tmp_path / "must-not-exist"
    with GuestClient(agent.target, "wrong-token-0123456789") as bad:
        with pytest.raises(AgentAuthError):
            bad.health()
        with pytest.raises(AgentAuthError):
            bad.exec(f"touch {marker}")
        with pytest.raises(AgentAuthError):
            bad.upload(b"x", str(marker))
        with pytest.raises(AgentAuthError):
            bad.screenshot()
    channel = grpc.insecure_channel(agent.target)
    with pytest.raises(grpc.RpcError) as info:
        pb_grpc.GuestAgentStub(channel).Health(pb.HealthRequest(), timeout=5)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    channel.close()
    assert not marker.exists()


def test_with_tls_the_agent_proves_itself_before_the_token_is_sent(xvfb: XvfbDisplay) -> None:
    """The host pins the VM's certificate: an impostor on the agent's port never sees the token."""
    with LocalAgent(LocalAgentConfig(display=xvfb.display, tls=True)) as agent:
        with agent.client() as good:
            assert good.exec("echo over-tls", timeout=20).stdout.strip() == "over-tls"
        with GuestClient(agent.target, agent.token) as plain, pytest.raises(AgentUnavailableError):
            plain.exec("true", timeout=5)  # the agent speaks TLS only
        assert agent.identity is not None
        # An impostor listening where the agent was (as a process could after QEMU died): it records all it gets.
        with socket.socket() as impostor:
            impostor.bind(("127.0.0.1", 0))
            impostor.listen()
            received = bytearray()

            def record() -> None:
                impostor.settimeout(10)
                with contextlib.suppress(OSError):
                    while True:
                        conn, _ = impostor.accept()
                        with conn:
                            conn.settimeout(2)
                            with contextlib.suppress(OSError):
                                while chunk := conn.recv(65536):
                                    received.extend(chunk)
                                    conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n")  # anything but a TLS reply

            recorder = threading.Thread(target=record, daemon=True)
            recorder.start()
            target = f"127.0.0.1:{impostor.getsockname()[1]}"
            with (GuestClient(target, agent.token, tls_cert=agent.identity.cert_pem) as fooled,
                  pytest.raises(AgentUnavailableError)):
                fooled.exec("echo secret-command", timeout=5)
            impostor.close()
            recorder.join(15)
        assert received, "the client never reached the impostor"
        assert agent.token.encode() not in received and b"secret-command" not in received
    # And a TLS impostor with a key of its own fails the handshake: the pinned certificate is not its.
    with (LocalAgent(LocalAgentConfig(display=xvfb.display, tls=True)) as other,
          GuestClient(other.target, "x" * 48, tls_cert=agent.identity.cert_pem) as pinned,
          pytest.raises(AgentUnavailableError)):
        pinned.exec("true", timeout=5)


def test_an_agent_whose_sources_change_serves_the_new_token_and_identity_only(xvfb: XvfbDisplay) -> None:
    """What a clone restored from a shared prepared state relies on: its agent wakes with the preparing VM's
    token and key in RAM, and its own QEMU's fw_cfg holds new ones, which the agent must switch to."""
    with LocalAgent(LocalAgentConfig(display=xvfb.display, tls=True)) as agent:
        with agent.client() as before:
            assert before.health().boot_id
        old_token, old_identity = agent.rekey()
        assert old_identity is not None and agent.identity is not None
        with agent.client() as after:  # the new token, pinned to the new certificate
            assert after.exec("echo rekeyed", timeout=20).stdout.strip() == "rekeyed"
        with (GuestClient(agent.target, old_token, tls_cert=agent.identity.cert_pem) as stale_token,
              pytest.raises(AgentAuthError)):
            stale_token.health(timeout=10)
        with (GuestClient(agent.target, agent.token, tls_cert=old_identity.cert_pem) as stale_key,
              pytest.raises(AgentUnavailableError)):
            stale_key.health(timeout=10)  # the old key is no longer served


def test_stalled_unauthenticated_streams_are_refused_before_their_bodies(agent: LocalAgent) -> None:
    """40 calls with a wrong token whose request bodies never come must not hold the agent's workers.

    A guest user can connect to the agent's port; if a refused call first waited for its request, 40 of
    them would take every worker and the host's own calls would starve.
    """
    release = threading.Event()

    def stalled_body() -> Iterator[bytes]:
        release.wait(60)
        yield pb.InputRequest().SerializeToString()

    channel = grpc.insecure_channel(agent.target)
    input_as_stream = channel.stream_unary("/weavegym.agent.v1.GuestAgent/Input",
                                          request_serializer=None, response_deserializer=None)
    try:
        calls = [input_as_stream.future(stalled_body(), timeout=30,
                                       metadata=(("authorization", "Bearer wrong-token-0123456789"),))
                 for _ in range(40)]
        start = time.monotonic()
        codes = {call.exception(timeout=20).code() for call in calls}  # type: ignore[union-attr]
        refused_s = time.monotonic() - start
        with GuestClient(agent.target, agent.token) as good:
            assert good.exec("echo still-served", timeout=10).stdout.strip() == "still-served"
    finally:
        release.set()
        channel.close()
    assert codes == {grpc.StatusCode.UNAUTHENTICATED}, codes
    assert refused_s < 15, refused_s  # answered without their bodies (they would have waited 60 s)


def test_eight_concurrent_calls_all_succeed(client: GuestClient) -> None:
    def work(i: int) -> object:
        kind = i % 4
        if kind == 0:
            return client.exec(f"sleep 0.2; echo {i}").stdout
        if kind == 1:
            return client.screenshot().image.shape
        if kind == 2:
            return client.python(f"print({i} * 2)").stdout
        return client.move(10 + i, 20 + i)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(8)))
    for i, result in enumerate(results):
        expected = [f"{i}\n", (720, 1280, 3), f"{i * 2}\n", (10 + i, 20 + i)][i % 4]
        assert result == expected


# ------------------------------------------------------------------------------------------ bad input


BAD_REQUESTS = {
    "unknown key": lambda c: c.key("ctrl+nosuchkey"),
    "empty combo": lambda c: c.key(""),
    "negative coordinates": lambda c: c.click(-5, 10),
    "huge coordinates": lambda c: c.move(10**6, 10**6),
    "drag off screen": lambda c: c.drag((10, 10), (5000, 10)),
    "empty text": lambda c: c.type_text(""),
    "huge text": lambda c: c.type_text("a" * 1_000_000),
    "control characters": lambda c: c.type_text("bell\x07"),
    "missing cwd": lambda c: c.exec("true", cwd="/no/such/dir"),
    "NUL in command": lambda c: c.exec("echo \x00\xff\xfe garbage"),
    "negative timeout": lambda c: c.exec("true", timeout=-1),
    "bad env name": lambda c: c.exec("true", env={"A=B": "c"}),
    "unknown user": lambda c: c.exec("true", user="no-such-user-xyz"),
    "region off screen": lambda c: c.screenshot(region=(1200, 700, 200, 200)),
    "bad activate id": lambda c: c.activate_window(0x7FFFFFFF),
}


@pytest.mark.parametrize("name", sorted(BAD_REQUESTS))
def test_bad_request_gets_clear_error_and_agent_keeps_serving(client: GuestClient, name: str) -> None:
    with pytest.raises(AgentRequestError) as info:
        BAD_REQUESTS[name](client)
    assert str(info.value).strip(), "the error must say what was wrong"
    assert client.health().display_ok
    assert client.exec("echo ok").stdout == "ok\n"


def test_binary_garbage_as_shell_command_is_just_a_failing_command(client: GuestClient) -> None:
    garbage = bytes(range(1, 256)).decode("latin-1") * 4
    result = client.exec(garbage)
    assert result.exit_code != 0 and not result.timed_out
    assert client.health().display_ok


def test_garbage_bytes_on_the_wire_do_not_hurt_the_agent(agent: LocalAgent, client: GuestClient) -> None:
    channel = grpc.insecure_channel(agent.target)
    metadata = (("authorization", f"Bearer {agent.token}"),)
    for method in ("Exec", "Input", "Screenshot", "Health"):
        call = channel.unary_unary(f"/weavegym.agent.v1.GuestAgent/{method}")  # raw bytes in and out
        with pytest.raises(grpc.RpcError):
            result = call(os.urandom(64) + b"\xff" * 64, metadata=metadata, timeout=5)
            if method in ("Exec",):
                list(result)
            raise grpc.RpcError("no error")  # pragma: no cover - reached only if the agent accepted garbage
    channel.close()
    assert client.health().display_ok


# ------------------------------------------------------------------------------------------- recovery


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_client_reconnects_after_the_agent_is_killed_and_restarted(xvfb) -> None:
    config = LocalAgentConfig(display=xvfb.display, port=_free_port(), token="restart-token-0123456789")
    first = LocalAgent(config).start()
    client = GuestClient(first.target, config.token)
    try:
        assert client.exec("echo one").stdout == "one\n"
        first.kill()
        with pytest.raises(AgentUnavailableError):
            client.exec("echo lost")  # not retried: exec changes the guest
        second = LocalAgent(config).start()
        try:
            assert client.health().display_ok  # idempotent: reconnects transparently
            assert client.exec("echo two").stdout == "two\n"
        finally:
            second.stop()
    finally:
        client.close()
        first.stop()


def test_cancelled_stream_kills_the_command(client: GuestClient, tmp_path: Path) -> None:
    """A client that walks away mid-command must not leave the command running in the guest."""
    marker = tmp_path / "still-running"
    request = pb.ExecRequest(shell=f"echo go; sleep 30; touch {marker}", options=pb.ExecOptions(timeout_s=60))
    stream = client.stub.Exec(request, timeout=60, metadata=client._metadata)
    pid = 0
    for event in stream:
        if event.WhichOneof("event") == "started":
            pid = event.started.pid
        if event.WhichOneof("event") == "output":
            break
    stream.cancel()
    assert pid > 0
    wait_for(lambda: client.exec(f"ps -eo pgid=,stat= | awk '$1 == {pid} && $2 !~ /^Z/'").stdout == "", 15,
             what="the cancelled command's process group to be killed")
    assert not marker.exists()


def test_a_server_grab_makes_calls_fail_clearly_and_the_agent_recovers(xvfb) -> None:
    """A program that freezes X for everyone else (XGrabServer) must not hang the agent: calls behind the
    stuck one fail with a reason after the lock deadline, Health says the display is not OK, and once the
    grab ends everything works again."""
    config = LocalAgentConfig(display=xvfb.display, extra_args=("--x-lock-timeout", "2"))
    with LocalAgent(config) as agent, agent.client() as c:
        c.wait_ready(20)
        c.screenshot()
        grabber = xdisplay.Display(xvfb.display)
        grabber.grab_server()
        grabber.sync()
        try:
            with ThreadPoolExecutor(1) as pool:
                stuck = pool.submit(c.screenshot, timeout=60)  # blocks inside X, holding the agent's lock
                wait_for(lambda: not stuck.done() and time.sleep(0.5) is None, 5, what="the first call to block")
                start = time.monotonic()
                with pytest.raises(AgentRequestError, match="busy"):
                    c.move(5, 5, timeout=20)
                assert time.monotonic() - start < 10
                health = c.health(timeout=20)
                assert health.display_ok is False
                grabber.ungrab_server()
                grabber.sync()
                assert stuck.result(timeout=30).image.shape[:2] == (720, 1280)
        finally:
            grabber.close()
        assert c.health(timeout=20).display_ok is True
        c.move(7, 7)


def test_a_fork_bomb_from_a_no_display_account_is_capped_and_the_agent_stays_up(xvfb, throwaway_account) -> None:
    account = throwaway_account  # RLIMIT_NPROC counts the uid's processes host-wide: an account of its own
    config = LocalAgentConfig(display=xvfb.display, extra_args=("--no-display-for", account, "--process-limit", "40"))
    with LocalAgent(config) as agent, agent.client() as c:
        c.wait_ready(20)
        bomb = ("import os, time\nn = 0\nfor _ in range(300):\n    try:\n        pid = os.fork()\n"
                "    except OSError:\n        break\n    if pid == 0:\n        os.close(1); os.close(2)\n"
                "        time.sleep(30); os._exit(0)\n    n += 1\nprint(n)\n")
        result = c.exec(["python3", "-c", bomb], user=account, cwd="/", timeout=60)
        assert result.exit_code == 0 and result.stdout.strip().isdigit(), (result.exit_code, result.stderr)
        started = int(result.stdout)
        assert 0 < started < 40, result.stdout  # the fork that would pass the cap failed
        assert c.health(timeout=10).display_ok is True
        assert c.exec("echo root still runs", timeout=10).stdout == "root still runs\n"
        assert c.exec(["bash", "-c", "ulimit -u"], user=account, cwd="/", timeout=10).stdout.strip() == "40"
