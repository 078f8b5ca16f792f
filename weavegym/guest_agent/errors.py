"""Errors a handler raises to reject a request; the server turns them into gRPC statuses.

Handlers raise these instead of touching the gRPC context, so the X, process
and file modules stay testable without a server.
"""

from __future__ import annotations

import grpc


class RequestError(Exception):
    """A request the agent refuses. ``code`` is the gRPC status sent back."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class InvalidArgument(RequestError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(RequestError):
    code = grpc.StatusCode.NOT_FOUND


class FailedPrecondition(RequestError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class PermissionDenied(RequestError):
    code = grpc.StatusCode.PERMISSION_DENIED


class DisplayUnavailable(FailedPrecondition):
    """The X server cannot be reached (not started yet, or gone)."""
