"""The gateway's view of a call in flight (:class:`InflightCall`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from agentbolt.gateway.origin import CallOrigin

__all__ = ["InflightCall"]


@dataclass(slots=True)
class InflightCall:
    """One agent call on its way through the gateway: whose it is, what was asked, when, by which replica
    and policy version; the gateway records it as a span when it ends."""

    rollout_id: str
    attempt_id: str
    request: dict[str, Any]
    version: int | None
    streamed: bool
    replica: int = 0
    """Set by the gateway before each try (a call may move after a replica is taken out)."""
    origin: CallOrigin | None = None
    retries: int = 0
    placed: bool = False
    """The call is counted in flight on ``replica`` (:class:`~agentbolt.gateway.placement.ReplicaPlacement`)."""
    attributes: dict[str, Any] = field(default_factory=dict)
    wall0: float = field(default_factory=time.time)
    t0: float = field(default_factory=time.perf_counter)
