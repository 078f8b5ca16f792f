"""The gRPC servicer: translates protocol messages to the agent's modules and back.

It holds no logic of its own beyond that translation. Every handler runs
inside ``_guarded``, so a bad request becomes a status code and an unexpected
failure becomes INTERNAL: nothing a client sends can take the server down.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import platform
import pwd
import socket
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from weavegym.agent.v1 import agent_pb2 as pb
from weavegym.agent.v1 import agent_pb2_grpc as pb_grpc
from weavegym.guest_agent import AGENT_VERSION, PROTOCOL, execution, files
from weavegym.guest_agent.auth import TlsIdentity, TokenInterceptor, live_tls_credentials
from weavegym.guest_agent.capture import ScreenCapturer
from weavegym.guest_agent.clipboard import Clipboard
from weavegym.guest_agent.display import LOCK_TIMEOUT_S, DisplayConnection
from weavegym.guest_agent.errors import DisplayUnavailable, InvalidArgument, RequestError
from weavegym.guest_agent.input import InputController
from weavegym.guest_agent.persistent_shell import ShellRegistry
from weavegym.guest_agent.windows import activate_window, list_windows
from weavegym.guest_agent.x_guard import XGuard

log = logging.getLogger("weavegym.guest_agent")

MAX_MESSAGE_BYTES = 64 << 20  # a raw 4K frame is 25 MB; gRPC's default 4 MiB is too small
_ENCODINGS = {pb.RAW_RGB: "raw", pb.ZLIB_RGB: "zlib", pb.PNG: "png", pb.JPEG: "jpeg"}
_ENCODING_CODES = {v: k for k, v in _ENCODINGS.items()}
_BUTTONS = {pb.LEFT: 1, pb.MIDDLE: 2, pb.RIGHT: 3, pb.BACK: 8, pb.FORWARD: 9}
_KEY_MODES = {pb.PRESS: "press", pb.DOWN: "down", pb.UP: "up"}
_FILE_TYPES = {"file": pb.REGULAR, "dir": pb.DIRECTORY, "symlink": pb.SYMLINK, "other": pb.OTHER}
_SELECTIONS = {pb.CLIPBOARD: "CLIPBOARD", pb.PRIMARY: "PRIMARY"}


@dataclass
class AgentConfig:
    display: str
    listen: str = "127.0.0.1:7600"
    token: str = ""
    python: str = "/usr/bin/python3"
    max_workers: int = 32
    use_shm: bool = True
    no_display_users: frozenset[str] = frozenset()  # accounts whose commands get no DISPLAY
    x_lock_timeout_s: float = LOCK_TIMEOUT_S  # how long a call waits for the X connection another call holds
    process_limit: int = 0  # RLIMIT_NPROC for the no-display accounts' commands when there is no episode cgroup
    episode_cgroup: str = ""  # cgroup.procs the no-display accounts' commands join (cgroups.episode_cgroup)
    tls: TlsIdentity | None = None  # serve TLS with this key and certificate (the host pins the certificate)
    guard_state: str = ""  # the desktop guard keeps its arm state and crossings here too (x_guard.STATE_FILE)
    # Read the token and the identity again from their sources when they may have changed (a call with
    # another token, each TLS handshake): a VM restored from a shared prepared state gets its own by fw_cfg.
    reread_token: Callable[[], str] | None = None
    reread_tls: Callable[[], TlsIdentity] | None = None


def _abort(context: grpc.ServicerContext, exc: Exception) -> None:
    if isinstance(exc, RequestError):
        context.abort(exc.code, str(exc))
    log.exception("internal error")
    context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")


def _guarded(method):
    """Map RequestError to its status and anything else to INTERNAL, for unary and streaming handlers."""
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def stream(self, request, context):
            try:
                yield from method(self, request, context)
            except Exception as exc:
                _abort(context, exc)

        return stream

    @functools.wraps(method)
    def unary(self, request, context):
        try:
            return method(self, request, context)
        except Exception as exc:
            _abort(context, exc)

    return unary


def _opt(msg: Any, field: str) -> int | None:
    return getattr(msg, field) if msg.HasField(field) else None


def _button(code: int) -> int:
    if code not in _BUTTONS:
        raise InvalidArgument(f"unknown mouse button {code}")
    return _BUTTONS[code]


def _stat_pb(info: files.StatInfo) -> pb.FileStat:
    return pb.FileStat(
        path=info.path, exists=info.exists, type=_FILE_TYPES.get(info.type, pb.FILE_TYPE_UNSPECIFIED),
        size=info.size, mode=info.mode, owner=info.owner, group=info.group, mtime=info.mtime,
        link_target=info.link_target, nlink=info.nlink, ctime=info.ctime,
    )


def _read_boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _os_release() -> str:
    try:
        with open("/etc/os-release") as fh:
            for line in fh:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.platform()


class GuestAgentServicer(pb_grpc.GuestAgentServicer):
    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.display = DisplayConnection(config.display, config.x_lock_timeout_s)
        self.capturer = ScreenCapturer(self.display, use_shm=config.use_shm)
        self.input = InputController(self.display)
        self.clipboard = Clipboard(self.display)
        self.exec_defaults = execution.ExecDefaults(display=config.display, python=config.python,
                                                     no_display_users=config.no_display_users,
                                                     process_limit=config.process_limit,
                                                     episode_cgroup=config.episode_cgroup)
        self.shells = ShellRegistry(self.exec_defaults)
        self.boot_id = _read_boot_id()
        self._started = time.monotonic()
        self.guard = XGuard(config.display, state_file=Path(config.guard_state) if config.guard_state else None).start()

    def close(self) -> None:
        self.guard.close()
        self.shells.close_all()
        self.clipboard.close()
        self.capturer.close()
        self.display.close()

    # -- health/info ---------------------------------------------------------------------------
    @_guarded
    def Health(self, request, context):
        return pb.HealthResponse(display_ok=self.display.is_alive(), boot_id=self.boot_id,
                                 guest_time=time.time(), uptime_s=time.monotonic() - self._started)

    @_guarded
    def Info(self, request, context):
        resp = pb.InfoResponse(
            agent_version=AGENT_VERSION, protocol=PROTOCOL, display=self.config.display,
            hostname=socket.gethostname(), os_release=_os_release(), python_version=platform.python_version(),
            boot_id=self.boot_id, agent_pid=os.getpid(), agent_user=pwd.getpwuid(os.getuid()).pw_name,
        )
        try:
            self.capturer.capture(region=(0, 0, 1, 1), draw_cursor=False)  # settles the capture method
            with self.display.session() as d:
                screen = d.screen()
                geometry = screen.root.get_geometry()  # current size, even after an xrandr change
                resp.screen_width, resp.screen_height = geometry.width, geometry.height
                resp.screen_depth = screen.root_depth
                resp.has_xtest = d.has_extension("XTEST")
                resp.has_xfixes = d.has_extension("XFIXES")
            resp.capture_method = self.capturer.method
        except DisplayUnavailable:
            pass  # Info stays useful while Xorg is still starting
        return resp

    # -- exec ----------------------------------------------------------------------------------
    def _spec(self, argv: list[str], opts: pb.ExecOptions, cleanup: tuple[str, ...] = ()) -> execution.ExecSpec:
        return execution.build_spec(
            argv, cwd=opts.cwd, env=dict(opts.env), user=opts.user, stdin=opts.stdin,
            timeout_s=opts.timeout_s, max_output_bytes=opts.max_output_bytes, merge_stderr=opts.merge_stderr,
            defaults=self.exec_defaults, cleanup_paths=cleanup,
        )

    def _stream(self, spec: execution.ExecSpec, context):
        streams = {"stdout": pb.STDOUT, "stderr": pb.STDERR}
        for event in execution.run(spec, cancelled=lambda: not context.is_active()):
            if isinstance(event, execution.Output):
                yield pb.ExecEvent(output=pb.OutputChunk(stream=streams[event.stream], data=event.data))
            elif isinstance(event, execution.Started):
                yield pb.ExecEvent(started=pb.ExecStarted(pid=event.pid))
            else:
                yield pb.ExecEvent(exit=pb.ExitStatus(**vars(event)))

    @_guarded
    def Exec(self, request, context):
        which = request.WhichOneof("command")
        if which == "shell":
            argv = [self.exec_defaults.shell, "-c", request.shell]
        elif which == "argv":
            argv = list(request.argv.args)
        else:
            raise InvalidArgument("ExecRequest needs `shell` or `argv`")
        yield from self._stream(self._spec(argv, request.options), context)

    @_guarded
    def RunPython(self, request, context):
        path = execution.write_python_source(request.code)
        try:
            spec = self._spec([self.exec_defaults.python, path], request.options, cleanup=(path,))
        except BaseException:
            os.unlink(path)
            raise
        yield from self._stream(spec, context)

    @_guarded
    def Shell(self, request, context):
        kinds = {pb.SHELL_COMMAND: "shell", pb.SHELL_PYTHON: "python"}
        if request.kind not in kinds:
            raise InvalidArgument("ShellRequest.kind must be SHELL_COMMAND or SHELL_PYTHON")
        self.guard.nudge()  # every action is a moment the guard looks: before it and once it is done
        try:
            result = self.shells.run(request.user, kinds[request.kind], request.source, request.timeout_s,
                                     request.max_output_bytes)
        finally:
            self.guard.nudge()
        return pb.ShellResponse(output=result.output, exit_code=result.exit_code, timed_out=result.timed_out,
                                truncated=result.truncated, output_bytes=result.output_bytes,
                                duration_s=result.duration_s, restarted=result.restarted)

    @_guarded
    def CloseShell(self, request, context):
        return pb.CloseShellResponse(was_open=self.shells.close(request.user))

    # -- screen and input ----------------------------------------------------------------------
    @_guarded
    def Screenshot(self, request, context):
        if request.encoding not in _ENCODINGS:
            raise InvalidArgument(f"unknown encoding {request.encoding}")
        r = request.region
        frame = self.capturer.capture(
            region=(r.x, r.y, r.width, r.height) if request.HasField("region") else None,
            encoding=_ENCODINGS[request.encoding], draw_cursor=not request.hide_cursor, quality=request.quality,
        )
        return pb.ScreenshotResponse(
            width=frame.width, height=frame.height, encoding=_ENCODING_CODES[frame.encoding], data=frame.data,
            capture_method=frame.capture_method, capture_ms=frame.capture_ms, encode_ms=frame.encode_ms,
            cursor_x=frame.cursor_x, cursor_y=frame.cursor_y,
        )

    @_guarded
    def Input(self, request, context):
        start = time.perf_counter()
        self.guard.nudge()
        # One lock session (the lock is re-entrant) so the reported cursor is this action's,
        # not that of a concurrent call that ran in between.
        with self.display.session():
            self._dispatch_input(request)
            x, y = self.input.cursor_position()
        return pb.InputResponse(cursor_x=x, cursor_y=y, duration_ms=(time.perf_counter() - start) * 1e3)

    def _dispatch_input(self, request: pb.InputRequest) -> None:
        which = request.WhichOneof("action")
        ctl = self.input
        if which == "move":
            ctl.move(request.move.x, request.move.y)
        elif which == "click":
            a = request.click
            ctl.click(_opt(a, "x"), _opt(a, "y"), button=_button(a.button), count=a.count or 1)
        elif which == "drag":
            a = request.drag
            ctl.drag(a.from_x, a.from_y, a.to_x, a.to_y, button=_button(a.button), steps=a.steps or 10)
        elif which == "scroll":
            a = request.scroll
            ctl.scroll(_opt(a, "x"), _opt(a, "y"), a.dx, a.dy)
        elif which == "key":
            if request.key.mode not in _KEY_MODES:
                raise InvalidArgument(f"unknown key mode {request.key.mode}")
            ctl.key(request.key.combo, mode=_KEY_MODES[request.key.mode], repeat=request.key.repeat or 1)
        elif which == "type":
            ctl.type_text(request.type.text)
        elif which in ("mouse_down", "mouse_up"):
            a = getattr(request, which)
            press = ctl.button_down if which == "mouse_down" else ctl.button_up
            press(_opt(a, "x"), _opt(a, "y"), _button(a.button))
        else:
            raise InvalidArgument("InputRequest has no action")

    # -- files ---------------------------------------------------------------------------------
    @_guarded
    def Upload(self, request_iterator, context):
        first = next(request_iterator, None)
        if first is None or first.WhichOneof("part") != "header":
            raise InvalidArgument("an upload must start with a header message")
        h = first.header

        def data():
            for chunk in request_iterator:
                if chunk.WhichOneof("part") != "data":
                    raise InvalidArgument("only data messages may follow the upload header")
                yield chunk.data

        path, size, digest = files.upload(h.path, data(), mode=h.mode, owner=h.owner,
                                          make_parents=h.make_parents, expected_size=h.expected_size)
        return pb.UploadResponse(path=path, size=size, sha256=digest)

    @_guarded
    def Download(self, request, context):
        for part in files.download(request.path, request.chunk_size, request.max_bytes, request.follow_symlinks):
            if isinstance(part, files.StatInfo):
                yield pb.DownloadChunk(stat=_stat_pb(part))
            elif isinstance(part, bytes):
                yield pb.DownloadChunk(data=part)
            else:
                yield pb.DownloadChunk(sha256=part)

    @_guarded
    def Stat(self, request, context):
        return _stat_pb(files.stat_path(request.path, request.follow_symlinks))

    @_guarded
    def ListDir(self, request, context):
        entries, truncated = files.list_dir(request.path, request.max_entries)
        return pb.ListDirResponse(entries=[_stat_pb(e) for e in entries], truncated=truncated)

    # -- clipboard and windows -----------------------------------------------------------------
    @_guarded
    def GetClipboard(self, request, context):
        selection = _SELECTIONS.get(request.selection)
        if selection is None:
            raise InvalidArgument(f"unknown selection {request.selection}")
        text = self.clipboard.get_text(selection)
        return pb.ClipboardContent(text=text or "", selection=request.selection, empty=text is None)

    @_guarded
    def SetClipboard(self, request, context):
        selection = _SELECTIONS.get(request.selection)
        if selection is None:
            raise InvalidArgument(f"unknown selection {request.selection}")
        self.clipboard.set_text(request.text, selection)
        return pb.SetClipboardResponse()

    @_guarded
    def ListWindows(self, request, context):
        records, wm = list_windows(self.display, include_unmapped=request.include_unmapped)
        return pb.ListWindowsResponse(windows=records, window_manager=wm)

    @_guarded
    def ActivateWindow(self, request, context):
        return activate_window(self.display, request.id)

    # -- the desktop guard ----------------------------------------------------------------------
    @_guarded
    def GuardDesktop(self, request, context):
        if request.arm and request.disarm:
            raise InvalidArgument("GuardRequest: arm and disarm together")
        if request.arm:
            if not request.allowed_accounts:
                raise InvalidArgument("GuardRequest: arming needs the accounts allowed on the X server")
            state = self.guard.arm(request.allowed_accounts)
        elif request.disarm:
            state = self.guard.disarm()
        else:
            state = self.guard.report()
        return pb.GuardReport(armed=state.armed, armed_at=state.armed_at, crossings_total=state.crossings_total,
                              checks=state.checks, error=state.error,
                              crossings=[pb.ChannelCrossing(time=c.time, kind=c.kind, detail=c.detail)
                                         for c in state.crossings])


def build_server(config: AgentConfig) -> tuple[grpc.Server, GuestAgentServicer, int]:
    """Create and start the server; returns it with its servicer and the bound port."""
    if not config.token:
        raise ValueError("the agent refuses to start without a token")
    servicer = GuestAgentServicer(config)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=config.max_workers, thread_name_prefix="agent"),
        interceptors=[TokenInterceptor(config.token, config.reread_token)],
        options=[
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
            # Clients keep idle connections alive with pings (to notice a snapshot load that froze
            # their TCP state); accept them instead of answering GOAWAY "too_many_pings".
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", 5000),
        ],
        maximum_concurrent_rpcs=config.max_workers * 2,
    )
    pb_grpc.add_GuestAgentServicer_to_server(servicer, server)
    if config.tls is not None:
        port = server.add_secure_port(config.listen, live_tls_credentials(config.tls, config.reread_tls))
    else:
        port = server.add_insecure_port(config.listen)
    if port == 0:
        raise OSError(f"cannot listen on {config.listen}")
    server.start()
    return server, servicer, port
