"""The one small interface every baseline policy implements, so a runner can drive any of them the same way.

A runner calls ``start`` once per episode with an :class:`EpisodeStart`, then ``act`` after every observation
until the episode ends, and reads ``transcript`` for the log. Only the oracle is *privileged*: for it alone the
runner passes the task's ground truth (in ``oracle_context``); every other policy must work from what it sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from weavegym.envs.task import ActionLike, OracleContext

if TYPE_CHECKING:
    import gymnasium

    from weavegym.envs.weave_env import WeaveEnv

@dataclass(frozen=True)
class EpisodeStart:
    """What an agent learns when an episode begins; ``oracle_context`` is set only for privileged agents."""

    task_id: str
    domain: str
    instruction: str
    screen: tuple[int, int]  # (width, height) of the guest screen, the range of GUI coordinates
    seed: int
    action_space: gymnasium.spaces.Space | None = None
    oracle_context: OracleContext | None = None

    @classmethod
    def from_env(cls, env: WeaveEnv, obs: dict[str, Any], info: dict[str, Any], seed: int, *,
                 privileged: bool = False) -> EpisodeStart:
        """Describe the episode ``env.reset(seed=seed)`` just began; the truth is included only if ``privileged``."""
        if env.prepared is None:
            raise ValueError("call env.reset() before describing the episode")
        width, height = env.config.screen_size
        screen = (int(width), int(height))
        context = (OracleContext(env.prepared.params, env.task.oracle_truth(env.prepared.truth), screen, obs, info)
                   if privileged else None)
        return cls(task_id=env.task.id, domain=env.task.domain, instruction=str(info.get("instruction", "")),
                   screen=screen, seed=seed, action_space=env.action_space, oracle_context=context)


@runtime_checkable
class Policy(Protocol):
    """A policy over whole episodes; ``act`` returns any action form the env's ``step`` accepts."""

    name: str
    privileged: bool  # True only for the oracle: the runner then passes the task's truth

    def start(self, episode: EpisodeStart) -> None:
        """Forget the previous episode and prepare for this one."""
        ...

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> ActionLike:
        """The next action: a dict, call text, or an OpenAI-style tool call."""
        ...

    def transcript(self) -> list[dict[str, Any]] | None:
        """The episode's chat messages (JSON-ready) for LLM agents; None for agents that do not chat."""
        ...

    def close(self) -> None:
        """Release connections or generators; the agent is not used afterwards."""
        ...
