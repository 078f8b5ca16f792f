from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OutputStream(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTPUT_STREAM_UNSPECIFIED: _ClassVar[OutputStream]
    STDOUT: _ClassVar[OutputStream]
    STDERR: _ClassVar[OutputStream]

class ShellKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SHELL_KIND_UNSPECIFIED: _ClassVar[ShellKind]
    SHELL_COMMAND: _ClassVar[ShellKind]
    SHELL_PYTHON: _ClassVar[ShellKind]

class ImageEncoding(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RAW_RGB: _ClassVar[ImageEncoding]
    ZLIB_RGB: _ClassVar[ImageEncoding]
    PNG: _ClassVar[ImageEncoding]
    JPEG: _ClassVar[ImageEncoding]

class MouseButton(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEFT: _ClassVar[MouseButton]
    MIDDLE: _ClassVar[MouseButton]
    RIGHT: _ClassVar[MouseButton]
    BACK: _ClassVar[MouseButton]
    FORWARD: _ClassVar[MouseButton]

class KeyMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRESS: _ClassVar[KeyMode]
    DOWN: _ClassVar[KeyMode]
    UP: _ClassVar[KeyMode]

class FileType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FILE_TYPE_UNSPECIFIED: _ClassVar[FileType]
    REGULAR: _ClassVar[FileType]
    DIRECTORY: _ClassVar[FileType]
    SYMLINK: _ClassVar[FileType]
    OTHER: _ClassVar[FileType]

class Selection(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLIPBOARD: _ClassVar[Selection]
    PRIMARY: _ClassVar[Selection]
OUTPUT_STREAM_UNSPECIFIED: OutputStream
STDOUT: OutputStream
STDERR: OutputStream
SHELL_KIND_UNSPECIFIED: ShellKind
SHELL_COMMAND: ShellKind
SHELL_PYTHON: ShellKind
RAW_RGB: ImageEncoding
ZLIB_RGB: ImageEncoding
PNG: ImageEncoding
JPEG: ImageEncoding
LEFT: MouseButton
MIDDLE: MouseButton
RIGHT: MouseButton
BACK: MouseButton
FORWARD: MouseButton
PRESS: KeyMode
DOWN: KeyMode
UP: KeyMode
FILE_TYPE_UNSPECIFIED: FileType
REGULAR: FileType
DIRECTORY: FileType
SYMLINK: FileType
OTHER: FileType
CLIPBOARD: Selection
PRIMARY: Selection

class HealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthResponse(_message.Message):
    __slots__ = ("display_ok", "boot_id", "guest_time", "uptime_s")
    DISPLAY_OK_FIELD_NUMBER: _ClassVar[int]
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    GUEST_TIME_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    display_ok: bool
    boot_id: str
    guest_time: float
    uptime_s: float
    def __init__(self, display_ok: bool = ..., boot_id: _Optional[str] = ..., guest_time: _Optional[float] = ..., uptime_s: _Optional[float] = ...) -> None: ...

class InfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class InfoResponse(_message.Message):
    __slots__ = ("agent_version", "protocol", "display", "screen_width", "screen_height", "screen_depth", "capture_method", "has_xtest", "has_xfixes", "hostname", "os_release", "python_version", "boot_id", "agent_pid", "agent_user")
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_FIELD_NUMBER: _ClassVar[int]
    SCREEN_WIDTH_FIELD_NUMBER: _ClassVar[int]
    SCREEN_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    SCREEN_DEPTH_FIELD_NUMBER: _ClassVar[int]
    CAPTURE_METHOD_FIELD_NUMBER: _ClassVar[int]
    HAS_XTEST_FIELD_NUMBER: _ClassVar[int]
    HAS_XFIXES_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    OS_RELEASE_FIELD_NUMBER: _ClassVar[int]
    PYTHON_VERSION_FIELD_NUMBER: _ClassVar[int]
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_PID_FIELD_NUMBER: _ClassVar[int]
    AGENT_USER_FIELD_NUMBER: _ClassVar[int]
    agent_version: str
    protocol: str
    display: str
    screen_width: int
    screen_height: int
    screen_depth: int
    capture_method: str
    has_xtest: bool
    has_xfixes: bool
    hostname: str
    os_release: str
    python_version: str
    boot_id: str
    agent_pid: int
    agent_user: str
    def __init__(self, agent_version: _Optional[str] = ..., protocol: _Optional[str] = ..., display: _Optional[str] = ..., screen_width: _Optional[int] = ..., screen_height: _Optional[int] = ..., screen_depth: _Optional[int] = ..., capture_method: _Optional[str] = ..., has_xtest: bool = ..., has_xfixes: bool = ..., hostname: _Optional[str] = ..., os_release: _Optional[str] = ..., python_version: _Optional[str] = ..., boot_id: _Optional[str] = ..., agent_pid: _Optional[int] = ..., agent_user: _Optional[str] = ...) -> None: ...

class ExecOptions(_message.Message):
    __slots__ = ("cwd", "env", "user", "stdin", "timeout_s", "max_output_bytes", "merge_stderr")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CWD_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MERGE_STDERR_FIELD_NUMBER: _ClassVar[int]
    cwd: str
    env: _containers.ScalarMap[str, str]
    user: str
    stdin: bytes
    timeout_s: float
    max_output_bytes: int
    merge_stderr: bool
    def __init__(self, cwd: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., user: _Optional[str] = ..., stdin: _Optional[bytes] = ..., timeout_s: _Optional[float] = ..., max_output_bytes: _Optional[int] = ..., merge_stderr: bool = ...) -> None: ...

class ArgvCommand(_message.Message):
    __slots__ = ("args",)
    ARGS_FIELD_NUMBER: _ClassVar[int]
    args: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, args: _Optional[_Iterable[str]] = ...) -> None: ...

class ExecRequest(_message.Message):
    __slots__ = ("shell", "argv", "options")
    SHELL_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    shell: str
    argv: ArgvCommand
    options: ExecOptions
    def __init__(self, shell: _Optional[str] = ..., argv: _Optional[_Union[ArgvCommand, _Mapping]] = ..., options: _Optional[_Union[ExecOptions, _Mapping]] = ...) -> None: ...

class PythonRequest(_message.Message):
    __slots__ = ("code", "options")
    CODE_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    code: str
    options: ExecOptions
    def __init__(self, code: _Optional[str] = ..., options: _Optional[_Union[ExecOptions, _Mapping]] = ...) -> None: ...

class ExecStarted(_message.Message):
    __slots__ = ("pid",)
    PID_FIELD_NUMBER: _ClassVar[int]
    pid: int
    def __init__(self, pid: _Optional[int] = ...) -> None: ...

class OutputChunk(_message.Message):
    __slots__ = ("stream", "data")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    stream: OutputStream
    data: bytes
    def __init__(self, stream: _Optional[_Union[OutputStream, str]] = ..., data: _Optional[bytes] = ...) -> None: ...

class ExitStatus(_message.Message):
    __slots__ = ("exit_code", "timed_out", "stdout_truncated", "stderr_truncated", "stdout_bytes", "stderr_bytes", "duration_s")
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    STDERR_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    STDOUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    STDERR_BYTES_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    timed_out: bool
    stdout_truncated: bool
    stderr_truncated: bool
    stdout_bytes: int
    stderr_bytes: int
    duration_s: float
    def __init__(self, exit_code: _Optional[int] = ..., timed_out: bool = ..., stdout_truncated: bool = ..., stderr_truncated: bool = ..., stdout_bytes: _Optional[int] = ..., stderr_bytes: _Optional[int] = ..., duration_s: _Optional[float] = ...) -> None: ...

class ExecEvent(_message.Message):
    __slots__ = ("started", "output", "exit")
    STARTED_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    EXIT_FIELD_NUMBER: _ClassVar[int]
    started: ExecStarted
    output: OutputChunk
    exit: ExitStatus
    def __init__(self, started: _Optional[_Union[ExecStarted, _Mapping]] = ..., output: _Optional[_Union[OutputChunk, _Mapping]] = ..., exit: _Optional[_Union[ExitStatus, _Mapping]] = ...) -> None: ...

class ShellRequest(_message.Message):
    __slots__ = ("user", "kind", "source", "timeout_s", "max_output_bytes")
    USER_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    user: str
    kind: ShellKind
    source: str
    timeout_s: float
    max_output_bytes: int
    def __init__(self, user: _Optional[str] = ..., kind: _Optional[_Union[ShellKind, str]] = ..., source: _Optional[str] = ..., timeout_s: _Optional[float] = ..., max_output_bytes: _Optional[int] = ...) -> None: ...

class ShellResponse(_message.Message):
    __slots__ = ("output", "exit_code", "timed_out", "truncated", "output_bytes", "duration_s", "restarted")
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    RESTARTED_FIELD_NUMBER: _ClassVar[int]
    output: bytes
    exit_code: int
    timed_out: bool
    truncated: bool
    output_bytes: int
    duration_s: float
    restarted: bool
    def __init__(self, output: _Optional[bytes] = ..., exit_code: _Optional[int] = ..., timed_out: bool = ..., truncated: bool = ..., output_bytes: _Optional[int] = ..., duration_s: _Optional[float] = ..., restarted: bool = ...) -> None: ...

class CloseShellRequest(_message.Message):
    __slots__ = ("user",)
    USER_FIELD_NUMBER: _ClassVar[int]
    user: str
    def __init__(self, user: _Optional[str] = ...) -> None: ...

class CloseShellResponse(_message.Message):
    __slots__ = ("was_open",)
    WAS_OPEN_FIELD_NUMBER: _ClassVar[int]
    was_open: bool
    def __init__(self, was_open: bool = ...) -> None: ...

class Region(_message.Message):
    __slots__ = ("x", "y", "width", "height")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    x: int
    y: int
    width: int
    height: int
    def __init__(self, x: _Optional[int] = ..., y: _Optional[int] = ..., width: _Optional[int] = ..., height: _Optional[int] = ...) -> None: ...

class ScreenshotRequest(_message.Message):
    __slots__ = ("encoding", "region", "hide_cursor", "quality")
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    HIDE_CURSOR_FIELD_NUMBER: _ClassVar[int]
    QUALITY_FIELD_NUMBER: _ClassVar[int]
    encoding: ImageEncoding
    region: Region
    hide_cursor: bool
    quality: int
    def __init__(self, encoding: _Optional[_Union[ImageEncoding, str]] = ..., region: _Optional[_Union[Region, _Mapping]] = ..., hide_cursor: bool = ..., quality: _Optional[int] = ...) -> None: ...

class ScreenshotResponse(_message.Message):
    __slots__ = ("width", "height", "encoding", "data", "capture_method", "capture_ms", "encode_ms", "cursor_x", "cursor_y")
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CAPTURE_METHOD_FIELD_NUMBER: _ClassVar[int]
    CAPTURE_MS_FIELD_NUMBER: _ClassVar[int]
    ENCODE_MS_FIELD_NUMBER: _ClassVar[int]
    CURSOR_X_FIELD_NUMBER: _ClassVar[int]
    CURSOR_Y_FIELD_NUMBER: _ClassVar[int]
    width: int
    height: int
    encoding: ImageEncoding
    data: bytes
    capture_method: str
    capture_ms: float
    encode_ms: float
    cursor_x: int
    cursor_y: int
    def __init__(self, width: _Optional[int] = ..., height: _Optional[int] = ..., encoding: _Optional[_Union[ImageEncoding, str]] = ..., data: _Optional[bytes] = ..., capture_method: _Optional[str] = ..., capture_ms: _Optional[float] = ..., encode_ms: _Optional[float] = ..., cursor_x: _Optional[int] = ..., cursor_y: _Optional[int] = ...) -> None: ...

class MoveAction(_message.Message):
    __slots__ = ("x", "y")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    x: int
    y: int
    def __init__(self, x: _Optional[int] = ..., y: _Optional[int] = ...) -> None: ...

class ClickAction(_message.Message):
    __slots__ = ("x", "y", "button", "count")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    BUTTON_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    x: int
    y: int
    button: MouseButton
    count: int
    def __init__(self, x: _Optional[int] = ..., y: _Optional[int] = ..., button: _Optional[_Union[MouseButton, str]] = ..., count: _Optional[int] = ...) -> None: ...

class DragAction(_message.Message):
    __slots__ = ("from_x", "from_y", "to_x", "to_y", "button", "steps")
    FROM_X_FIELD_NUMBER: _ClassVar[int]
    FROM_Y_FIELD_NUMBER: _ClassVar[int]
    TO_X_FIELD_NUMBER: _ClassVar[int]
    TO_Y_FIELD_NUMBER: _ClassVar[int]
    BUTTON_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    from_x: int
    from_y: int
    to_x: int
    to_y: int
    button: MouseButton
    steps: int
    def __init__(self, from_x: _Optional[int] = ..., from_y: _Optional[int] = ..., to_x: _Optional[int] = ..., to_y: _Optional[int] = ..., button: _Optional[_Union[MouseButton, str]] = ..., steps: _Optional[int] = ...) -> None: ...

class ScrollAction(_message.Message):
    __slots__ = ("x", "y", "dx", "dy")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    DX_FIELD_NUMBER: _ClassVar[int]
    DY_FIELD_NUMBER: _ClassVar[int]
    x: int
    y: int
    dx: int
    dy: int
    def __init__(self, x: _Optional[int] = ..., y: _Optional[int] = ..., dx: _Optional[int] = ..., dy: _Optional[int] = ...) -> None: ...

class KeyAction(_message.Message):
    __slots__ = ("combo", "mode", "repeat")
    COMBO_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REPEAT_FIELD_NUMBER: _ClassVar[int]
    combo: str
    mode: KeyMode
    repeat: int
    def __init__(self, combo: _Optional[str] = ..., mode: _Optional[_Union[KeyMode, str]] = ..., repeat: _Optional[int] = ...) -> None: ...

class TypeAction(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ButtonAction(_message.Message):
    __slots__ = ("x", "y", "button")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    BUTTON_FIELD_NUMBER: _ClassVar[int]
    x: int
    y: int
    button: MouseButton
    def __init__(self, x: _Optional[int] = ..., y: _Optional[int] = ..., button: _Optional[_Union[MouseButton, str]] = ...) -> None: ...

class InputRequest(_message.Message):
    __slots__ = ("move", "click", "drag", "scroll", "key", "type", "mouse_down", "mouse_up")
    MOVE_FIELD_NUMBER: _ClassVar[int]
    CLICK_FIELD_NUMBER: _ClassVar[int]
    DRAG_FIELD_NUMBER: _ClassVar[int]
    SCROLL_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MOUSE_DOWN_FIELD_NUMBER: _ClassVar[int]
    MOUSE_UP_FIELD_NUMBER: _ClassVar[int]
    move: MoveAction
    click: ClickAction
    drag: DragAction
    scroll: ScrollAction
    key: KeyAction
    type: TypeAction
    mouse_down: ButtonAction
    mouse_up: ButtonAction
    def __init__(self, move: _Optional[_Union[MoveAction, _Mapping]] = ..., click: _Optional[_Union[ClickAction, _Mapping]] = ..., drag: _Optional[_Union[DragAction, _Mapping]] = ..., scroll: _Optional[_Union[ScrollAction, _Mapping]] = ..., key: _Optional[_Union[KeyAction, _Mapping]] = ..., type: _Optional[_Union[TypeAction, _Mapping]] = ..., mouse_down: _Optional[_Union[ButtonAction, _Mapping]] = ..., mouse_up: _Optional[_Union[ButtonAction, _Mapping]] = ...) -> None: ...

class InputResponse(_message.Message):
    __slots__ = ("cursor_x", "cursor_y", "duration_ms")
    CURSOR_X_FIELD_NUMBER: _ClassVar[int]
    CURSOR_Y_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    cursor_x: int
    cursor_y: int
    duration_ms: float
    def __init__(self, cursor_x: _Optional[int] = ..., cursor_y: _Optional[int] = ..., duration_ms: _Optional[float] = ...) -> None: ...

class FileStat(_message.Message):
    __slots__ = ("path", "exists", "type", "size", "mode", "owner", "group", "mtime", "link_target", "nlink", "ctime")
    PATH_FIELD_NUMBER: _ClassVar[int]
    EXISTS_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MTIME_FIELD_NUMBER: _ClassVar[int]
    LINK_TARGET_FIELD_NUMBER: _ClassVar[int]
    NLINK_FIELD_NUMBER: _ClassVar[int]
    CTIME_FIELD_NUMBER: _ClassVar[int]
    path: str
    exists: bool
    type: FileType
    size: int
    mode: int
    owner: str
    group: str
    mtime: float
    link_target: str
    nlink: int
    ctime: float
    def __init__(self, path: _Optional[str] = ..., exists: bool = ..., type: _Optional[_Union[FileType, str]] = ..., size: _Optional[int] = ..., mode: _Optional[int] = ..., owner: _Optional[str] = ..., group: _Optional[str] = ..., mtime: _Optional[float] = ..., link_target: _Optional[str] = ..., nlink: _Optional[int] = ..., ctime: _Optional[float] = ...) -> None: ...

class UploadHeader(_message.Message):
    __slots__ = ("path", "mode", "owner", "make_parents", "expected_size")
    PATH_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    MAKE_PARENTS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SIZE_FIELD_NUMBER: _ClassVar[int]
    path: str
    mode: int
    owner: str
    make_parents: bool
    expected_size: int
    def __init__(self, path: _Optional[str] = ..., mode: _Optional[int] = ..., owner: _Optional[str] = ..., make_parents: bool = ..., expected_size: _Optional[int] = ...) -> None: ...

class UploadChunk(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: UploadHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[UploadHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class UploadResponse(_message.Message):
    __slots__ = ("path", "size", "sha256")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    path: str
    size: int
    sha256: str
    def __init__(self, path: _Optional[str] = ..., size: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class DownloadRequest(_message.Message):
    __slots__ = ("path", "chunk_size", "max_bytes", "follow_symlinks")
    PATH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_SYMLINKS_FIELD_NUMBER: _ClassVar[int]
    path: str
    chunk_size: int
    max_bytes: int
    follow_symlinks: bool
    def __init__(self, path: _Optional[str] = ..., chunk_size: _Optional[int] = ..., max_bytes: _Optional[int] = ..., follow_symlinks: bool = ...) -> None: ...

class DownloadChunk(_message.Message):
    __slots__ = ("stat", "data", "sha256")
    STAT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    stat: FileStat
    data: bytes
    sha256: str
    def __init__(self, stat: _Optional[_Union[FileStat, _Mapping]] = ..., data: _Optional[bytes] = ..., sha256: _Optional[str] = ...) -> None: ...

class StatRequest(_message.Message):
    __slots__ = ("path", "follow_symlinks")
    PATH_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_SYMLINKS_FIELD_NUMBER: _ClassVar[int]
    path: str
    follow_symlinks: bool
    def __init__(self, path: _Optional[str] = ..., follow_symlinks: bool = ...) -> None: ...

class ListDirRequest(_message.Message):
    __slots__ = ("path", "max_entries")
    PATH_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    path: str
    max_entries: int
    def __init__(self, path: _Optional[str] = ..., max_entries: _Optional[int] = ...) -> None: ...

class ListDirResponse(_message.Message):
    __slots__ = ("entries", "truncated")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[FileStat]
    truncated: bool
    def __init__(self, entries: _Optional[_Iterable[_Union[FileStat, _Mapping]]] = ..., truncated: bool = ...) -> None: ...

class GetClipboardRequest(_message.Message):
    __slots__ = ("selection",)
    SELECTION_FIELD_NUMBER: _ClassVar[int]
    selection: Selection
    def __init__(self, selection: _Optional[_Union[Selection, str]] = ...) -> None: ...

class ClipboardContent(_message.Message):
    __slots__ = ("text", "selection", "empty")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SELECTION_FIELD_NUMBER: _ClassVar[int]
    EMPTY_FIELD_NUMBER: _ClassVar[int]
    text: str
    selection: Selection
    empty: bool
    def __init__(self, text: _Optional[str] = ..., selection: _Optional[_Union[Selection, str]] = ..., empty: bool = ...) -> None: ...

class SetClipboardResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WindowInfo(_message.Message):
    __slots__ = ("id", "title", "wm_class", "wm_instance", "pid", "x", "y", "width", "height", "focused", "mapped")
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    WM_CLASS_FIELD_NUMBER: _ClassVar[int]
    WM_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    FOCUSED_FIELD_NUMBER: _ClassVar[int]
    MAPPED_FIELD_NUMBER: _ClassVar[int]
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
    def __init__(self, id: _Optional[int] = ..., title: _Optional[str] = ..., wm_class: _Optional[str] = ..., wm_instance: _Optional[str] = ..., pid: _Optional[int] = ..., x: _Optional[int] = ..., y: _Optional[int] = ..., width: _Optional[int] = ..., height: _Optional[int] = ..., focused: bool = ..., mapped: bool = ...) -> None: ...

class ListWindowsRequest(_message.Message):
    __slots__ = ("include_unmapped",)
    INCLUDE_UNMAPPED_FIELD_NUMBER: _ClassVar[int]
    include_unmapped: bool
    def __init__(self, include_unmapped: bool = ...) -> None: ...

class ListWindowsResponse(_message.Message):
    __slots__ = ("windows", "window_manager")
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_MANAGER_FIELD_NUMBER: _ClassVar[int]
    windows: _containers.RepeatedCompositeFieldContainer[WindowInfo]
    window_manager: str
    def __init__(self, windows: _Optional[_Iterable[_Union[WindowInfo, _Mapping]]] = ..., window_manager: _Optional[str] = ...) -> None: ...

class ActivateWindowRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...

class GuardRequest(_message.Message):
    __slots__ = ("arm", "allowed_accounts", "disarm")
    ARM_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_ACCOUNTS_FIELD_NUMBER: _ClassVar[int]
    DISARM_FIELD_NUMBER: _ClassVar[int]
    arm: bool
    allowed_accounts: _containers.RepeatedScalarFieldContainer[str]
    disarm: bool
    def __init__(self, arm: bool = ..., allowed_accounts: _Optional[_Iterable[str]] = ..., disarm: bool = ...) -> None: ...

class ChannelCrossing(_message.Message):
    __slots__ = ("time", "kind", "detail")
    TIME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    time: float
    kind: str
    detail: str
    def __init__(self, time: _Optional[float] = ..., kind: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class GuardReport(_message.Message):
    __slots__ = ("armed", "armed_at", "crossings", "crossings_total", "checks", "error")
    ARMED_FIELD_NUMBER: _ClassVar[int]
    ARMED_AT_FIELD_NUMBER: _ClassVar[int]
    CROSSINGS_FIELD_NUMBER: _ClassVar[int]
    CROSSINGS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    armed: bool
    armed_at: float
    crossings: _containers.RepeatedCompositeFieldContainer[ChannelCrossing]
    crossings_total: int
    checks: int
    error: str
    def __init__(self, armed: bool = ..., armed_at: _Optional[float] = ..., crossings: _Optional[_Iterable[_Union[ChannelCrossing, _Mapping]]] = ..., crossings_total: _Optional[int] = ..., checks: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...
