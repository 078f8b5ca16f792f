"""Reference agents (random, noop, oracle, llm) that implement one small agent interface.

``make_agent(name, **options)`` builds any of them; :class:`Agent` is the interface a runner drives and
:class:`EpisodeStart` what an agent is told when an episode begins. ``ScriptedLLMServer`` is a local
OpenAI-compatible server that answers from a script, for testing the LLM agent without a model.

Re-exports are resolved lazily so that using the simple agents does not import the HTTP client.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AGENT_NAMES": "weavegym.baselines.agent",
    "Agent": "weavegym.baselines.agent",
    "EpisodeStart": "weavegym.baselines.agent",
    "make_agent": "weavegym.baselines.agent",
    "RandomAgent": "weavegym.baselines.simple_agents",
    "NoopAgent": "weavegym.baselines.simple_agents",
    "OracleAgent": "weavegym.baselines.simple_agents",
    "LLMAgent": "weavegym.baselines.llm_agent",
    "LLMConfig": "weavegym.baselines.llm_agent",
    "LLMError": "weavegym.baselines.llm_agent",
    "LLMRequestError": "weavegym.baselines.llm_agent",
    "LLMUnavailableError": "weavegym.baselines.llm_agent",
    "ScriptedLLMServer": "weavegym.baselines.scripted_llm_server",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'weavegym.baselines' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
