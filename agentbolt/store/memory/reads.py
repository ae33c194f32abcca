"""The read side of :class:`~agentbolt.store.memory.MemoryStore`: lookups, filtered and
sorted pages, stats. Like the SQL backends' ``reads`` modules, nothing here changes the
store; the state it reads is declared here and created by ``MemoryStore.__init__``.
Every method takes the store's lock and returns copies, never the stored objects.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from agentbolt.store import search as search_rules
from agentbolt.store.base import Store
from agentbolt.store.errors import NotFoundError
from agentbolt.store.memory.metrics import MetricTable
from agentbolt.store.memory.pages import resources_page, rollout_page, span_page
from agentbolt.store.memory.spans import SpanTable
from agentbolt.store.pagination import (
    check_cap,
    check_limit,
    check_sort_key,
    decode_cursor,
)
from agentbolt.types import (
    Attempt,
    AttemptStatus,
    MetricRecord,
    Page,
    Resources,
    Rollout,
    RolloutMode,
    RolloutStatus,
    Span,
    StoreStats,
    Worker,
)

__all__ = ["MemoryReads"]


class MemoryReads(Store):
    """The read methods of :class:`~agentbolt.store.memory.MemoryStore` (its base class)."""

    _lock: threading.RLock
    _rollouts: dict[str, Rollout]
    _rollout_seq: dict[str, int]  # rollout id -> enqueue order
    _search_texts: dict[str, str]  # rollout id -> folded input JSON
    _attempts: dict[str, Attempt]
    _attempts_by_rollout: dict[str, list[str]]
    _spans: SpanTable
    _resources: list[Resources]
    _workers: dict[str, Worker]
    _metrics: MetricTable

    # ------------------------------------------------------------------ lookups
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

    # ------------------------------------------------------------------ rollouts
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
            return rollout_page(
                rows,
                self._rollout_seq.__getitem__,
                sort_by=sort_by,
                descending=descending,
                limit=limit,
                after=after,
            )

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

    # ------------------------------------------------------------------ attempts
    async def get_attempt(self, rollout_id: str, attempt_id: str) -> Attempt:
        with self._lock:
            return self._attempt(rollout_id, attempt_id).model_copy(deep=True)

    async def query_attempts(self, rollout_id: str) -> list[Attempt]:
        with self._lock:
            self._rollout(rollout_id)
            return [self._attempts[a].model_copy(deep=True) for a in self._attempts_by_rollout[rollout_id]]

    # ------------------------------------------------------------------ spans
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
                for s in self._spans.of_attempt((rollout_id, aid)):
                    if name is None or s.name == name:
                        rows.append(((aseq, s.sequence_id or 0), s))
            return span_page(rows, limit=limit, after=after)

    # ------------------------------------------------------------------ resources
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
            return resources_page(self._resources, limit=limit, after=after)

    # ------------------------------------------------------------------ workers
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
    async def query_metrics(
        self, run_id: str, *, after_step: int | None = None, limit: int = 1000
    ) -> list[MetricRecord]:
        check_limit(limit)
        with self._lock:
            return self._metrics.query(run_id, after_step, limit)

    async def metric_runs(self, *, limit: int = 100) -> list[str]:
        check_limit(limit)
        with self._lock:
            return self._metrics.runs(limit)

    # ------------------------------------------------------------------ stats
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
                total_spans=self._spans.count,
                total_workers=len(self._workers),
                latest_resources_version=len(self._resources) or None,
            )
