"""A fresh TLS identity per agent, so the agent proves who it is before the host sends it anything.

The host makes the key and a self-signed certificate, hands both to the agent (``--tls-file``, or in a
VM a QEMU fw_cfg file that only root reads, ``--tls-fwcfg``) and trusts that one certificate only.
Whatever else answers on the agent's port, say a process that bound it after QEMU died, cannot finish
the TLS handshake, so it never receives the token or a request. The libvirt backend makes one per VM
for images whose manifest says ``agent_tls``; the local test agent uses it with
``LocalAgentConfig(tls=True)``.
"""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from weavegym.guest_agent.auth import TLS_SERVER_NAME, TlsIdentity

VALIDITY = datetime.timedelta(days=3650)  # the host checks the dates; a VM's life is far shorter


def new_agent_identity() -> TlsIdentity:
    """An ECDSA P-256 key and a self-signed certificate for TLS_SERVER_NAME (P-256: cheap to use under TCG)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, TLS_SERVER_NAME)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(TLS_SERVER_NAME)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return TlsIdentity(key_pem, cert.public_bytes(serialization.Encoding.PEM))
