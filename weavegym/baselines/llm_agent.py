"""An agent backed by any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp, Ollama, ...).

Each step is one request: the history (fitted to the context budget by :mod:`llm_messages`), the env's actions
as tools, and the new observation as a user turn with the screenshot. The model's first tool call is the
action. Only plain HTTP via httpx is used, so no vendor SDK is needed and any server that speaks the wire
format works.

By default screenshots are downscaled (``image_scale``) and the model is given tools whose coordinates are
screenshot pixels; the agent maps them back to screen pixels. Asking a model to click on a 1280-wide screen
while showing it a 640-wide picture is a reliable way to make it miss.
"""

from __future__ import annotations

import email.utils
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from weavegym.baselines import llm_messages as lm
from weavegym.baselines.policy import EpisodeStart
from weavegym.core.errors import WeaveGymError
from weavegym.core.extras import missing_extra
from weavegym.envs.actions import CLI_KINDS, tool_schema
from weavegym.envs.task import ActionLike

if TYPE_CHECKING:
    import httpx

WAIT: dict[str, Any] = {"kind": "wait", "seconds": 1.0}
_COORDINATES = (("x", 0), ("y", 1), ("to_x", 0), ("to_y", 1))  # field, axis (0: width, 1: height)


def _env(*names: str) -> str:
    return next((os.environ[name] for name in names if os.environ.get(name)), "")


@dataclass(frozen=True)
class LLMConfig:
    """Where the model is and how to talk to it; endpoint, model and key default to environment variables."""

    base_url: str = field(default_factory=lambda: _env("WEAVEGYM_LLM_BASE_URL", "OPENAI_BASE_URL"))
    model: str = field(default_factory=lambda: _env("WEAVEGYM_LLM_MODEL"))
    api_key: str = field(default_factory=lambda: _env("WEAVEGYM_LLM_API_KEY", "OPENAI_API_KEY"), repr=False)
    timeout_s: float = 60.0  # per request (read/write/pool); connecting gets at most connect_timeout_s
    connect_timeout_s: float = 10.0
    max_retries: int = 3  # after connection errors, timeouts, 429 and 5xx
    backoff_s: float = 1.0  # first retry delay, doubled each retry, unless the server sends Retry-After
    max_backoff_s: float = 60.0
    temperature: float = 0.0
    max_tokens: int = 1024
    context_budget_chars: int = 200_000  # about 50k tokens; images count ~4*w*h/750 characters each
    max_images: int = 3  # only the newest screenshots are sent as images
    image_scale: float = 0.5
    image_format: str = "png"  # png, jpeg or webp
    scale_coordinates: bool = True  # tools speak screenshot pixels; False: real screen pixels
    tool_choice: str = "auto"  # "required" where the server supports it
    max_terminal_chars: int = 4000  # the tail of longer command output is shown
    extra_body: Mapping[str, Any] = field(default_factory=dict)  # merged into every request (server extras)

    def __post_init__(self) -> None:
        if self.image_format not in ("png", "jpeg", "webp"):
            raise ValueError(f"image_format must be png, jpeg or webp, not {self.image_format!r}")
        if not 0 < self.image_scale <= 1:
            raise ValueError(f"image_scale must be in (0, 1], not {self.image_scale}")
        if self.timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise ValueError("timeout_s and connect_timeout_s must be positive")
        if self.max_retries < 0 or self.max_images < 0 or self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError("max_retries, max_images, backoff_s and max_backoff_s must not be negative")
        if self.tool_choice not in ("auto", "required"):
            raise ValueError(f"tool_choice must be 'auto' or 'required', not {self.tool_choice!r}")


class LLMError(WeaveGymError):
    """The model endpoint failed; ``status`` is the last HTTP status, if there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LLMRequestError(LLMError):
    """The server refused the request (a 4xx other than 429): retrying the same request cannot help."""


class LLMUnavailableError(LLMError):
    """The server kept failing (connection errors, timeouts, 429, 5xx) through every retry."""


@dataclass(frozen=True)
class _Pending:
    """The tool call the env is executing; its result goes into a tool message on the next turn."""

    call_id: str
    name: str


class LLMAgent:
    """One chat per episode; ``act`` sends one request and returns the model's first tool call."""

    name = "llm"
    privileged = False

    def __init__(self, config: LLMConfig | None = None, *, http: httpx.Client | None = None) -> None:
        self.config = config = config if config is not None else LLMConfig()
        if not config.base_url:
            raise ValueError("no model endpoint: set WEAVEGYM_LLM_BASE_URL (or OPENAI_BASE_URL) or pass base_url, "
                             "e.g. http://127.0.0.1:8000/v1")
        if not config.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {config.base_url!r}")
        if not config.model:
            raise ValueError("no model: set WEAVEGYM_LLM_MODEL or pass model")
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        try:  # here, not at import: `weavegym run --agent oracle` must work without the llm extra
            import httpx
        except ModuleNotFoundError as exc:
            raise missing_extra(exc) from None
        self._httpx = httpx
        self._owns_http = http is None
        self._http = http if http is not None else httpx.Client(
            timeout=httpx.Timeout(config.timeout_s, connect=min(config.connect_timeout_s, config.timeout_s)))
        self._headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self.usage: dict[str, int] = {"requests": 0, "retries": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self._messages: list[lm.Message] = []
        self._episode: EpisodeStart | None = None

    # -- Agent interface ----------------------------------------------------------------------
    def start(self, episode: EpisodeStart) -> None:
        cfg = self.config
        self._episode = episode
        self._image_size = lm.scaled_size(episode.screen, cfg.image_scale)
        self._tools = tool_schema(self._image_size if cfg.scale_coordinates else episode.screen)
        self._messages = [{"role": "system",
                           "content": lm.system_prompt(self._image_size, episode.screen, cfg.scale_coordinates)}]
        self._step = 0
        self._pending: _Pending | None = None
        self._notes: list[str] = []
        self._shown: tuple[str, int] | None = None  # the terminal output and exit code the model last saw

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> ActionLike:
        if self._episode is None:
            raise RuntimeError("call start() before act()")
        last_kind = self._report_pending(obs, info)
        self._messages.append(self._user_turn(obs, info, last_kind))
        reply = self._complete()
        action = self._take(reply)
        self._step += 1
        return action

    def transcript(self) -> list[dict[str, Any]] | None:
        return lm.transcript(self._messages)

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    # -- turns --------------------------------------------------------------------------------
    def _report_pending(self, obs: dict[str, Any], info: dict[str, Any]) -> str | None:
        """Answer the previous tool call, so every assistant tool call is followed by its result."""
        pending, self._pending = self._pending, None
        if pending is None:
            return None
        error = info.get("action_error")
        exit_code = int(np.asarray(obs.get("exit_code", -1))) if pending.name in CLI_KINDS else None
        content = lm.tool_result(pending.name, error, exit_code)
        if error and self._scales():
            sx, sy = self._factors()
            content += (f" (coordinates in this message are real-screen pixels; one screenshot pixel is "
                        f"{sx:g}x{sy:g} of them)")
        self._messages.append({"role": "tool", "tool_call_id": pending.call_id, "content": content})
        return pending.name

    def _user_turn(self, obs: dict[str, Any], info: dict[str, Any], last_kind: str | None) -> lm.Message:
        assert self._episode is not None
        terminal = (str(obs.get("terminal", "")), int(np.asarray(obs.get("exit_code", -1))))
        show = self._shown is None or last_kind in CLI_KINDS or terminal != self._shown
        self._shown = terminal
        first = self._step == 0
        instruction = (self._episode.instruction or str(obs.get("instruction", ""))) if first else None
        text = lm.observation_text(self._step, obs, info, instruction=instruction, show_terminal=show,
                                   max_terminal_chars=self.config.max_terminal_chars, notes=self._notes)
        self._notes = []
        content: list[Any] = [{"type": "text", "text": text}]
        pixels = obs.get("screen")
        if pixels is not None:
            content.append(lm.encode_screenshot(np.asarray(pixels), self._step, self._image_size,
                                                self.config.image_format))
        return {"role": "user", "content": content, "_step": self._step}

    def _take(self, reply: Mapping[str, Any]) -> ActionLike:
        """Record the assistant's reply and turn its first tool call into the env's action."""
        calls = reply.get("tool_calls") or []
        text = reply.get("content") if isinstance(reply.get("content"), str) else ""
        if not calls:
            self._messages.append({"role": "assistant", "content": text})
            self._notes.append(lm.CALL_A_TOOL)
            return dict(WAIT)
        call = calls[0] if isinstance(calls[0], Mapping) else {}
        function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
        name = function.get("name")
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {})
        call_id = str(call.get("id") or f"call_{self._step}")
        tool_call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        self._messages.append({"role": "assistant", "content": text or None, "tool_calls": [tool_call]})
        if len(calls) > 1:
            self._notes.append(f"You called {len(calls)} tools in one reply; only the first ({name}) was executed. "
                               "Call exactly one tool per turn.")
        self._pending = _Pending(call_id, str(name))
        return self._to_screen(tool_call)

    def _scales(self) -> bool:
        assert self._episode is not None
        return self.config.scale_coordinates and self._image_size != tuple(self._episode.screen)

    def _factors(self) -> tuple[float, float]:
        assert self._episode is not None
        return (self._episode.screen[0] / self._image_size[0], self._episode.screen[1] / self._image_size[1])

    def _to_screen(self, tool_call: dict[str, Any]) -> dict[str, Any]:
        """A copy of the call with screenshot coordinates mapped onto the real screen (pixel centres)."""
        out = {**tool_call, "function": dict(tool_call["function"])}
        if not self._scales():
            return out
        try:
            args = json.loads(out["function"]["arguments"])
        except ValueError:
            return out  # the env reports the bad JSON to the model
        if not isinstance(args, dict):
            return out
        assert self._episode is not None
        factors = self._factors()
        for key, axis in _COORDINATES:
            value = args.get(key)
            if not isinstance(value, int | float) or isinstance(value, bool) or not np.isfinite(value):
                continue  # not a number: the env rejects it with a message about the field
            if 0 <= value < self._image_size[axis]:
                args[key] = min(int((value + 0.5) * factors[axis]), self._episode.screen[axis] - 1)
            else:
                args[key] = round(value * factors[axis])  # still off the screen, and the env says so
        out["function"]["arguments"] = json.dumps(args)
        return out

    # -- HTTP -----------------------------------------------------------------------------------
    def _complete(self) -> Mapping[str, Any]:
        cfg = self.config
        body = {"model": cfg.model, "messages": lm.fit(self._messages, cfg.max_images, cfg.context_budget_chars),
                "tools": self._tools, "tool_choice": cfg.tool_choice, "temperature": cfg.temperature,
                "max_tokens": cfg.max_tokens, **cfg.extra_body}
        data = self._post(body)
        usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else {}
        for key in ("prompt_tokens", "completion_tokens"):
            if isinstance(usage.get(key), int):
                self.usage[key] += usage[key]
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise LLMError(f"{self.url} answered without choices[0].message: {json.dumps(data)[:300]}") from None
        if not isinstance(message, Mapping):
            raise LLMError(f"{self.url} answered with a non-object message: {message!r:.300}")
        return message

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST with retries on transient failures; anything else raises at once with the server's words."""
        cfg = self.config
        problem, status = "", None
        for attempt in range(cfg.max_retries + 1):
            if attempt:
                self.usage["retries"] += 1
            self.usage["requests"] += 1
            wait: float | None = None
            try:
                response = self._http.post(self.url, json=body, headers=self._headers)
            except (self._httpx.TimeoutException, self._httpx.NetworkError, self._httpx.RemoteProtocolError) as exc:
                problem, status = f"{type(exc).__name__}: {exc or 'no details'}", None
            else:
                status = response.status_code
                if response.is_success:
                    try:
                        data = response.json()
                    except ValueError:
                        raise LLMError(f"{self.url} answered HTTP {status} with non-JSON: {response.text[:300]!r}",
                                       status) from None
                    if not isinstance(data, dict):
                        raise LLMError(f"{self.url} answered with a JSON {type(data).__name__}, not an object", status)
                    return data
                problem = f"HTTP {status}: {_error_text(response)}"
                if status != 429 and status < 500:
                    raise LLMRequestError(f"{self.url} refused the request ({problem})", status)
                wait = _retry_after(response)
            if attempt < cfg.max_retries:
                delay = wait if wait is not None else cfg.backoff_s * 2**attempt
                time.sleep(min(delay, cfg.max_backoff_s))
        raise LLMUnavailableError(f"{self.url} failed {cfg.max_retries + 1} time(s), giving up; last error: {problem}",
                                  status)


def _error_text(response: httpx.Response) -> str:
    """The server's own error message (OpenAI's {"error": {"message"}} shape), else the start of the body."""
    try:
        error = response.json().get("error")
        message = error.get("message") if isinstance(error, Mapping) else error
        if message:
            return str(message)[:500]
    except (ValueError, AttributeError):
        pass
    return response.text[:500] or response.reason_phrase


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds the server asked us to wait (Retry-After as seconds or an HTTP date), if it said."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
