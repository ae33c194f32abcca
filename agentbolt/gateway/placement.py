"""Which engine replica answers a rollout's call: sticky, load-aware, and around dead replicas.

* A new rollout goes to the healthy replica with the fewest calls in flight (ties: the
  fewest rollouts pinned to it, then the lowest index) and is pinned there.
* A pinned rollout stays on its replica while that replica is healthy: its earlier turns
  are in that replica's prefix cache.
* :meth:`ReplicaPlacement.mark_down` takes a replica out for ``cooldown_s`` and unpins its
  rollouts: each is placed again (as a new one) on its next call. When the cool-down has passed the
  replica is *due for a probe* (:meth:`~ReplicaPlacement.due_for_probe`): whoever owns the
  placement checks it and calls :meth:`~ReplicaPlacement.mark_up` or ``mark_down`` again.
  The gateway probes with :meth:`~agentbolt.engines.engine.Engine.probe`.
* With every replica down, :meth:`~ReplicaPlacement.replica_for` raises
  :class:`NoHealthyReplicaError` (HTTP 503, in the OpenAI error shape).

A placement with one replica never takes it out: there is nowhere else to send a call, so
the gateway retries it as it retries any engine 5xx.

It keeps plain counters and is used from one event loop (the gateway's);
:meth:`~ReplicaPlacement.status` may be read from another thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentbolt.engines.engine import EngineError

__all__ = ["NoHealthyReplicaError", "ReplicaPlacement", "ReplicaState"]


class NoHealthyReplicaError(EngineError):
    """Every engine replica is down (within its cool-down): a 503 the caller may retry later."""

    def __init__(self, states: list[ReplicaState]) -> None:
        reasons = "; ".join(f"replica {s.index}: {s.down_reason}" for s in states)
        message = (f"all {len(states)} engine replicas are down (the gateway probes them again after a "
                   f"cool-down): {reasons}")
        super().__init__(503, message, {"error": {"message": message, "type": "engine_unavailable",
                                                  "param": None, "code": "no_healthy_replica"}})

    @property
    def replica_down(self) -> bool:
        return False  # no replica was called


@dataclass(slots=True)
class ReplicaState:
    """One replica as the placement sees it."""

    index: int
    in_flight: int = 0
    pinned: int = 0
    down_until: float | None = None
    down_reason: str | None = None
    probing: bool = False
    failures: int = 0
    """How many times it was marked down."""

    @property
    def healthy(self) -> bool:
        return self.down_until is None


class ReplicaPlacement:
    """Pins rollouts to ``n`` replicas (see the module doc).

    ``cooldown_s``: how long a replica marked down stays out before it is due for a probe.
    ``max_rollouts``: pins remembered (the oldest is forgotten first). ``clock``: seconds,
    monotonic (tests pass their own).
    """

    def __init__(self, n: int, *, cooldown_s: float = 10.0, max_rollouts: int = 100_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if n < 1:
            raise ValueError(f"a placement needs at least one replica, got {n}")
        self.cooldown_s = cooldown_s
        self.max_rollouts = max_rollouts
        self._clock = clock
        self._states = [ReplicaState(i) for i in range(n)]
        self._pins: dict[str, int] = {}

    @property
    def n(self) -> int:
        return len(self._states)

    def healthy(self, replica: int) -> bool:
        """Whether ``replica`` takes calls now."""
        return self._states[replica].healthy

    def replica_for(self, rollout_id: str) -> int:
        """The replica for the rollout's next call: its pinned one while healthy, else the
        least loaded healthy one (and the rollout is pinned there). Raises
        :class:`NoHealthyReplicaError` when every replica is down."""
        pinned = self._pins.get(rollout_id)
        if pinned is not None and self._states[pinned].healthy:
            return pinned
        candidates = [s for s in self._states if s.healthy]
        if not candidates:
            raise NoHealthyReplicaError(self._states)
        best = min(candidates, key=lambda s: (s.in_flight, s.pinned, s.index))
        self._pin(rollout_id, best.index)
        return best.index

    def started(self, replica: int) -> None:
        """A call went to ``replica``."""
        self._states[replica].in_flight += 1

    def finished(self, replica: int) -> None:
        """A call on ``replica`` ended (answered or failed)."""
        self._states[replica].in_flight -= 1

    def mark_down(self, replica: int, reason: str) -> bool:
        """Take ``replica`` out for the cool-down and unpin its rollouts (each is placed again
        on its next call); False (and nothing changes) when it is the only replica."""
        if self.n == 1:
            return False
        state = self._states[replica]
        state.down_until = self._clock() + self.cooldown_s
        state.down_reason = reason
        state.probing = False
        state.failures += 1
        for rollout_id in [r for r, i in self._pins.items() if i == replica]:
            del self._pins[rollout_id]  # placed again, as new rollouts, on their next call
        state.pinned = 0
        return True

    def mark_up(self, replica: int) -> None:
        """``replica`` answers again (a probe succeeded): new rollouts may go to it."""
        state = self._states[replica]
        state.down_until, state.down_reason, state.probing = None, None, False

    def due_for_probe(self) -> list[int]:
        """Down replicas whose cool-down has passed and that no probe checks yet; each is
        returned once (marked as being probed) until ``mark_up``/``mark_down`` settles it."""
        now = self._clock()
        due = [s for s in self._states
               if s.down_until is not None and not s.probing and now >= s.down_until]
        for state in due:
            state.probing = True
        return [s.index for s in due]

    def status(self) -> list[dict[str, Any]]:
        """Per replica: ``in_flight``, ``pinned`` rollouts, ``healthy``, and for a replica
        that is down its ``down_reason`` and the seconds until it is probed (``probe_in_s``)."""
        now = self._clock()
        return [
            {"replica": s.index, "in_flight": s.in_flight, "pinned": s.pinned, "healthy": s.healthy,
             "down_reason": s.down_reason, "failures": s.failures,
             "probe_in_s": None if s.down_until is None else max(0.0, round(s.down_until - now, 3))}
            for s in list(self._states)
        ]

    def _pin(self, rollout_id: str, replica: int) -> None:
        old = self._pins.pop(rollout_id, None)
        if old is not None:
            self._states[old].pinned -= 1
        elif len(self._pins) >= self.max_rollouts:
            forgotten = self._pins.pop(next(iter(self._pins)))
            self._states[forgotten].pinned -= 1
        self._pins[rollout_id] = replica
        self._states[replica].pinned += 1
