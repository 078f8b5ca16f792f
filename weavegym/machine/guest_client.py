"""The host's client for the guest agent: deadlines on every call, reconnects, typed errors.

Every method has a deadline (``timeout`` or the config default). Idempotent
reads (health, screenshots, stat, downloads…) are retried once on a fresh
channel when the connection broke, which is what happens after a VM snapshot
load freezes the guest's TCP state. Calls that change the guest (exec, input,
upload) are never retried automatically: running them twice would be worse
than reporting the failure.
"""

from __future__ import annotations

import hashlib
import io
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import grpc
import numpy as np

from weavegym.agent.v1 import agent_pb2 as pb
from weavegym.agent.v1 import agent_pb2_grpc as pb_grpc
from weavegym.core.deadline import wait_for
from weavegym.core.errors import (
    AgentAuthError,
    AgentError,
    AgentInternalError,
    AgentRequestError,
    AgentTimeoutError,
    AgentUnavailableError,
    GuestPathNotFoundError,
)
from weavegym.guest_agent.auth import TLS_SERVER_NAME
from weavegym.machine.desktop_guard import GuardReport, guard_report

T = TypeVar("T")
MAX_MESSAGE_BYTES = 64 << 20
UPLOAD_CHUNK = 1 << 20
_STATUS_ERRORS: dict[grpc.StatusCode, type[AgentError]] = {
    grpc.StatusCode.UNAVAILABLE: AgentUnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: AgentTimeoutError,
    grpc.StatusCode.UNAUTHENTICATED: AgentAuthError,
    grpc.StatusCode.INVALID_ARGUMENT: AgentRequestError,
    grpc.StatusCode.OUT_OF_RANGE: AgentRequestError,
    grpc.StatusCode.FAILED_PRECONDITION: AgentRequestError,
    grpc.StatusCode.PERMISSION_DENIED: AgentRequestError,
    grpc.StatusCode.NOT_FOUND: GuestPathNotFoundError,
}
_BUTTONS = {"left": pb.LEFT, "middle": pb.MIDDLE, "right": pb.RIGHT, "back": pb.BACK, "forward": pb.FORWARD}
_KEY_MODES = {"press": pb.PRESS, "down": pb.DOWN, "up": pb.UP}
_ENCODINGS = {"raw": pb.RAW_RGB, "zlib": pb.ZLIB_RGB, "png": pb.PNG, "jpeg": pb.JPEG}


@dataclass(frozen=True)
class ClientConfig:
    """Deadlines are seconds; ``exec_grace_s`` lets the agent's own kill arrive before ours."""

    default_timeout_s: float = 30.0
    exec_grace_s: float = 10.0
    screenshot_timeout_s: float = 10.0
    keepalive_s: float = 30.0


@dataclass
class ExecResult:
    exit_code: int
    stdout_raw: bytes
    stderr_raw: bytes
    timed_out: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_total: int = 0
    stderr_total: int = 0
    duration_s: float = 0.0
    pid: int = 0
    restarted: bool = False  # a long-lived shell started over with a fresh state (GuestClient.shell)

    @property
    def stdout(self) -> str:
        return self.stdout_raw.decode("utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_raw.decode("utf-8", errors="replace")

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def truncated(self) -> bool:
        return self.stdout_truncated or self.stderr_truncated


@dataclass
class Screenshot:
    image: np.ndarray  # H x W x 3, uint8, RGB
    capture_method: str
    capture_ms: float
    encode_ms: float
    cursor: tuple[int, int]
    wire_bytes: int


@dataclass
class WindowInfo:
    id: int
    title: str
    wm_class: str
    wm_instance: str
    pid: int
    x: int
    y: int
    width: int
    height: int
    focused: bool
    mapped: bool

    @property
    def geometry(self) -> list[int]:
        """[x, y, width, height]: what a task's setup hands its oracle (the shell has no display to ask)."""
        return [self.x, self.y, self.width, self.height]


WINDOW_FIELDS = tuple(f.name for f in fields(WindowInfo))


@dataclass
class FileStat:
    path: str
    exists: bool
    type: str
    size: int
    mode: int
    owner: str
    group: str
    mtime: float
    link_target: str = ""
    nlink: int = 0  # hard links to the inode (0: an agent too old to say)
    ctime: float = 0.0  # the inode's last change (content, owner, mode, links), guest wall clock


_FILE_TYPES = {pb.REGULAR: "file", pb.DIRECTORY: "dir", pb.SYMLINK: "symlink", pb.OTHER: "other"}


def _file_stat(msg: pb.FileStat) -> FileStat:
    return FileStat(path=msg.path, exists=msg.exists, type=_FILE_TYPES.get(msg.type, ""), size=msg.size,
                    mode=msg.mode, owner=msg.owner, group=msg.group, mtime=msg.mtime,
                    link_target=msg.link_target, nlink=msg.nlink, ctime=msg.ctime)


def _window(msg: pb.WindowInfo) -> WindowInfo:
    # Field for field: the dataclass is the message's typed, protobuf-free view (a test checks that
    # both have the same fields, so a field added to the protocol cannot be forgotten here).
    return WindowInfo(**{name: getattr(msg, name) for name in WINDOW_FIELDS})


def translate_error(exc: grpc.RpcError, method: str) -> AgentError:
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    details = exc.details() if hasattr(exc, "details") else str(exc)
    cls = _STATUS_ERRORS.get(code, AgentInternalError)
    return cls(f"{method}: {details or code.name}", method=method, code=code.name)


class GuestClient:
    """Talks to one guest agent at ``target`` (``host:port``)."""

    def __init__(self, target: str, token: str, config: ClientConfig | None = None, *,
                 tls_cert: bytes | None = None) -> None:
        """``tls_cert``: the agent's certificate (PEM), the only one trusted; without it the channel is plain.

        With it, the agent proves it holds the VM's key before the token or any request is sent.
        """
        self.target = target
        self.config = config or ClientConfig()
        self._tls_cert = tls_cert
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._channel: grpc.Channel | None = None
        self._stub: pb_grpc.GuestAgentStub | None = None
        self._connect()

    # -- connection ------------------------------------------------------------------------------
    def _connect(self) -> None:
        keepalive_ms = int(self.config.keepalive_s * 1000)
        options = [
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.keepalive_time_ms", keepalive_ms),
            ("grpc.keepalive_timeout_ms", 10_000),
            ("grpc.keepalive_permit_without_calls", 1),
            # A channel of its own subchannels: by default gRPC shares them process-wide, so the new
            # channel of reconnect() would inherit the old one's backoff and fail with its cached
            # "connection refused" although the agent is listening again.
            ("grpc.use_local_subchannel_pool", 1),
            # Snappy reconnects: the default backoff grows to two minutes.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ]
        if self._tls_cert is None:
            self._channel = grpc.insecure_channel(self.target, options=options)
        else:
            credentials = grpc.ssl_channel_credentials(root_certificates=self._tls_cert)
            options.append(("grpc.ssl_target_name_override", TLS_SERVER_NAME))
            self._channel = grpc.secure_channel(self.target, credentials, options=options)
        self._stub = pb_grpc.GuestAgentStub(self._channel)

    def reconnect(self) -> None:
        """Drop the channel and open a new one (after a snapshot load or an agent restart)."""
        self.close()
        self._connect()

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
            self._stub = None

    def __enter__(self) -> GuestClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def stub(self) -> pb_grpc.GuestAgentStub:
        if self._stub is None:
            self._connect()
        assert self._stub is not None
        return self._stub

    def _call(self, name: str, fn: Callable[[float], T], timeout: float | None, *, idempotent: bool) -> T:
        deadline = timeout if timeout is not None else self.config.default_timeout_s
        try:
            return fn(deadline)
        except grpc.RpcError as exc:
            error = translate_error(exc, name)
            if not (idempotent and isinstance(error, AgentUnavailableError)):
                raise error from None
        self.reconnect()
        try:
            return fn(deadline)
        except grpc.RpcError as exc:
            raise translate_error(exc, name) from None

    def _unary(self, name: str, request: Any, timeout: float | None = None, *, idempotent: bool = True) -> Any:
        def call(deadline: float) -> Any:
            return getattr(self.stub, name)(request, timeout=deadline, metadata=self._metadata)

        return self._call(name, call, timeout, idempotent=idempotent)

    def wait_ready(self, timeout: float = 60.0) -> pb.HealthResponse:
        """Block until the agent answers Health (reconnecting as needed), or raise AgentTimeoutError."""

        attempt_timeout = [1.0]

        def probe() -> pb.HealthResponse | None:
            # Short first attempts: right after a snapshot load a new connection can stall on TCP
            # state frozen in the guest, and a fresh connection gets through sooner than a wait.
            try:
                return self._unary("Health", pb.HealthRequest(), timeout=min(attempt_timeout[0], timeout))
            except AgentUnavailableError:
                return None
            except AgentTimeoutError:
                attempt_timeout[0] = min(attempt_timeout[0] * 2, 5.0)
                self.reconnect()
                return None

        try:
            return wait_for(probe, timeout, what=f"the guest agent at {self.target}")
        except TimeoutError as exc:
            raise AgentTimeoutError(str(exc), method="Health") from None

    # -- health/info -----------------------------------------------------------------------------
    def health(self, timeout: float | None = None) -> pb.HealthResponse:
        return self._unary("Health", pb.HealthRequest(), timeout)

    def info(self, timeout: float | None = None) -> pb.InfoResponse:
        return self._unary("Info", pb.InfoRequest(), timeout)

    # -- exec ------------------------------------------------------------------------------------
    @staticmethod
    def _options(cwd: str, env: dict[str, str] | None, user: str, stdin: bytes | str, timeout: float,
                 max_output_bytes: int, merge_stderr: bool) -> pb.ExecOptions:
        data = stdin.encode() if isinstance(stdin, str) else stdin
        return pb.ExecOptions(cwd=cwd, env=env or {}, user=user, stdin=data, timeout_s=timeout,
                              max_output_bytes=max_output_bytes, merge_stderr=merge_stderr)

    def exec_stream(self, request: pb.ExecRequest | pb.PythonRequest) -> Iterator[pb.ExecEvent]:
        """Raw event stream of Exec/RunPython; the deadline is the command's plus a grace period."""
        method = "RunPython" if isinstance(request, pb.PythonRequest) else "Exec"
        timeout = (request.options.timeout_s or 60.0) + self.config.exec_grace_s
        try:
            yield from getattr(self.stub, method)(request, timeout=timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise translate_error(exc, method) from None

    def _collect(self, request: pb.ExecRequest | pb.PythonRequest) -> ExecResult:
        out, err = bytearray(), bytearray()
        result = ExecResult(exit_code=-1, stdout_raw=b"", stderr_raw=b"")
        for event in self.exec_stream(request):
            kind = event.WhichOneof("event")
            if kind == "output":
                (out if event.output.stream == pb.STDOUT else err).extend(event.output.data)
            elif kind == "started":
                result.pid = event.started.pid
            elif kind == "exit":
                e = event.exit
                result.exit_code, result.timed_out, result.duration_s = e.exit_code, e.timed_out, e.duration_s
                result.stdout_truncated, result.stderr_truncated = e.stdout_truncated, e.stderr_truncated
                result.stdout_total, result.stderr_total = e.stdout_bytes, e.stderr_bytes
        result.stdout_raw, result.stderr_raw = bytes(out), bytes(err)
        return result

    def exec(self, command: str | list[str], *, cwd: str = "", env: dict[str, str] | None = None,
             user: str = "", stdin: bytes | str = b"", timeout: float = 60.0, max_output_bytes: int = 0,
             merge_stderr: bool = False) -> ExecResult:
        """Run a shell line (str, through bash -c) or an argv list; wait for it and collect output."""
        opts = self._options(cwd, env, user, stdin, timeout, max_output_bytes, merge_stderr)
        if isinstance(command, str):
            request = pb.ExecRequest(shell=command, options=opts)
        else:
            request = pb.ExecRequest(argv=pb.ArgvCommand(args=list(command)), options=opts)
        return self._collect(request)

    def python(self, code: str, *, cwd: str = "", env: dict[str, str] | None = None, user: str = "",
               stdin: bytes | str = b"", timeout: float = 60.0, max_output_bytes: int = 0) -> ExecResult:
        """Run Python source in a fresh interpreter in the guest."""
        opts = self._options(cwd, env, user, stdin, timeout, max_output_bytes, False)
        return self._collect(pb.PythonRequest(code=code, options=opts))

    def shell(self, source: str, *, python: bool = False, user: str = "", timeout: float = 60.0,
              max_output_bytes: int = 0) -> ExecResult:
        """Run a command (or, with ``python``, Python source) in the account's long-lived guest bash.

        The shell's state (directory, variables, functions, aliases, jobs) carries over to the next call; a
        command killed at ``timeout`` leaves the state from before it. stdout holds stdout and stderr
        interleaved; ``restarted`` says the shell had to start over with a fresh state.
        """
        request = pb.ShellRequest(user=user, kind=pb.SHELL_PYTHON if python else pb.SHELL_COMMAND, source=source,
                                  timeout_s=timeout, max_output_bytes=max_output_bytes)
        # A killed command's shell takes up to 30 s more to hand over to its checkpoint (persistent_shell.py).
        # timeout 0 is the agent's default of 60 s.
        resp = self._unary("Shell", request, (timeout or 60.0) + self.config.exec_grace_s + 30.0, idempotent=False)
        return ExecResult(exit_code=resp.exit_code, stdout_raw=resp.output, stderr_raw=b"", timed_out=resp.timed_out,
                          stdout_truncated=resp.truncated, stdout_total=resp.output_bytes,
                          duration_s=resp.duration_s, restarted=resp.restarted)

    def close_shell(self, user: str = "") -> bool:
        """End the account's long-lived guest bash and all it started; True if there was one."""
        return self._unary("CloseShell", pb.CloseShellRequest(user=user), idempotent=False).was_open

    # -- screen ----------------------------------------------------------------------------------
    def screenshot(self, *, encoding: str = "raw", region: tuple[int, int, int, int] | None = None,
                   hide_cursor: bool = False, quality: int = 0, timeout: float | None = None) -> Screenshot:
        if encoding not in _ENCODINGS:
            raise AgentRequestError(f"unknown encoding {encoding!r}; use one of {sorted(_ENCODINGS)}")
        request = pb.ScreenshotRequest(encoding=_ENCODINGS[encoding], hide_cursor=hide_cursor, quality=quality)
        if region is not None:
            request.region.CopyFrom(pb.Region(x=region[0], y=region[1], width=region[2], height=region[3]))
        resp = self._unary("Screenshot", request, timeout or self.config.screenshot_timeout_s)
        return Screenshot(image=decode_frame(resp), capture_method=resp.capture_method,
                          capture_ms=resp.capture_ms, encode_ms=resp.encode_ms,
                          cursor=(resp.cursor_x, resp.cursor_y), wire_bytes=len(resp.data))

    # -- input -----------------------------------------------------------------------------------
    def _input(self, request: pb.InputRequest, timeout: float | None) -> tuple[int, int]:
        resp = self._unary("Input", request, timeout, idempotent=False)
        return resp.cursor_x, resp.cursor_y

    @staticmethod
    def _button(name: str) -> int:
        if name not in _BUTTONS:
            raise AgentRequestError(f"unknown mouse button {name!r}; use one of {sorted(_BUTTONS)}")
        return _BUTTONS[name]

    def move(self, x: int, y: int, timeout: float | None = None) -> tuple[int, int]:
        return self._input(pb.InputRequest(move=pb.MoveAction(x=x, y=y)), timeout)

    def click(self, x: int | None = None, y: int | None = None, *, button: str = "left", count: int = 1,
              timeout: float | None = None) -> tuple[int, int]:
        action = pb.ClickAction(x=x, y=y, button=self._button(button), count=count)
        return self._input(pb.InputRequest(click=action), timeout)

    def drag(self, from_xy: tuple[int, int], to_xy: tuple[int, int], *, button: str = "left", steps: int = 10,
             timeout: float | None = None) -> tuple[int, int]:
        action = pb.DragAction(from_x=from_xy[0], from_y=from_xy[1], to_x=to_xy[0], to_y=to_xy[1],
                               button=self._button(button), steps=steps)
        return self._input(pb.InputRequest(drag=action), timeout)

    def scroll(self, dx: int = 0, dy: int = 0, *, x: int | None = None, y: int | None = None,
               timeout: float | None = None) -> tuple[int, int]:
        return self._input(pb.InputRequest(scroll=pb.ScrollAction(x=x, y=y, dx=dx, dy=dy)), timeout)

    def key(self, combo: str, *, mode: str = "press", repeat: int = 1, timeout: float | None = None
            ) -> tuple[int, int]:
        if mode not in _KEY_MODES:
            raise AgentRequestError(f"unknown key mode {mode!r}; use press, down or up")
        action = pb.KeyAction(combo=combo, mode=_KEY_MODES[mode], repeat=repeat)
        return self._input(pb.InputRequest(key=action), timeout)

    def type_text(self, text: str, timeout: float | None = None) -> tuple[int, int]:
        return self._input(pb.InputRequest(type=pb.TypeAction(text=text)), timeout)

    def mouse_down(self, x: int | None = None, y: int | None = None, *, button: str = "left",
                   timeout: float | None = None) -> tuple[int, int]:
        action = pb.ButtonAction(x=x, y=y, button=self._button(button))
        return self._input(pb.InputRequest(mouse_down=action), timeout)

    def mouse_up(self, x: int | None = None, y: int | None = None, *, button: str = "left",
                 timeout: float | None = None) -> tuple[int, int]:
        action = pb.ButtonAction(x=x, y=y, button=self._button(button))
        return self._input(pb.InputRequest(mouse_up=action), timeout)

    # -- files -----------------------------------------------------------------------------------
    def upload(self, data: bytes | Path, remote_path: str, *, mode: int = 0, owner: str = "",
               make_parents: bool = False, timeout: float | None = None) -> pb.UploadResponse:
        """Upload bytes or a local file; the agent's SHA-256 is checked against ours."""
        size = data.stat().st_size if isinstance(data, Path) else len(data)
        digest = hashlib.sha256()
        header = pb.UploadHeader(path=remote_path, mode=mode, owner=owner, make_parents=make_parents,
                                 expected_size=size)

        def chunks() -> Iterator[pb.UploadChunk]:
            yield pb.UploadChunk(header=header)
            stream = data.open("rb") if isinstance(data, Path) else io.BytesIO(data)
            with stream:
                while block := stream.read(UPLOAD_CHUNK):
                    digest.update(block)
                    yield pb.UploadChunk(data=block)

        def call(deadline: float) -> pb.UploadResponse:
            return self.stub.Upload(chunks(), timeout=deadline, metadata=self._metadata)

        resp = self._call("Upload", call, timeout or max(self.config.default_timeout_s, size / 5e6),
                          idempotent=False)
        if resp.sha256 != digest.hexdigest():
            raise AgentInternalError(f"Upload: checksum mismatch for {remote_path}", method="Upload")
        return resp

    def download(self, remote_path: str, local_path: Path | None = None, *, max_bytes: int = 0,
                 follow_symlinks: bool = False, timeout: float | None = None) -> bytes:
        """Fetch a file; returns its bytes (also written to ``local_path`` if given). Verified by SHA-256.

        A path that is or passes through a symlink is refused unless ``follow_symlinks``: callers read
        folders the episode controls, as root. ``max_bytes`` is enforced here too, whatever the guest sends.
        """

        def call(deadline: float) -> bytes:
            buf, digest, expected = bytearray(), hashlib.sha256(), ""
            request = pb.DownloadRequest(path=remote_path, max_bytes=max_bytes, follow_symlinks=follow_symlinks)
            for part in self.stub.Download(request, timeout=deadline, metadata=self._metadata):
                which = part.WhichOneof("part")
                if which == "data":
                    if max_bytes and len(buf) + len(part.data) > max_bytes:
                        raise AgentInternalError(f"Download: {remote_path} sent more than max_bytes={max_bytes}",
                                                 method="Download")
                    buf.extend(part.data)
                    digest.update(part.data)
                elif which == "sha256":
                    expected = part.sha256
            if expected != digest.hexdigest():
                raise AgentInternalError(f"Download: checksum mismatch for {remote_path}", method="Download")
            return bytes(buf)

        data = self._call("Download", call, timeout or max(self.config.default_timeout_s, 120.0), idempotent=True)
        if local_path is not None:
            Path(local_path).write_bytes(data)
        return data

    def stat(self, path: str, follow_symlinks: bool = False, timeout: float | None = None) -> FileStat:
        return _file_stat(self._unary("Stat", pb.StatRequest(path=path, follow_symlinks=follow_symlinks), timeout))

    def list_dir(self, path: str, max_entries: int = 0, timeout: float | None = None
                 ) -> tuple[list[FileStat], bool]:
        resp = self._unary("ListDir", pb.ListDirRequest(path=path, max_entries=max_entries), timeout)
        return [_file_stat(e) for e in resp.entries], resp.truncated

    # -- clipboard and windows -------------------------------------------------------------------
    def get_clipboard(self, primary: bool = False, timeout: float | None = None) -> str | None:
        request = pb.GetClipboardRequest(selection=pb.PRIMARY if primary else pb.CLIPBOARD)
        resp = self._unary("GetClipboard", request, timeout)
        return None if resp.empty else resp.text

    def set_clipboard(self, text: str, primary: bool = False, timeout: float | None = None) -> None:
        request = pb.ClipboardContent(text=text, selection=pb.PRIMARY if primary else pb.CLIPBOARD)
        self._unary("SetClipboard", request, timeout, idempotent=False)

    def list_windows(self, include_unmapped: bool = False, timeout: float | None = None
                     ) -> tuple[list[WindowInfo], str]:
        resp = self._unary("ListWindows", pb.ListWindowsRequest(include_unmapped=include_unmapped), timeout)
        return [_window(w) for w in resp.windows], resp.window_manager

    def activate_window(self, window_id: int, timeout: float | None = None) -> WindowInfo:
        return _window(self._unary("ActivateWindow", pb.ActivateWindowRequest(id=window_id), timeout,
                                   idempotent=False))

    # -- the desktop guard -----------------------------------------------------------------------
    def guard_desktop(self, arm: Sequence[str] | None = None, disarm: bool = False,
                      timeout: float | None = None) -> GuardReport:
        """Arm the agent's X guard with the accounts allowed on the display (``arm``), disarm it, or (neither)
        read what it recorded; every call answers with the record since the last arm."""
        request = pb.GuardRequest(arm=arm is not None, allowed_accounts=list(arm or ()), disarm=disarm)
        return guard_report(self._unary("GuardDesktop", request, timeout, idempotent=arm is None and not disarm))


def decode_frame(resp: pb.ScreenshotResponse) -> np.ndarray:
    """Turn a ScreenshotResponse into an H x W x 3 uint8 array."""
    shape = (resp.height, resp.width, 3)
    if resp.encoding == pb.RAW_RGB:
        return np.frombuffer(resp.data, dtype=np.uint8).reshape(shape)
    if resp.encoding == pb.ZLIB_RGB:
        return np.frombuffer(zlib.decompress(resp.data), dtype=np.uint8).reshape(shape)
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(resp.data)).convert("RGB"))
