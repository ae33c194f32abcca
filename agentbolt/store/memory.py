"""``MemoryStore``: the whole store in Python dicts. Fast, not durable — for tests and
short in-process jobs. It is also the reference the other backends are checked against.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import os
import threading
from collections.abc import Sequence
from typing import Any

from agentbolt import semconv
from agentbolt.store import lifecycle
from agentbolt.store import search as search_rules
from agentbolt.store.base import Store
from agentbolt.store.errors import (
    InvalidRequestError,
    InvalidTransitionError,
    NotFoundError,
)
from agentbolt.store.metric_records import merge_record
from agentbolt.store.notify import ChangeNotifier
from agentbolt.store.pagination import (
    check_cap,
    check_limit,
    check_sort_key,
    decode_cursor,
    encode_cursor,
    sort_tuple,
)
from agentbolt.types import (
    Attempt,
    AttemptStatus,
    Claim,
    ErrorInfo,
    MetricRecord,
    Page,
    Resource,
    Resources,
    Rollout,
    RolloutCreate,
    RolloutMode,
    RolloutStatus,
    Span,
    StoreStats,
    Worker,
    WorkerStatus,
    new_id,
    now,
)

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    """In-process store. Thread-safe; every method runs without awaiting inside its
    critical section, so it is also safe across event loops."""

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
        self._spans: dict[tuple[str, str], dict[str, Span]] = {}
        self._next_span_seq: dict[tuple[str, str], int] = {}
        self._span_count = 0
        self._resources: list[Resources] = []
        self._workers: dict[str, Worker] = {}
        self._claims_by_request: dict[str, list[tuple[str, str]]] = {}
        self._secret = os.urandom(32)
        self._metrics: dict[str, dict[int, MetricRecord]] = {}
        self._metric_steps: dict[str, list[int]] = {}  # sorted steps of each run
        self._metric_run_seq: dict[str, int] = {}  # run id -> order of its last write
        self._metric_writes = itertools.count()

    # ------------------------------------------------------------------ helpers
    def _rollout(self, rollout_id: str) -> Rollout:
        try:
            return self._rollouts[rollout_id]
        except KeyError:
            raise NotFoundError(f"rollout {rollout_id!r} not found") from None

    def _attempt(self, rollout_id: str, attempt_id: str) -> Attempt:
        att = self._attempts.get(attempt_id)
        if att is None or att.rollout_id != rollout_id:
            raise NotFoundError(f"attempt {attempt_id!r} of rollout {rollout_id!r} not found")
        return att

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
                    Claim(rollout=self._rollouts[r].model_copy(deep=True), attempt=self._attempts[a].model_copy(deep=True))
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

    async def get_rollout(self, rollout_id: str) -> Rollout:
        await self._maybe_check_deadlines()
        with self._lock:
            return self._rollout(rollout_id).model_copy(deep=True)

    def _search_text(self, r: Rollout) -> str:
        """The rollout's input as folded JSON text, made once (inputs never change)."""
        text = self._search_texts.get(r.rollout_id)
        if text is None:
            text = self._search_texts[r.rollout_id] = search_rules.fold(search_rules.input_text(r.input))
        return text

    def _matching(
        self,
        status: Sequence[RolloutStatus] | None,
        mode: RolloutMode | None,
        rollout_ids: Sequence[str] | None,
        needle: str | None,
    ) -> list[Rollout]:
        """The rollouts passing every filter (call with the lock held)."""
        if rollout_ids is not None:
            pool = [self._rollouts[r] for r in dict.fromkeys(rollout_ids) if r in self._rollouts]
        else:
            pool = list(self._rollouts.values())
        statuses = set(status) if status else None
        return [
            r
            for r in pool
            if (statuses is None or r.status in statuses)
            and (mode is None or r.mode == mode)
            and (needle is None or search_rules.matches(needle, r.rollout_id, self._search_text(r)))
        ]

    async def query_rollouts(
        self,
        *,
        status: Sequence[RolloutStatus] | None = None,
        mode: RolloutMode | None = None,
        rollout_ids: Sequence[str] | None = None,
        search: str | None = None,
        sort_by: str = "created_at",
        descending: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[Rollout]:
        check_sort_key(sort_by)
        check_limit(limit)
        needle = search_rules.search_needle(search)
        after = decode_cursor(cursor) if cursor else None
        await self._maybe_check_deadlines()
        with self._lock:
            rows = self._matching(status, mode, rollout_ids, needle)

            def key(r: Rollout) -> tuple[int, Any, str]:
                if sort_by == "created_at":
                    # enqueue order breaks ties among equal timestamps
                    return sort_tuple((r.created_at, self._rollout_seq[r.rollout_id]), r.rollout_id)
                if sort_by == "duration":
                    ended = r.end_time is not None and r.start_time is not None
                    return sort_tuple(r.end_time - r.start_time if ended else None, r.rollout_id)  # type: ignore[operator]
                return sort_tuple(getattr(r, sort_by), r.rollout_id)

            rows.sort(key=key, reverse=descending)
            if after is not None:
                value, rid = after
                if sort_by == "created_at" and isinstance(value, list):
                    value = tuple(value)
                pivot = sort_tuple(value, rid)
                try:
                    rows = [r for r in rows if (key(r) < pivot if descending else key(r) > pivot)]
                except TypeError:
                    raise InvalidRequestError(
                        "invalid cursor for this query: pass back a next_cursor from the same query"
                    ) from None
            page = rows[:limit]
            next_cursor = None
            if len(rows) > limit:
                last = page[-1]
                v = key(last)
                next_cursor = encode_cursor(None if v[0] == 0 else v[1], last.rollout_id)
            return Page[Rollout](items=[r.model_copy(deep=True) for r in page], next_cursor=next_cursor)

    async def count_rollouts(
        self,
        *,
        status: Sequence[RolloutStatus] | None = None,
        mode: RolloutMode | None = None,
        search: str | None = None,
        cap: int | None = None,
    ) -> int:
        check_cap(cap)
        needle = search_rules.search_needle(search)
        await self._maybe_check_deadlines()
        with self._lock:
            n = len(self._matching(status, mode, None, needle))
        return n if cap is None else min(n, cap)

    async def get_latest_attempts(self, rollout_ids: Sequence[str]) -> dict[str, Attempt]:
        with self._lock:
            out: dict[str, Attempt] = {}
            for rid in dict.fromkeys(rollout_ids):
                r = self._rollouts.get(rid)
                if r is not None and r.latest_attempt_id is not None:
                    out[rid] = self._attempts[r.latest_attempt_id].model_copy(deep=True)
            return out

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
    async def get_attempt(self, rollout_id: str, attempt_id: str) -> Attempt:
        with self._lock:
            return self._attempt(rollout_id, attempt_id).model_copy(deep=True)

    async def query_attempts(self, rollout_id: str) -> list[Attempt]:
        with self._lock:
            self._rollout(rollout_id)
            return [self._attempts[a].model_copy(deep=True) for a in self._attempts_by_rollout[rollout_id]]

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
            for s in spans:
                key = (s.rollout_id, s.attempt_id)
                bucket = self._spans.setdefault(key, {})
                stored = bucket.get(s.span_id)
                if stored is not None:
                    out.append(stored)
                    continue
                seq = self._next_span_seq.get(key, 0)
                if s.sequence_id is None:
                    s = s.model_copy(update={"sequence_id": seq})
                self._next_span_seq[key] = max(seq, s.sequence_id) + 1  # type: ignore[operator]
                bucket[s.span_id] = s
                self._span_count += 1
                r = self._rollouts[s.rollout_id]
                a = self._attempts[s.attempt_id]
                before = r.status
                lifecycle.touch_attempt(r, a, t)
                reward = semconv.primary_reward(s.name, s.attributes)
                if reward is not None:
                    lifecycle.record_reward(r, a, reward, t)
                self._after_change(r, a, before)
                out.append(s)
        return out

    async def query_spans(
        self,
        rollout_id: str,
        attempt_id: str | None = None,
        *,
        name: str | None = None,
        limit: int = 1000,
        cursor: str | None = None,
    ) -> Page[Span]:
        check_limit(limit)
        after = decode_cursor(cursor) if cursor else None
        with self._lock:
            r = self._rollout(rollout_id)
            if attempt_id == "latest":
                attempt_ids = [r.latest_attempt_id] if r.latest_attempt_id else []
            elif attempt_id is not None:
                self._attempt(rollout_id, attempt_id)
                attempt_ids = [attempt_id]
            else:
                attempt_ids = list(self._attempts_by_rollout[rollout_id])
            rows: list[tuple[tuple[int, int], Span]] = []
            for aid in attempt_ids:
                aseq = self._attempts[aid].sequence_id
                for s in self._spans.get((rollout_id, aid), {}).values():
                    if name is None or s.name == name:
                        rows.append(((aseq, s.sequence_id or 0), s))
            rows.sort(key=lambda x: (x[0], x[1].span_id))
            if after is not None:
                (av, sv), sid = after
                rows = [x for x in rows if (x[0], x[1].span_id) > ((av, sv), sid)]
            page = rows[:limit]
            next_cursor = encode_cursor(list(page[-1][0]), page[-1][1].span_id) if len(rows) > limit else None
            return Page[Span](items=[s for _, s in page], next_cursor=next_cursor)

    async def delete_spans(
        self,
        *,
        before: float | None = None,
        rollout_ids: Sequence[str] | None = None,
        dry_run: bool = False,
    ) -> int:
        self._check_delete_filters(before, rollout_ids)
        deleted = 0
        with self._lock:
            if rollout_ids is not None:
                pool = [self._rollouts[r] for r in dict.fromkeys(rollout_ids) if r in self._rollouts]
            else:
                pool = list(self._rollouts.values())
            for r in pool:
                if not r.status.is_terminal:
                    continue
                if before is not None and (r.end_time is None or r.end_time >= before):
                    continue
                for aid in self._attempts_by_rollout[r.rollout_id]:
                    bucket = self._spans.get((r.rollout_id, aid))
                    if not bucket:
                        continue
                    deleted += len(bucket)
                    if not dry_run:
                        self._span_count -= len(bucket)
                        del self._spans[(r.rollout_id, aid)]
        return deleted

    # ------------------------------------------------------------------ resources
    async def add_resources(
        self, resources: dict[str, Resource], metadata: dict[str, Any] | None = None
    ) -> Resources:
        with self._lock:
            res = Resources(version=len(self._resources) + 1, resources=resources, metadata=metadata or {})
            res = Resources.model_validate(res.model_dump())  # own copy
            self._resources.append(res)
            return res.model_copy(deep=True)

    async def get_resources(self, version: int) -> Resources:
        with self._lock:
            if not 1 <= version <= len(self._resources):
                raise NotFoundError(f"resources version {version} not found")
            return self._resources[version - 1].model_copy(deep=True)

    async def get_latest_resources(self) -> Resources | None:
        with self._lock:
            return self._resources[-1].model_copy(deep=True) if self._resources else None

    async def query_resources(self, *, limit: int = 100, cursor: str | None = None) -> Page[Resources]:
        check_limit(limit)
        after = decode_cursor(cursor) if cursor else None
        with self._lock:
            rows = list(reversed(self._resources))
            if after is not None:
                rows = [r for r in rows if r.version < int(after[0])]
            page = rows[:limit]
            nxt = encode_cursor(page[-1].version, str(page[-1].version)) if len(rows) > limit else None
            return Page[Resources](items=[r.model_copy(deep=True) for r in page], next_cursor=nxt)

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

    async def get_worker(self, worker_id: str) -> Worker:
        with self._lock:
            try:
                return self._workers[worker_id].model_copy(deep=True)
            except KeyError:
                raise NotFoundError(f"worker {worker_id!r} not found") from None

    async def query_workers(self) -> list[Worker]:
        with self._lock:
            return [w.model_copy(deep=True) for w in sorted(self._workers.values(), key=lambda w: w.worker_id)]

    # ------------------------------------------------------------------ training metrics
    async def add_metrics(self, records: Sequence[MetricRecord]) -> None:
        with self._lock:
            for rec in records:
                by_step = self._metrics.setdefault(rec.run_id, {})
                stored = by_step.get(rec.step)
                if stored is None:
                    bisect.insort(self._metric_steps.setdefault(rec.run_id, []), rec.step)
                by_step[rec.step] = merge_record(stored, rec)
                self._metric_run_seq[rec.run_id] = next(self._metric_writes)

    async def query_metrics(
        self, run_id: str, *, after_step: int | None = None, limit: int = 1000
    ) -> list[MetricRecord]:
        check_limit(limit)
        with self._lock:
            steps = self._metric_steps.get(run_id, [])
            start = 0 if after_step is None else bisect.bisect_right(steps, after_step)
            by_step = self._metrics.get(run_id, {})
            # values hold only scalars: a new dict is a full copy, 2-3x cheaper than a deep one
            page = [by_step[s] for s in steps[start : start + limit]]
            return [r.model_copy(update={"values": dict(r.values)}) for r in page]

    async def metric_runs(self, *, limit: int = 100) -> list[str]:
        check_limit(limit)
        with self._lock:
            return sorted(self._metric_run_seq, key=self._metric_run_seq.__getitem__, reverse=True)[:limit]

    # ------------------------------------------------------------------ stats & deadlines
    async def stats(self) -> StoreStats:
        await self._maybe_check_deadlines()
        with self._lock:
            by_status = {s.value: 0 for s in RolloutStatus}
            for r in self._rollouts.values():
                by_status[r.status.value] += 1
            att_status = {s.value: 0 for s in AttemptStatus}
            for a in self._attempts.values():
                att_status[a.status.value] += 1
            return StoreStats(
                rollouts_by_status=by_status,
                attempts_by_status=att_status,
                queue_depth=by_status["queuing"] + by_status["requeuing"],
                total_rollouts=len(self._rollouts),
                total_attempts=len(self._attempts),
                total_spans=self._span_count,
                total_workers=len(self._workers),
                latest_resources_version=len(self._resources) or None,
            )

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

