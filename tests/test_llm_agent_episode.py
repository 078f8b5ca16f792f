"""The llm baseline solves a real task on a real VM, talking to a scripted OpenAI-compatible server.

The "model" replays the task's oracle as tool calls, so the test exercises
everything between a chat-completions endpoint and the VM: screenshots sent as
images, tool calls parsed by the env, the tool-result chain, and the score.
"""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from weavegym.baselines.llm_agent import LLMAgent, LLMConfig
from weavegym.baselines.policy import EpisodeStart
from weavegym.envs.actions import parse_action
from weavegym.envs.task import OracleContext
from weavegym.envs.weave_env import WeaveEnv
from weavegym.testing.scripted_llm_server import ScriptedLLMServer

pytestmark = [pytest.mark.vm, pytest.mark.timeout(900)]


def test_llm_agent_solves_productivity_1_against_the_scripted_server() -> None:
    # A task whose oracle is fixed once the truth is known: the script is written before the episode runs
    # (DevOps-1's build id, for one, exists only once the repaired service runs).
    env = WeaveEnv("Weave-Productivity-1", prepared_states=True)  # a restore, not a boot: the agent is the subject
    try:
        obs, info = env.reset(seed=0)
        ctx = OracleContext(env.prepared.params, env.prepared.truth, env.config.screen_size, obs, info)
        calls = []
        for raw in env.task.oracle(ctx):
            action = parse_action(raw, env.config.screen_size).to_dict()
            calls.append({"name": action.pop("kind"), "arguments": action})
        with ScriptedLLMServer(calls) as server:
            agent = LLMAgent(LLMConfig(base_url=server.url, model="scripted", api_key="test",
                                       scale_coordinates=False, timeout_s=30))
            agent.start(EpisodeStart.from_env(env, obs, info, seed=0))
            for _ in range(len(calls) + 2):
                obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
                assert info["action_error"] is None, info["action_error"]
                if terminated or truncated:
                    break
            assert terminated and reward == 1.0, info["evaluation"]
            assert len(server.requests) == len(calls)
            first = server.requests[0]
            assert {t["function"]["name"] for t in first["tools"]} >= {"shell", "click", "type", "done"}
            image_parts = [p for m in first["messages"] if isinstance(m.get("content"), list)
                           for p in m["content"] if p.get("type") == "image_url"]
            assert image_parts, "the screenshot must be sent as an image"
            data = base64.b64decode(image_parts[-1]["image_url"]["url"].split(",", 1)[1])
            assert Image.open(io.BytesIO(data)).size == (640, 360)  # the 1280x720 screen at scale 0.5
            # The receipt's reference, filed by a shell call, is in the transcript.
            assert env.prepared.truth["reference"] in str(agent.transcript())
        agent.close()
    finally:
        env.close()
