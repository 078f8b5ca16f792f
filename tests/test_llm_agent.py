"""LLMAgent against the local ScriptedLLMServer: request shape, retries, context budget, tool-call chain."""

from __future__ import annotations

import base64
import io
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image

from weavegym.baselines import llm_messages as lm
from weavegym.baselines.factory import make_policy
from weavegym.baselines.llm_agent import LLMAgent, LLMConfig, LLMRequestError, LLMUnavailableError
from weavegym.baselines.policy import EpisodeStart
from weavegym.envs.actions import parse_action, tool_schema
from weavegym.testing.scripted_llm_server import ScriptedLLMServer, check_messages

SCREEN = (320, 200)
IMAGE = (160, 100)  # SCREEN at the default image_scale of 0.5
CLICK = {"name": "click", "arguments": {"x": 10, "y": 20}}


def _obs(rng: np.random.Generator, terminal: str = "", exit_code: int = -1) -> dict[str, Any]:
    return {"screen": rng.integers(0, 256, (SCREEN[1], SCREEN[0], 3), dtype=np.uint8), "terminal": terminal,
            "exit_code": np.array(exit_code, dtype=np.int64), "instruction": "Fix the service."}


@pytest.fixture()
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture()
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(lambda messages: CLICK) as running:
        yield running


def _agent(server: ScriptedLLMServer, **options: Any) -> LLMAgent:
    config = LLMConfig(**{"base_url": server.url, "model": "test-model", "api_key": "", "backoff_s": 0.0, **options})
    agent = LLMAgent(config)
    agent.start(EpisodeStart("Weave-DevOps-1", "DevOps", "Fix the service.", SCREEN, seed=0))
    return agent


def _images(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    return [p["image_url"]["url"] for p in content if p.get("type") == "image_url"] if isinstance(content, list) else []


def _texts(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content or () if p.get("type") == "text")


def _decode(url: str) -> Image.Image:
    prefix = "data:image/png;base64,"
    assert url.startswith(prefix)
    return Image.open(io.BytesIO(base64.b64decode(url[len(prefix):])))


def _assert_chain(messages: list[dict[str, Any]]) -> None:
    """Every assistant tool call is answered by the very next tool message(s); no tool message is an orphan."""
    for i, message in enumerate(messages):
        ids = [call["id"] for call in message.get("tool_calls") or ()]
        if message["role"] == "assistant" and ids:
            following = messages[i + 1:i + 1 + len(ids)]
            assert [m["role"] for m in following] == ["tool"] * len(ids), (i, following)
            assert [m["tool_call_id"] for m in following] == ids
        if message["role"] == "tool":
            previous = messages[i - 1]
            assert previous["role"] in ("assistant", "tool")
            answered = [c["id"] for m in messages[:i] if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
            assert message["tool_call_id"] in answered


# -- the request and the reply --------------------------------------------------------------------
def test_request_carries_tools_screenshot_and_instruction(server: ScriptedLLMServer, rng: np.random.Generator
                                                          ) -> None:
    agent = _agent(server, api_key="secret", max_tokens=77)
    action = agent.act(_obs(rng), {"action_error": None})
    body = server.requests[0]
    assert body["model"] == "test-model" and body["max_tokens"] == 77 and body["temperature"] == 0.0
    assert body["tools"] == tool_schema(IMAGE)  # coordinates in screenshot pixels
    assert body["tool_choice"] == "auto"
    assert server.headers[0]["authorization"] == "Bearer secret"
    system, user = body["messages"]
    assert system["role"] == "system" and "exactly one tool" in system["content"]
    assert user["role"] == "user" and "Fix the service." in _texts(user)
    [url] = _images(user)
    assert _decode(url).size == IMAGE
    # The scripted click at (10, 20) in the half-size screenshot lands on the pixel centre on the real screen.
    parsed = parse_action(action, SCREEN)
    assert (parsed.kind, parsed.x, parsed.y) == ("click", 21, 41)
    agent.close()


def test_unscaled_coordinates_use_the_screen_schema(server: ScriptedLLMServer, rng: np.random.Generator) -> None:
    agent = _agent(server, scale_coordinates=False)
    action = agent.act(_obs(rng), {})
    assert server.requests[0]["tools"] == tool_schema(SCREEN)
    assert "downscaled to 160x100" in server.requests[0]["messages"][0]["content"]
    assert json.loads(action["function"]["arguments"]) == {"x": 10, "y": 20}
    full = _agent(server, image_scale=1.0)
    full.act(_obs(rng), {})
    assert server.requests[1]["tools"] == tool_schema(SCREEN)
    assert _decode(_images(server.requests[1]["messages"][-1])[0]).size == SCREEN


def test_screenshot_edges_map_inside_the_screen(rng: np.random.Generator) -> None:
    script = [{"name": "drag", "arguments": {"x": 0, "y": 0, "to_x": 159, "to_y": 99}},
              {"name": "click", "arguments": {"x": 160, "y": 5}}]
    with ScriptedLLMServer(script) as server:
        agent = _agent(server)
        drag = parse_action(agent.act(_obs(rng), {}), SCREEN)
        assert (drag.x, drag.y, drag.to_x, drag.to_y) == (1, 1, 319, 199)
        off = agent.act(_obs(rng), {})
        assert json.loads(off["function"]["arguments"])["x"] == 320  # still off-screen: the env will say so
        agent.act(_obs(rng), {"action_error": "click: x=320 is off the 320x200 screen"})
        tool = server.requests[2]["messages"][-2]
        assert tool["role"] == "tool" and "rejected" in tool["content"] and "real-screen pixels" in tool["content"]


# -- retries --------------------------------------------------------------------------------------
def test_retries_after_503_and_429_then_succeeds(server: ScriptedLLMServer, rng: np.random.Generator) -> None:
    server.fail_next(2, 503)
    server.fail_next(1, 429, {"Retry-After": "0"})
    agent = _agent(server, max_retries=3)
    assert parse_action(agent.act(_obs(rng), {}), SCREEN).kind == "click"
    assert len(server.requests) == 4
    assert agent.usage["retries"] == 3 and agent.usage["requests"] == 4


def test_retry_after_is_honoured(server: ScriptedLLMServer, rng: np.random.Generator) -> None:
    agent = _agent(server, backoff_s=30.0)  # exponential backoff would sleep 30 s
    server.fail_next(1, 429, {"Retry-After": "0"})
    start = time.monotonic()
    agent.act(_obs(rng), {})
    assert time.monotonic() - start < 5
    server.fail_next(1, 503, {"Retry-After": "0.4"})
    start = time.monotonic()
    agent.act(_obs(rng), {})
    assert time.monotonic() - start >= 0.4


def test_gives_up_after_max_retries(server: ScriptedLLMServer, rng: np.random.Generator) -> None:
    server.fail_next(10, 503)
    agent = _agent(server, max_retries=2)
    with pytest.raises(LLMUnavailableError, match=r"failed 3 time\(s\).*HTTP 503") as info:
        agent.act(_obs(rng), {})
    assert info.value.status == 503
    assert len(server.requests) == 3


def test_client_timeout_is_retried(server: ScriptedLLMServer, rng: np.random.Generator) -> None:
    server.stall_next(10.0)
    agent = _agent(server, timeout_s=0.3)
    start = time.monotonic()
    assert parse_action(agent.act(_obs(rng), {}), SCREEN).kind == "click"
    assert time.monotonic() - start < 5
    assert len(server.requests) == 2
    server.stall_next(10.0)
    once = _agent(server, timeout_s=0.3, max_retries=0)
    with pytest.raises(LLMUnavailableError, match="Timeout"):
        once.act(_obs(rng), {})


def test_connection_refused_is_retried_then_reported(rng: np.random.Generator) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    agent = LLMAgent(LLMConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=1, backoff_s=0.0))
    agent.start(EpisodeStart("Weave-DevOps-1", "DevOps", "x", SCREEN, 0))
    with pytest.raises(LLMUnavailableError, match=r"ConnectError") as info:
        agent.act(_obs(rng), {})
    assert agent.usage["requests"] == 2 and info.value.status is None


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_are_not_retried(server: ScriptedLLMServer, rng: np.random.Generator, status: int) -> None:
    server.fail_next(1, status)
    agent = _agent(server)
    with pytest.raises(LLMRequestError, match=f"HTTP {status}: scripted failure") as info:
        agent.act(_obs(rng), {})
    assert info.value.status == status
    assert len(server.requests) == 1


# -- the conversation ------------------------------------------------------------------------------
def test_only_the_newest_screenshots_are_sent(server: ScriptedLLMServer, rng: np.random.Generator) -> None:
    agent = _agent(server, max_images=3)
    for _ in range(7):
        agent.act(_obs(rng), {})
    for step, body in enumerate(server.requests):
        users = [m for m in body["messages"] if m["role"] == "user"]
        assert len(users) == step + 1  # the budget is large: every turn is kept
        with_image = [i for i, m in enumerate(users) if _images(m)]
        assert with_image == list(range(max(0, step - 2), step + 1))  # the newest three, in order
        for i, message in enumerate(users[:len(users) - len(with_image)]):
            assert f"[screenshot of step {i} dropped]" in _texts(message)
        _assert_chain(body["messages"])


def test_budget_drops_oldest_screenshots_before_turns() -> None:
    """With room for text and two images, the two newest images stay; with less, old turns go, never the ends."""
    shots = [lm.Screenshot(step, 1000, 750, f"data:image/png;base64,{step}") for step in range(6)]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    for step, shot in enumerate(shots):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"turn {step}"}, shot], "_step": step})
        if step < 5:
            call = {"id": f"c{step}", "type": "function", "function": {"name": "wait", "arguments": "{}"}}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"c{step}", "content": "ok"})
    text = lm.measure(lm.fit(messages, 0, 10**9))
    cost = shots[0].cost_chars
    assert cost == 4000
    two = lm.fit(messages, 5, text + 2 * cost + cost // 2)
    assert [i for i, m in enumerate(two) if m["role"] == "user" and _images(m)] == [13, 16]  # steps 4 and 5
    assert len(two) == len(messages)
    assert "_step" not in json.dumps(two)
    tight = lm.fit(messages, 5, 1)
    assert not any(_images(m) for m in tight)
    users = [_texts(m) for m in tight if m["role"] == "user"]
    assert users[0].startswith("turn 0") and "turn 5" in users[-1] and len(users) == 2
    assert "4 earlier turn(s), steps 1-4, omitted" in users[-1]
    assert tight[0] == {"role": "system", "content": "sys"}
    assert check_messages(tight) is None
    _assert_chain(tight)


def test_tiny_budget_keeps_a_valid_conversation(server: ScriptedLLMServer, rng: np.random.Generator) -> None:
    agent = _agent(server, context_budget_chars=1)
    for _ in range(5):
        agent.act(_obs(rng), {})
    last = server.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "user"]
    assert "Fix the service." in _texts(last[1]) and "omitted to fit the context budget" in _texts(last[-1])
    assert not any(_images(m) for m in last)


def test_reply_without_tool_call_becomes_wait_and_a_reminder(rng: np.random.Generator) -> None:
    with ScriptedLLMServer([{"content": "Let me think."}, CLICK]) as server:
        agent = _agent(server)
        action = agent.act(_obs(rng), {})
        assert action == {"kind": "wait", "seconds": 1.0}
        assert parse_action(action, SCREEN).kind == "wait"
        assert parse_action(agent.act(_obs(rng), {}), SCREEN).kind == "click"
        second = server.requests[1]["messages"]
        assert second[2] == {"role": "assistant", "content": "Let me think."}
        assert second[3]["role"] == "user" and "did not call a tool" in _texts(second[3])
        assert not any(m["role"] == "tool" for m in second)


def test_tool_call_chain_stays_valid(rng: np.random.Generator) -> None:
    script = [CLICK, {"content": "hmm"}, {"tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}, CLICK]},
              {"name": "nonsense", "arguments": "{not json"}, CLICK, {"name": "done", "arguments": {}}]
    with ScriptedLLMServer(script) as server:
        agent = _agent(server)
        kinds = []
        for step in range(len(script)):
            error = "unknown tool 'nonsense'" if step == 4 else None
            obs = _obs(rng, "file.txt\n", 0) if step >= 3 else _obs(rng)
            action = agent.act(obs, {"action_error": error})
            kinds.append(action.get("kind") or action["function"]["name"])
        assert kinds == ["click", "wait", "shell", "nonsense", "click", "done"]
        for body in server.requests:
            _assert_chain(body["messages"])
        final = server.requests[-1]["messages"]
        tools = [m for m in final if m["role"] == "tool"]
        assert len(tools) == 4 and "shell: executed (exit code 0)" in tools[1]["content"]
        assert "rejected" in tools[2]["content"] and "unknown tool" in tools[2]["content"]
        after_shell = _texts(server.requests[3]["messages"][-1])
        assert "file.txt" in after_shell and "exit code 0" in after_shell
        assert "only the first (shell) was executed" in after_shell
        assert "unknown tool 'nonsense'" in _texts(server.requests[4]["messages"][-1])


def test_transcript_is_compact_json(server: ScriptedLLMServer, rng: np.random.Generator) -> None:
    agent = _agent(server)
    for _ in range(4):
        agent.act(_obs(rng), {})
    transcript = agent.transcript()
    assert transcript is not None
    dumped = json.dumps(transcript)
    assert "base64" not in dumped and "data:image" not in dumped
    assert [m["role"] for m in transcript] == ["system", *(["user", "assistant", "tool"] * 3), "user", "assistant"]
    assert [_images(m) for m in transcript if m["role"] == "user"] == [
        [f"<image: step {i}, 160x100>"] for i in range(4)]
    assert len(dumped) < 10_000


# -- configuration and the server itself ------------------------------------------------------------
def test_config_defaults_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WEAVEGYM_LLM_BASE_URL", "OPENAI_BASE_URL", "WEAVEGYM_LLM_MODEL", "WEAVEGYM_LLM_API_KEY",
                 "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="WEAVEGYM_LLM_BASE_URL"):
        make_policy("llm")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://a/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-open")
    monkeypatch.setenv("WEAVEGYM_LLM_MODEL", "qwen")
    config = LLMConfig()
    assert (config.base_url, config.model, config.api_key) == ("http://a/v1", "qwen", "sk-open")
    assert "sk-open" not in repr(config)
    monkeypatch.setenv("WEAVEGYM_LLM_BASE_URL", "http://b/v1")
    monkeypatch.setenv("WEAVEGYM_LLM_API_KEY", "")
    config = LLMConfig()
    assert (config.base_url, config.api_key) == ("http://b/v1", "sk-open")
    with pytest.raises(ValueError, match="image_scale"):
        LLMConfig(image_scale=0)


def test_server_lists_its_model_and_refuses_broken_chains(server: ScriptedLLMServer) -> None:
    assert server.url.endswith("/v1")
    with httpx.Client(base_url=server.url, timeout=5) as client:
        assert client.get("/models").json()["data"][0]["id"] == "scripted"
        orphan = {"model": "m", "messages": [{"role": "user", "content": "hi"},
                                             {"role": "tool", "tool_call_id": "x", "content": "ok"}]}
        reply = client.post("/chat/completions", json=orphan)
        assert reply.status_code == 400 and "preceding message with 'tool_calls'" in reply.json()["error"]["message"]
        ok = client.post("/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert ok.status_code == 200
        call = ok.json()["choices"][0]["message"]["tool_calls"][0]
        assert call["function"] == {"name": "click", "arguments": json.dumps(CLICK["arguments"])}
        assert client.post("/nowhere", json={}).status_code == 404
    assert len(server.requests) == 2  # only chat-completions bodies are recorded
