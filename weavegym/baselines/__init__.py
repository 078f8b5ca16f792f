"""Policies: the reference agents (random, noop, oracle, llm) and the adversaries of ``weavegym validate``.

"Agent" here means a policy that picks actions; the program inside the guest is the *guest agent*
(``weavegym.guest_agent``). ``make_agent(name, **options)`` builds any reference policy; :class:`Agent`
is the interface a runner drives and :class:`EpisodeStart` what a policy is told when an episode begins.
"""

from weavegym.baselines.agent import Agent, EpisodeStart
from weavegym.baselines.factory import AGENT_NAMES, make_agent
from weavegym.baselines.llm_agent import LLMAgent, LLMConfig, LLMError, LLMRequestError, LLMUnavailableError
from weavegym.baselines.simple_agents import NoopAgent, OracleAgent, RandomAgent

__all__ = [
    "AGENT_NAMES", "Agent", "EpisodeStart", "LLMAgent", "LLMConfig", "LLMError", "LLMRequestError",
    "LLMUnavailableError", "NoopAgent", "OracleAgent", "RandomAgent", "make_agent",
]
