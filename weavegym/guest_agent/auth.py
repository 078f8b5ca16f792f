"""Per-VM token authentication for every RPC, and where the token comes from.

The token reaches a VM from outside the guest (SMBIOS OEM strings, readable
by root only), so a process of the desktop user cannot learn it and drive the
agent's privileged paths.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable
from typing import Any

import grpc

SMBIOS_OEM_STRINGS = "/sys/firmware/dmi/entries/11-0/raw"
SMBIOS_TOKEN_PREFIX = "weavegym-token="
MIN_TOKEN_LENGTH = 16


def read_token_file(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        token = fh.read().strip()
    return _validated(token, path)


def read_smbios_token(path: str = SMBIOS_OEM_STRINGS) -> str:
    """Find ``weavegym-token=…`` among the SMBIOS type-11 OEM strings."""
    with open(path, "rb") as fh:
        raw = fh.read()
    if len(raw) < 5 or raw[0] != 11:
        raise ValueError(f"{path} is not an SMBIOS type 11 (OEM strings) structure")
    header_len = raw[1]
    for entry in raw[header_len:].split(b"\x00"):
        text = entry.decode("utf-8", errors="replace")
        if text.startswith(SMBIOS_TOKEN_PREFIX):
            return _validated(text[len(SMBIOS_TOKEN_PREFIX) :], path)
    raise ValueError(f"no {SMBIOS_TOKEN_PREFIX!r} OEM string in {path}")


def _validated(token: str, source: str) -> str:
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(f"the token from {source} is shorter than {MIN_TOKEN_LENGTH} characters")
    return token


def new_token() -> str:
    return os.urandom(24).hex()


class TokenInterceptor(grpc.ServerInterceptor):
    """Rejects, with UNAUTHENTICATED, every call whose metadata lacks ``authorization: Bearer <token>``."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    def intercept_service(self, continuation: Callable, handler_call_details: Any) -> Any:
        handler = continuation(handler_call_details)
        metadata = dict(handler_call_details.invocation_metadata or ())
        presented = str(metadata.get("authorization", "")).encode()
        if handler is None or hmac.compare_digest(presented, self._expected):
            return handler
        return _deny_like(handler)


def _deny_like(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler of the same streaming shape as ``handler`` that only aborts."""

    def deny(_request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong agent token")

    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(deny)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(deny)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(deny)
    return grpc.unary_unary_rpc_method_handler(deny)
