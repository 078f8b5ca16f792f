"""Building a reference policy by name, the way the CLI's ``--agent`` and the runner's workers do."""

from __future__ import annotations

from typing import Any

from weavegym.baselines.llm_agent import LLMAgent, LLMConfig
from weavegym.baselines.policy import Policy
from weavegym.baselines.simple_agents import NoopAgent, OracleAgent, RandomAgent

POLICY_NAMES: tuple[str, ...] = ("random", "noop", "oracle", "llm")


def make_policy(name: str, **options: Any) -> Policy:
    """Build a baseline agent by name; ``options`` go to its constructor (for ``llm``: LLMConfig fields or config=)."""
    if name == "random":
        return RandomAgent(**options)
    if name == "noop":
        return NoopAgent(**options)
    if name == "oracle":
        return OracleAgent(**options)
    if name == "llm":
        config = options.pop("config", None)
        if config is None:
            config = LLMConfig(**options)
        elif options:
            raise TypeError(f"give either config= or LLMConfig fields, not both (got {', '.join(sorted(options))})")
        return LLMAgent(config)
    raise ValueError(f"unknown agent {name!r}; known agents: {', '.join(POLICY_NAMES)}")
