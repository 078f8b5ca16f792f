"""Per-VM token authentication for every RPC, and where the token comes from.

The token reaches a VM from outside the guest (a QEMU fw_cfg entry, readable by
root only in the guest and passed to QEMU as a file, so it is on no command line),
so a process of either guest account cannot learn it and drive the agent's
privileged paths.
"""

from __future__ import annotations

import hmac
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

FW_CFG_TOKEN = "/sys/firmware/qemu_fw_cfg/by_name/opt/weavegym/token/raw"
FW_CFG_IDENTITY = "/sys/firmware/qemu_fw_cfg/by_name/opt/weavegym/identity/raw"
MIN_TOKEN_LENGTH = 16
# The name in every agent certificate. The host trusts exactly one certificate per VM (the one it made),
# so the name only has to match; what proves the agent is the private key.
TLS_SERVER_NAME = "weavegym-agent"
_PEM = re.compile(rb"-----BEGIN ([A-Z ]+)-----\r?\n.+?-----END \1-----\r?\n?", re.DOTALL)


@dataclass(frozen=True)
class TlsIdentity:
    """The agent's TLS key and certificate (PEM). The host made both and pins the certificate.

    So the agent proves who it is before the host sends anything: a process that took over the forwarded
    port (on the host, after QEMU died) cannot finish the handshake and never sees the token.
    """

    key_pem: bytes
    cert_pem: bytes

    def bundle(self) -> bytes:
        return self.key_pem + self.cert_pem

    @classmethod
    def from_bundle(cls, data: bytes, source: str = "the identity") -> TlsIdentity:
        blocks = {match.group(1).decode(): match.group(0) for match in _PEM.finditer(data)}
        key = next((block for name, block in blocks.items() if name.endswith("PRIVATE KEY")), None)
        cert = blocks.get("CERTIFICATE")
        if key is None or cert is None:
            raise ValueError(f"{source} holds no PEM private key and certificate")
        return cls(key, cert)


def read_token_file(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        token = fh.read().strip()
    return _validated(token, path)


def read_fwcfg_token(path: str = FW_CFG_TOKEN, wait_s: float = 30.0) -> str:
    """The token the host passed as a QEMU fw_cfg file (root-only in sysfs)."""
    return read_token_file(_await_fwcfg(path, wait_s))


def read_identity_file(path: str) -> TlsIdentity:
    with open(path, "rb") as fh:
        return TlsIdentity.from_bundle(fh.read(), path)


def read_fwcfg_identity(path: str = FW_CFG_IDENTITY, wait_s: float = 30.0) -> TlsIdentity:
    """The TLS key and certificate the host passed as a QEMU fw_cfg file (root-only in sysfs)."""
    return read_identity_file(_await_fwcfg(path, wait_s))


def _await_fwcfg(path: str, wait_s: float) -> str:
    """``path`` once it exists: the entry appears when the qemu_fw_cfg module is loaded, which udev may still
    be doing when the agent starts."""
    deadline = time.monotonic() + wait_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise OSError(f"{path} did not appear within {wait_s:.0f} s (no fw_cfg entry, or qemu_fw_cfg not loaded)")
        time.sleep(0.1)  # polling sysfs for the entry, bounded by the deadline above
    return path


def _validated(token: str, source: str) -> str:
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(f"the token from {source} is shorter than {MIN_TOKEN_LENGTH} characters")
    return token


def new_token() -> str:
    return os.urandom(24).hex()


class TokenInterceptor(grpc.ServerInterceptor):
    """Rejects, with UNAUTHENTICATED, every call whose metadata lacks ``authorization: Bearer <token>``.

    With ``reread``, a call whose token does not match reads the token's source again before it is refused,
    and the fresh value replaces the old one. A VM restored from a prepared state that many envs share
    wakes with the preparing VM's token in RAM, while its own QEMU's fw_cfg entry (read from the device,
    not from RAM) holds the token its host made: the first call with that token switches the agent over,
    and the old token stops working.
    """

    def __init__(self, token: str, reread: Callable[[], str] | None = None) -> None:
        self._expected = f"Bearer {token}".encode()
        self._reread = reread

    def accepts(self, presented: bytes) -> bool:
        if hmac.compare_digest(presented, self._expected):
            return True
        if self._reread is None:
            return False
        try:
            fresh = f"Bearer {self._reread()}".encode()
        except (OSError, ValueError):
            return False
        self._expected = fresh  # one bytes object swapped whole: readers see the old or the new token
        return hmac.compare_digest(presented, fresh)

    def intercept_service(self, continuation: Callable, handler_call_details: Any) -> Any:
        handler = continuation(handler_call_details)
        metadata = dict(handler_call_details.invocation_metadata or ())
        presented = str(metadata.get("authorization", "")).encode()
        if handler is None or self.accepts(presented):
            return handler
        return _deny_like(handler)


def live_tls_credentials(initial: TlsIdentity, reread: Callable[[], TlsIdentity] | None) -> grpc.ServerCredentials:
    """Server credentials that, with ``reread``, load the identity again before every TLS handshake.

    For the same reason as the token: a restored clone's agent holds the preparing VM's key in RAM, while
    its fw_cfg entry holds the one its host made and pins. The new key is served from the next handshake
    on (the host reconnects after every restore).
    """
    def config(identity: TlsIdentity) -> Any:
        return grpc.ssl_server_certificate_configuration([(identity.key_pem, identity.cert_pem)])

    if reread is None:
        return grpc.ssl_server_credentials([(initial.key_pem, initial.cert_pem)])
    current = [initial]

    def fetch() -> Any:
        try:
            fresh = reread()
        except (OSError, ValueError):
            return None  # keep serving the identity we have
        if fresh == current[0]:
            return None
        current[0] = fresh
        return config(fresh)

    return grpc.dynamic_ssl_server_credentials(config(initial), fetch)


def _deny_like(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler that aborts at once, without waiting for the request.

    It is request-streaming whatever the method's shape (on the wire one request message is a stream of
    one): grpc hands a unary handler its request only once the whole body has arrived, so a refusal shaped
    like a unary method would hold a worker for as long as a caller without the token cared to stall. A
    streaming one gets an iterator it never reads. The response side keeps the method's shape.
    """

    def deny(_requests: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong agent token")

    if handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(deny)
    return grpc.stream_unary_rpc_method_handler(deny)
