"""``MemoryStore``: the whole store in Python dicts. Fast, not durable — for tests and
short in-process jobs. It is also the reference the other backends are checked against.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
from collections.abc import Sequence
from typing import Any

from agentbolt import semconv
from agentbolt.store import lifecycle
from agentbolt.store.errors import InvalidTransitionError, NotFoundError
from agentbolt.store.memory.metrics import MetricTable
from agentbolt.store.memory.reads import MemoryReads
from agentbolt.store.memory.spans import SpanTable
from agentbolt.store.notify import ChangeNotifier
from agentbolt.store.pagination import check_limit
from agentbolt.types import (
    Attempt,
    AttemptStatus,
    Claim,
    ErrorInfo,
    MetricRecord,
    Resource,
    Resources,
    Rollout,
    RolloutCreate,
    RolloutStatus,
    Span,
    Worker,
    WorkerStatus,
    new_id,
    now,
)

__all__ = ["MemoryStore"]


class MemoryStore(MemoryReads):
    """In-process store. Thread-safe; every method runs without awaiting inside its
    critical section, so it is also safe across event loops. The reads are
    :class:`~agentbolt.store.memory.reads.MemoryReads`'s; this class holds the state and
    the writes."""

    def __init__(self, *, deadline_check_interval: float = 0.25) -> None:
        self.deadline_check_interval = deadline_check_interval
        self._lock = threading.RLock()
        self._notifier = ChangeNotifier()
        self._seq = itertools.count()
        self._rollouts: dict[str, Rollout] = {}
        self._rollout_seq: dict[str, int] = {}
        self._search_texts: dict[str, str] = {}  # rollout id -> folded input JSON
        self._queue: list[tuple[int, str]] = []  # heap of (seq, rollout_id), lazily cleaned
        self._attempts: dict[str, Attempt] = {}
        self._attempts_by_rollout: dict[str, list[str]] = {}
        self._active: set[str] = set()
        self._spans = SpanTable()
        self._resources: list[Resources] = []
        self._workers: dict[str, Worker] = {}
        self._claims_by_request: dict[str, list[tuple[str, str]]] = {}
        self._secret = os.urandom(32)
        self._metrics = MetricTable()

    # ------------------------------------------------------------------ helpers
    def _after_change(self, rollout: Rollout, attempt: Attempt | None, before: RolloutStatus) -> None:
        if attempt is not None and not attempt.status.is_active:
            self._active.discard(attempt.attempt_id)
        if rollout.status == RolloutStatus.REQUEUING and before != RolloutStatus.REQUEUING:
            heapq.heappush(self._queue, (self._rollout_seq[rollout.rollout_id], rollout.rollout_id))
        if attempt is not None and attempt.status.is_active:
            self._active.add(attempt.attempt_id)
        if rollout.status.is_terminal and not before.is_terminal:
            self._notifier.notify()

    async def _wait_for_change(self, timeout: float) -> None:
        await self._notifier.wait(timeout)

    # ------------------------------------------------------------------ rollouts
    async def enqueue_rollouts(self, rollouts: Sequence[RolloutCreate]) -> list[Rollout]:
        out: list[Rollout] = []
        t = now()
        with self._lock:
            for spec in rollouts:
                rid = spec.rollout_id or new_id("ro")
                existing = self._rollouts.get(rid)
                if existing is not None:
                    out.append(existing.model_copy(deep=True))
                    continue
                if spec.resources_version is not None and not (
                    1 <= spec.resources_version <= len(self._resources)
                ):
                    raise NotFoundError(f"resources version {spec.resources_version} not found")
                r = Rollout(
                    rollout_id=rid,
                    input=spec.input,
                    mode=spec.mode,
                    resources_version=spec.resources_version,
                    config=spec.config.model_copy(deep=True),
                    metadata=dict(spec.metadata),
                    created_at=t,
                    updated_at=t,
                )
                seq = next(self._seq)
                self._rollouts[rid] = r
                self._rollout_seq[rid] = seq
                self._attempts_by_rollout[rid] = []
                heapq.heappush(self._queue, (seq, rid))
                out.append(r.model_copy(deep=True))
        return out

    async def claim_rollouts(
        self, worker_id: str | None = None, limit: int = 1, request_id: str | None = None
    ) -> list[Claim]:
        check_limit(limit, 1000)
        await self._maybe_check_deadlines()
        with self._lock:
            if request_id is not None and request_id in self._claims_by_request:
                return [
                    Claim(
                        rollout=self._rollouts[r].model_copy(deep=True), attempt=self._attempts[a].model_copy(deep=True)
                    )
                    for r, a in self._claims_by_request[request_id]
                ]
            t = now()
            latest = len(self._resources) or None
            claims: list[Claim] = []
            while self._queue and len(claims) < limit:
                _, rid = heapq.heappop(self._queue)
                r = self._rollouts[rid]
                if not r.status.is_claimable:
                    continue  # stale heap entry
                before = r.status
                prev = self._attempts.get(r.latest_attempt_id) if r.latest_attempt_id else None
                att = lifecycle.start_attempt(r, worker_id, t, latest)
                self._attempts[att.attempt_id] = att
                self._attempts_by_rollout[rid].append(att.attempt_id)
                self._after_change(r, att, before)
                if prev is not None:
                    self._active.discard(prev.attempt_id)
                claims.append(Claim(rollout=r.model_copy(deep=True), attempt=att.model_copy(deep=True)))
            if worker_id is not None:
                w = self._workers.get(worker_id) or Worker(worker_id=worker_id, created_at=t)
                w.last_heartbeat_time = t
                if claims:
                    w.status = WorkerStatus.BUSY
                    w.current_rollout_id = claims[-1].rollout.rollout_id
                    w.current_attempt_id = claims[-1].attempt.attempt_id
                self._workers[worker_id] = w
            if request_id is not None:
                self._claims_by_request[request_id] = [(c.rollout.rollout_id, c.attempt.attempt_id) for c in claims]
            return claims

    async def update_rollout(
        self,
        rollout_id: str,
        *,
        status: RolloutStatus | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Rollout:
        with self._lock:
            r = self._rollout(rollout_id)
            if status is not None and status != r.status:
                if status != RolloutStatus.CANCELLED:
                    raise InvalidTransitionError(
                        f"a rollout's status can only be set to cancelled directly (asked {status.value}); "
                        "other changes happen by reporting attempts"
                    )
                before = r.status
                att = self._attempts.get(r.latest_attempt_id) if r.latest_attempt_id else None
                lifecycle.cancel_rollout(r, att, now())
                self._after_change(r, att, before)
            if metadata:
                r.metadata.update(metadata)
                r.updated_at = now()
            return r.model_copy(deep=True)

    # ------------------------------------------------------------------ attempts
    async def update_attempt(
        self,
        rollout_id: str,
        attempt_id: str,
        *,
        status: AttemptStatus | None = None,
        error: ErrorInfo | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Attempt:
        with self._lock:
            r = self._rollout(rollout_id)
            a = self._attempt(rollout_id, attempt_id)
            before = r.status
            t = now()
            if status is not None:
                lifecycle.finish_attempt(r, a, status, t, error)
            elif error is not None:
                a.error = error
            if metadata:
                a.metadata.update(metadata)
            self._after_change(r, a, before)
            if not a.status.is_active and a.worker_id in self._workers:
                w = self._workers[a.worker_id]
                if w.current_attempt_id == a.attempt_id:
                    w.status, w.current_rollout_id, w.current_attempt_id = WorkerStatus.IDLE, None, None
            return a.model_copy(deep=True)

    async def heartbeat(self, rollout_id: str, attempt_id: str) -> Attempt:
        with self._lock:
            r = self._rollout(rollout_id)
            a = self._attempt(rollout_id, attempt_id)
            before = r.status
            t = now()
            lifecycle.touch_attempt(r, a, t)
            self._after_change(r, a, before)
            if a.worker_id in self._workers:
                self._workers[a.worker_id].last_heartbeat_time = t
            return a.model_copy(deep=True)

    # ------------------------------------------------------------------ spans
    async def add_spans(self, spans: Sequence[Span]) -> list[Span]:
        out: list[Span] = []
        with self._lock:
            # validate every target first: a bad span rejects the batch, nothing half-stored
            for s in spans:
                self._attempt(s.rollout_id, s.attempt_id)
            t = now()
            for span in spans:
                s, is_new = self._spans.add(span)
                out.append(s)
                if not is_new:
                    continue
                r = self._rollouts[s.rollout_id]
                a = self._attempts[s.attempt_id]
                before = r.status
                lifecycle.touch_attempt(r, a, t)
                reward = semconv.primary_reward(s.name, s.attributes)
                if reward is not None:
                    lifecycle.record_reward(r, a, reward, t)
                self._after_change(r, a, before)
        return out

    async def delete_spans(
        self,
        *,
        before: float | None = None,
        rollout_ids: Sequence[str] | None = None,
        dry_run: bool = False,
    ) -> int:
        self._check_delete_filters(before, rollout_ids)
        with self._lock:
            if rollout_ids is not None:
                pool = [self._rollouts[r] for r in dict.fromkeys(rollout_ids) if r in self._rollouts]
            else:
                pool = list(self._rollouts.values())
            keys = [
                (r.rollout_id, aid)
                for r in pool
                if r.status.is_terminal and (before is None or (r.end_time is not None and r.end_time < before))
                for aid in self._attempts_by_rollout[r.rollout_id]
            ]
            return self._spans.delete(keys, dry_run=dry_run)

    # ------------------------------------------------------------------ resources
    async def add_resources(
        self, resources: dict[str, Resource], metadata: dict[str, Any] | None = None
    ) -> Resources:
        with self._lock:
            res = Resources(version=len(self._resources) + 1, resources=resources, metadata=metadata or {})
            res = Resources.model_validate(res.model_dump())  # own copy
            self._resources.append(res)
            return res.model_copy(deep=True)

    # ------------------------------------------------------------------ workers
    async def update_worker(
        self,
        worker_id: str,
        *,
        status: WorkerStatus | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Worker:
        with self._lock:
            t = now()
            w = self._workers.get(worker_id) or Worker(worker_id=worker_id, created_at=t)
            lifecycle.refresh_worker(w, t, status, metadata)
            self._workers[worker_id] = w
            return w.model_copy(deep=True)

    # ------------------------------------------------------------------ training metrics
    async def add_metrics(self, records: Sequence[MetricRecord]) -> None:
        with self._lock:
            self._metrics.add(records)

    # ------------------------------------------------------------------ stats & deadlines
    async def check_deadlines(self) -> int:
        expired = 0
        with self._lock:
            t = now()
            for aid in list(self._active):
                a = self._attempts[aid]
                r = self._rollouts[a.rollout_id]
                before = r.status
                if lifecycle.expire_attempt(r, a, t):
                    expired += 1
                    self._after_change(r, a, before)
                elif not a.status.is_active:
                    self._active.discard(aid)
        return expired

    async def get_secret(self) -> bytes:
        return self._secret

