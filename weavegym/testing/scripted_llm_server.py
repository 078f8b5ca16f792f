"""A local OpenAI-compatible chat-completions server that answers from a script: LLM tests and demos, no model.

It speaks the same wire format as OpenAI, vLLM or llama.cpp, so :class:`~weavegym.baselines.llm_agent.LLMAgent`
runs against it unchanged. It records every request body, can fail or stall requests on demand to exercise
the client's retries, and (``strict``) refuses message lists OpenAI would refuse, such as a tool call without
its tool result, so a test passing here says something about real servers.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

Spec = Mapping[str, Any]  # {"name", "arguments"}, {"content"}, or {"tool_calls": [{"name", "arguments"}, ...]}
Script = Callable[[list[dict[str, Any]]], Spec] | Sequence[Spec]
DONE_SPEC: Spec = {"name": "done", "arguments": {}}  # what a list script answers once it is used up
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


@dataclass(frozen=True)
class _Fault:
    """What to do instead of answering one request: stall (then drop it) or fail with ``status``."""

    status: int = 503
    headers: Mapping[str, str] = field(default_factory=dict)
    stall_s: float = 0.0


class ScriptedLLMServer:
    """``POST /v1/chat/completions`` answered by ``script``; ``GET /v1/models`` lists one model.

    ``script`` is a list of replies consumed in order, or a callable that sees each request's messages and
    returns one. Faults (``fail_first``/``stall_first_s`` or :meth:`fail_next`/:meth:`stall_next`) apply to
    the next requests in the order they were added, before the script is consulted, so a failed request
    does not use up a scripted reply.
    """

    def __init__(self, script: Script, host: str = "127.0.0.1", port: int = 0, *, fail_first: int = 0,
                 fail_status: int = 503, fail_headers: Mapping[str, str] | None = None, stall_first_s: float = 0.0,
                 strict: bool = True, model: str = "scripted") -> None:
        self.script = script
        self.host, self.port = host, port
        self.strict, self.model = strict, model
        self.requests: list[dict[str, Any]] = []  # every chat-completions body received, failed ones included
        self.headers: list[dict[str, str]] = []  # their HTTP headers (lower-case names), in the same order
        self._queue: deque[Spec] | None = None if callable(script) else deque(script)
        self._faults: deque[_Fault] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._replies = 0
        if stall_first_s > 0:
            self.stall_next(stall_first_s)
        self.fail_next(fail_first, fail_status, fail_headers)

    # -- control ------------------------------------------------------------------------------
    def fail_next(self, count: int = 1, status: int = 503, headers: Mapping[str, str] | None = None) -> None:
        """Answer the next ``count`` requests with ``status`` (e.g. 429 with {"Retry-After": "0"})."""
        with self._lock:
            self._faults.extend(_Fault(status, dict(headers or {})) for _ in range(count))

    def stall_next(self, seconds: float) -> None:
        """Hold the next request ``seconds`` (longer than the client's timeout) and then drop it unanswered."""
        with self._lock:
            self._faults.append(_Fault(stall_s=seconds))

    @property
    def url(self) -> str:
        """The base URL clients use, ending in ``/v1``."""
        if self._server is None:
            raise RuntimeError("the server is not running; call start() first")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ScriptedLLMServer:
        """Bind and serve in a daemon thread; the socket is listening when this returns."""
        if self._server is not None:
            return self
        self._stopping.clear()
        server = ThreadingHTTPServer((self.host, self.port), _Handler)  # binds and listens here
        server.owner = self  # type: ignore[attr-defined]
        server.handle_error = _quiet_errors(server.handle_error)  # type: ignore[method-assign]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="scripted-llm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; stalled requests are released at once."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- serving (called from handler threads) ----------------------------------------------------
    def _record(self, body: dict[str, Any], headers: Mapping[str, str]) -> _Fault | None:
        with self._lock:
            self.requests.append(body)
            self.headers.append({name.lower(): value for name, value in headers.items()})
            return self._faults.popleft() if self._faults else None

    def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if self._queue is None:
                spec = self.script(body["messages"])  # type: ignore[operator]
            else:
                spec = self._queue.popleft() if self._queue else DONE_SPEC
            self._replies += 1
            number = self._replies
        return _completion(spec, number, str(body.get("model") or self.model), len(json.dumps(body)))


def _completion(spec: Spec, number: int, model: str, request_chars: int) -> dict[str, Any]:
    """A chat.completion object whose message carries the spec's tool calls and/or content."""
    if not isinstance(spec, Mapping):
        raise TypeError(f"a script reply must be a mapping, got {type(spec).__name__}")
    calls = list(spec.get("tool_calls", ()))
    if "name" in spec:
        calls.insert(0, {"name": spec["name"], "arguments": spec.get("arguments", {})})
    tool_calls = [{"id": f"call_{number}_{i}", "type": "function",
                   "function": {"name": c["name"], "arguments": c["arguments"] if isinstance(c["arguments"], str)
                                else json.dumps(c["arguments"])}} for i, c in enumerate(calls)]
    message: dict[str, Any] = {"role": "assistant", "content": spec.get("content")}
    if tool_calls:
        message["tool_calls"] = tool_calls
    completion_chars = len(json.dumps(message))
    return {"id": f"chatcmpl-scripted-{number}", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": request_chars // 4, "completion_tokens": completion_chars // 4,
                      "total_tokens": (request_chars + completion_chars) // 4}}


def check_messages(messages: object) -> str | None:
    """Why OpenAI would refuse this message list (bad roles, broken tool-call chains), or None if it is fine."""
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    waiting: list[str] = []  # tool_call ids still owed a tool message
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            return f"{where} must be an object with a role in {sorted(_ROLES)}"
        role = message["role"]
        if role == "tool":
            if message.get("tool_call_id") not in waiting:
                return (f"{where}: messages with role 'tool' must be a response to a preceding message with "
                        f"'tool_calls' (unexpected tool_call_id {message.get('tool_call_id')!r})")
            waiting.remove(message["tool_call_id"])
            continue
        if waiting:
            return (f"{where}: an assistant message with 'tool_calls' must be followed by tool messages "
                    f"responding to each 'tool_call_id' (missing: {', '.join(waiting)})")
        if role == "assistant":
            waiting = [call.get("id") for call in message.get("tool_calls") or () if isinstance(call, dict)]
            if None in waiting:
                return f"{where}: every tool call needs an id"
        elif role == "user" and not isinstance(message.get("content"), str | list):
            return f"{where}: user content must be a string or an array of parts"
    if waiting:
        return f"the last assistant message's tool calls were never answered (missing: {', '.join(waiting)})"
    return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ScriptedLLM/1"

    def do_GET(self) -> None:
        owner: ScriptedLLMServer = self.server.owner  # type: ignore[attr-defined]
        if self.path.rstrip("/") == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": owner.model, "object": "model", "created": 0,
                                                         "owned_by": "weavegym"}]})
        else:
            self._error(404, f"no route GET {self.path}", "not_found")

    def do_POST(self) -> None:
        owner: ScriptedLLMServer = self.server.owner  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"no route POST {self.path}", "not_found")
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._error(400, "the request body is not valid JSON", "invalid_request_error")
            return
        if not isinstance(body, dict):
            self._error(400, "the request body must be a JSON object", "invalid_request_error")
            return
        fault = owner._record(body, self.headers)
        if fault is not None and fault.stall_s > 0:
            owner._stopping.wait(fault.stall_s)
            self.close_connection = True  # the client has given up; answer nothing
            return
        if fault is not None:
            self._error(fault.status, f"scripted failure with HTTP {fault.status}", "server_error", fault.headers)
            return
        problem = check_messages(body.get("messages")) if owner.strict else None
        if problem is None and not body.get("model"):
            problem = "you must provide a model parameter"
        if problem is not None:
            self._error(400, problem, "invalid_request_error")
            return
        try:
            reply = owner._answer(body)
        except Exception as exc:  # a broken script is reported to the client, like a server bug would be
            self._error(500, f"the script failed: {type(exc).__name__}: {exc}", "server_error")
            return
        self._json(200, reply)

    def _error(self, status: int, message: str, kind: str, headers: Mapping[str, str] | None = None) -> None:
        self._json(status, {"error": {"message": message, "type": kind, "param": None, "code": None}}, headers)

    def _json(self, status: int, payload: object, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests read .requests instead of a log on stderr


def _quiet_errors(handle_error: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    """Drop the tracebacks of clients that hung up (a timed-out client is the point of a stall)."""

    def handle(request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        handle_error(request, client_address)

    return handle
