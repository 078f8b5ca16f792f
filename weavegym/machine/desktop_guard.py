"""The host's view of the guest agent's desktop guard (guest_agent/x_guard.py): what it recorded, typed.

Kept apart from the client so the evaluation's rule and the tests read one small dataclass, not protobuf.
"""

from __future__ import annotations

from dataclasses import dataclass

from weavegym.agent.v1 import agent_pb2 as pb


@dataclass(frozen=True)
class ChannelCrossing:
    time: float  # guest wall clock
    kind: str  # "access-list" | "access-control-off" | "x-client"
    detail: str


@dataclass(frozen=True)
class GuardReport:
    armed: bool
    armed_at: float
    crossings: tuple[ChannelCrossing, ...]
    crossings_total: int
    checks: int
    error: str = ""


def guard_report(msg: pb.GuardReport) -> GuardReport:
    return GuardReport(armed=msg.armed, armed_at=msg.armed_at, crossings_total=msg.crossings_total,
                       checks=msg.checks, error=msg.error,
                       crossings=tuple(ChannelCrossing(c.time, c.kind, c.detail) for c in msg.crossings))
