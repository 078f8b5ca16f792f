"""Policies: the reference agents (random, noop, oracle, llm) and the adversaries of ``weavegym validate``.

The policies are called "agents" on the command line (``weavegym run --agent oracle``), as benchmarks do; in
code they are policies, so that "agent" keeps one meaning: the program inside the guest, the *guest agent*
(``weavegym.guest_agent``). The LLM baseline keeps its name, ``LLMAgent``. ``make_policy(name, **options)``
builds any reference policy; :class:`Policy` is the interface a runner drives and :class:`EpisodeStart` what a
policy is told when an episode begins."""

from weavegym.baselines.factory import POLICY_NAMES, make_policy
from weavegym.baselines.llm_agent import LLMAgent, LLMConfig, LLMError, LLMRequestError, LLMUnavailableError
from weavegym.baselines.policy import EpisodeStart, Policy
from weavegym.baselines.simple_agents import NoopAgent, OracleAgent, RandomAgent

__all__ = [
    "POLICY_NAMES",
    "EpisodeStart",
    "LLMAgent",
    "LLMConfig",
    "LLMError",
    "LLMRequestError",
    "LLMUnavailableError",
    "NoopAgent",
    "OracleAgent",
    "Policy",
    "RandomAgent",
    "make_policy",
]
