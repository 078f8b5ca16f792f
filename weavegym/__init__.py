"""weavegym: Gymnasium environments whose episodes run inside real desktop VMs.

The import root, laid out by layer (bottom first; a package imports only from the layers below it,
which ``tests/test_layers.py`` enforces):

- ``core``: errors, config, records, the guest's accounts: what every layer shares;
  ``agent``: the generated host<->guest protocol.
- ``guest_agent`` (runs inside the guest; imports only ``agent``) and ``vm_images`` (image recipes).
- ``machine``: a VM or desktop machine and the client that talks to its guest agent.
- ``evaluators``: probes, scoring, trajectory rules.
- ``envs``: the task format, the tasks, actions and spaces, and ``WeaveEnv``.
- ``baselines`` (policies), ``testing`` (local harness), ``distributed`` (Ray).
- ``reporting`` and ``ops`` (doctor, gc, bench, validate); then the CLI.

Importing the package registers every task as a Gymnasium id (``Weave-<Domain>-<N>``).
"""

from weavegym.core.config import EnvConfig
from weavegym.core.errors import (
    AgentAuthError,
    AgentError,
    AgentInternalError,
    AgentRequestError,
    AgentTimeoutError,
    AgentUnavailableError,
    BackendError,
    EpisodeError,
    GuestPathNotFoundError,
    HostSetupError,
    InvalidActionError,
    TaskError,
    WeaveGymError,
)
from weavegym.core.version import __version__
from weavegym.envs.actions import Action, parse_action, tool_schema
from weavegym.envs.registration import register_tasks
from weavegym.envs.task import Task
from weavegym.envs.tasks import all_tasks, get_task
from weavegym.envs.weave_env import WeaveEnv
from weavegym.machine.guest_client import ExecResult, GuestClient

__all__ = [
    "Action", "AgentAuthError", "AgentError", "AgentInternalError", "AgentRequestError", "AgentTimeoutError",
    "AgentUnavailableError", "BackendError", "EnvConfig", "EpisodeError", "ExecResult", "GuestClient",
    "GuestPathNotFoundError", "HostSetupError", "InvalidActionError", "Task", "TaskError", "WeaveEnv",
    "WeaveGymError", "__version__", "all_tasks", "get_task", "parse_action", "tool_schema",
]

register_tasks()
