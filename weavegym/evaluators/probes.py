"""The one probe object checkers get: every state probe of the finished episode behind one facade.

Probes are read-only and run through the guest agent as root once the episode
is over. They fetch raw material (bytes, /proc tables, ps output) and parse it
on the host, so no checker logic and no ground truth ever enters the guest.
Conventions shared by all families: every call carries the probe's deadline;
an absent thing is an answer (None, False, MISSING, 0.0); only agent or guest
failures raise (``weavegym.core.errors.AgentError`` and subclasses).
"""

from __future__ import annotations

from weavegym.evaluators.probes_accounts import AccountProbe, TerminalProcess
from weavegym.evaluators.probes_files import DEFAULT_MAX_BYTES, FileProbe
from weavegym.evaluators.probes_media import MediaProbe
from weavegym.evaluators.probes_structured import MISSING, ROOT_SECTION, StructuredProbe, resolve_pointer
from weavegym.evaluators.probes_system import ListeningSocket, ProcessInfo, SystemProbe

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MISSING",
    "ROOT_SECTION",
    "FileProbe",
    "ListeningSocket",
    "Probe",
    "ProcessInfo",
    "TerminalProcess",
    "resolve_pointer",
]


class Probe(StructuredProbe, SystemProbe, MediaProbe, AccountProbe):
    """``Probe(client, timeout=30.0)``: files, structured files, system state and media in one object."""
