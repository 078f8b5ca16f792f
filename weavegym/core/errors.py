"""The one typed error hierarchy of weavegym's host side.

Everything the environment raises about itself (as opposed to the agent's bad
actions, which are reported in ``info`` and never raised) derives from
``WeaveGymError``, so callers can catch one base class and still tell a dead
agent from a bad request.
"""

from __future__ import annotations


class WeaveGymError(Exception):
    """Base class of every error weavegym raises."""


class HostSetupError(WeaveGymError):
    """A host prerequisite is missing or broken (Xvfb, QEMU, libvirt, disk space…).

    The message always says how to fix it.
    """


class AgentError(WeaveGymError):
    """A call to the guest agent failed."""

    def __init__(self, message: str, *, method: str = "", code: str = "") -> None:
        super().__init__(message)
        self.method = method
        self.code = code


class AgentUnavailableError(AgentError):
    """The agent could not be reached (guest down, port closed, connection reset)."""


class AgentTimeoutError(AgentError):
    """The call did not finish before its deadline."""


class AgentAuthError(AgentError):
    """The agent refused the token."""


class AgentRequestError(AgentError, ValueError):
    """The agent rejected the request as malformed; it changed nothing in the guest."""


class GuestPathNotFoundError(AgentRequestError):
    """A path named in the request does not exist in the guest."""


class AgentInternalError(AgentError):
    """The agent failed while serving a valid request (an agent bug or a broken guest)."""


class BackendError(WeaveGymError):
    """The VM backend failed: the VM could not be created, started, snapshotted or reset."""


class VMStartError(BackendError):
    """The VM did not come up (domain creation failed or the agent never answered)."""


class SnapshotError(BackendError):
    """Saving or loading a VM snapshot failed."""


class InvalidActionError(WeaveGymError, ValueError):
    """An action could not be parsed or validated. The env reports it in ``info["action_error"]``."""


class TaskError(WeaveGymError):
    """A task definition is broken, or its setup failed inside the VM."""


class EpisodeError(WeaveGymError):
    """The episode API was misused, e.g. ``step()`` after the episode ended without a ``reset()``."""


class EvaluationError(WeaveGymError):
    """Scoring could not run because the environment failed: the guest agent or the VM went away, or the
    task's own checker is broken. The episode has no score; it is never a 0, which would blame the agent."""
