"""Agent Lightning v0.3's ``LightningStore`` API over any agentbolt store.

:class:`LightningStore` wraps an agentbolt :class:`~agentbolt.store.Store` (memory,
SQLite, PostgreSQL, HTTP) and answers v0.3's calls with v0.3's semantics: queries return
*every* match as a list (they page through the store internally — no cursor, no
1,000-item limit), ``limit=-1``/``offset`` work as in v0.3, missing records are ``None``
instead of errors, and resources are named ``"rs-<version>"``. Any other attribute is
the wrapped store's (``store.claim_rollouts``, ``store.get_spans``...), so one object
serves v0.3 code and agentbolt code alike; ``.store`` is the agentbolt store itself.

What cannot be mapped raises ``NotImplementedError`` saying what to do instead (see
``docs/migrating-from-agent-lightning.md``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Literal

from opentelemetry.sdk.trace import ReadableSpan

from agentbolt.compat.resolution import module_getattr
from agentbolt.compat.store.unset import UNSET, Unset, given
from agentbolt.compat.store_support import (
    LightningStoreCapabilities,
    LightningStoreStatistics,
    combine,
    resources_of,
    window,
)
from agentbolt.compat.types import (
    AttemptedRollout,
    EnqueueRolloutRequest,
    NamedResources,
    ResourcesUpdate,
    enqueue_request,
    version_of,
)
from agentbolt.store.base import Store
from agentbolt.store.errors import NotFoundError
from agentbolt.store.memory import MemoryStore
from agentbolt.tracing.convert import to_span
from agentbolt.types import (
    Attempt,
    AttemptStatus,
    Rollout,
    RolloutConfig,
    RolloutStatus,
    Span,
    Worker,
    WorkerStatus,
)

__all__ = [
    "InMemoryLightningStore",
    "LightningStore",
    "LightningStoreCapabilities",
    "LightningStoreClient",  # noqa: F822 - from __getattr__ (the client module imports this one)
    "LightningStoreServer",  # noqa: F822 - from __getattr__ (the server module imports this one)
    "LightningStoreStatistics",
    "LightningStoreThreaded",
    "UNSET",
    "Unset",
    "as_lightning_store",
    "as_store",
]

_PAGE = 1000


class LightningStore:
    """v0.3's store API over an agentbolt store (default: a new in-memory one)."""

    def __init__(self, store: Store | None = None) -> None:
        self.store: Store = store if store is not None else MemoryStore()

    def __getattr__(self, name: str) -> Any:
        if name == "store":  # not set yet (during unpickling)
            raise AttributeError(name)
        return getattr(self.store, name)  # third-party: v0.3 code calls any agentbolt store method through this wrapper

    def __repr__(self) -> str:
        return f"<{type(self).__name__} over {type(self.store).__name__}>"

    # ------------------------------------------------------------------ about
    @property
    def capabilities(self) -> LightningStoreCapabilities:
        return {"thread_safe": False, "async_safe": True, "zero_copy": False, "otlp_traces": False}

    async def statistics(self) -> LightningStoreStatistics:
        stats = await self.store.stats()
        return {
            "name": type(self).__name__,
            "total_rollouts": stats.total_rollouts,
            "total_attempts": stats.total_attempts,
            "total_spans": stats.total_spans,
            "total_resources": stats.latest_resources_version or 0,
            "total_workers": stats.total_workers,
            "queue_depth": stats.queue_depth,
        }

    def otlp_traces_endpoint(self) -> str:
        raise NotImplementedError(
            f"{type(self).__name__} has no OTLP endpoint: serve it (LightningStoreServer or `agentbolt server`) "
            "and send OTLP to <server>/v1/traces"
        )

    # ------------------------------------------------------------------ rollouts
    async def enqueue_rollout(
        self,
        input: Any,
        mode: str | None = None,
        resources_id: str | None = None,
        config: RolloutConfig | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Rollout:
        request = EnqueueRolloutRequest(input=input, mode=mode, resources_id=resources_id, config=config,
                                        metadata=metadata)
        return (await self.store.enqueue_rollouts([enqueue_request(request)]))[0]

    async def enqueue_many_rollouts(self, rollouts: Sequence[EnqueueRolloutRequest | dict[str, Any]]) -> list[Rollout]:
        return await self.store.enqueue_rollouts([enqueue_request(r) for r in rollouts])

    async def dequeue_rollout(self, worker_id: str | None = None) -> AttemptedRollout | None:
        claims = await self.store.claim_rollouts(worker_id, 1)
        return AttemptedRollout.of(claims[0].rollout, claims[0].attempt) if claims else None

    async def dequeue_many_rollouts(self, *, limit: int = 1, worker_id: str | None = None) -> list[AttemptedRollout]:
        if limit <= 0:
            return []
        return [AttemptedRollout.of(c.rollout, c.attempt) for c in await self.store.claim_rollouts(worker_id, limit)]

    async def start_rollout(
        self,
        input: Any,
        mode: str | None = None,
        resources_id: str | None = None,
        config: RolloutConfig | None = None,
        metadata: dict[str, Any] | None = None,
        worker_id: str | None = None,
    ) -> AttemptedRollout:
        """Create a rollout and its first attempt at once (for running it here, now).

        agentbolt makes attempts only by claiming from its FIFO queue, so this enqueues
        and claims: it needs the queue to hold nothing else (debugging, a one-off
        trace), and says so otherwise."""
        if (await self.store.stats()).queue_depth:
            raise NotImplementedError(
                "start_rollout needs an empty queue on agentbolt (attempts are made by claiming from the FIFO "
                "queue): use enqueue_rollout and let a runner claim it, or wait until the queue is drained"
            )
        rollout = await self.enqueue_rollout(input, mode, resources_id, config, metadata)
        claims = await self.store.claim_rollouts(worker_id, 1)
        if not claims or claims[0].rollout.rollout_id != rollout.rollout_id:
            raise RuntimeError("another caller enqueued or claimed work meanwhile; start_rollout needs the queue alone")
        return AttemptedRollout.of(claims[0].rollout, claims[0].attempt)

    async def start_attempt(self, rollout_id: str, worker_id: str | None = None) -> AttemptedRollout:
        raise NotImplementedError(
            "agentbolt makes a new attempt when a rollout is claimed again: fail the current attempt "
            "(update_attempt(..., status='failed')) with 'failed' in the rollout's config.retry_on, and a runner "
            "claims the retry"
        )

    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | None:
        try:
            return await self.store.get_rollout(rollout_id)
        except NotFoundError:
            return None

    async def query_rollouts(
        self,
        *,
        status_in: Sequence[RolloutStatus | str] | None = None,
        rollout_id_in: Sequence[str] | None = None,
        rollout_id_contains: str | None = None,
        filter_logic: Literal["and", "or"] = "and",
        sort_by: str | None = None,
        sort_order: Literal["asc", "desc"] = "asc",
        limit: int = -1,
        offset: int = 0,
        status: Sequence[RolloutStatus | str] | None = None,
        rollout_ids: Sequence[str] | None = None,
    ) -> list[Rollout]:
        """Every matching rollout (an :class:`AttemptedRollout` once it has an attempt)."""
        statuses = status_in if status_in is not None else status
        ids = rollout_id_in if rollout_id_in is not None else rollout_ids
        tests: list[Callable[[Rollout], bool]] = []
        if statuses is not None:
            wanted = {RolloutStatus(s) for s in statuses}
            tests.append(lambda r: r.status in wanted)
        if ids is not None:
            id_set = set(ids)
            tests.append(lambda r: r.rollout_id in id_set)
        if rollout_id_contains:
            tests.append(lambda r: rollout_id_contains in r.rollout_id)
        narrow: dict[str, Any] = {}
        if filter_logic == "and" and statuses is not None:
            narrow["status"] = [RolloutStatus(s) for s in statuses]
        if filter_logic == "and" and ids is not None:
            narrow["rollout_ids"] = list(ids)
        keep = combine(tests, filter_logic)
        found = [r for r in await self._all_rollouts(**narrow) if keep(r)]
        found = window(found, sort_by, sort_order, limit, offset)
        latest = await self.store.get_latest_attempts([r.rollout_id for r in found])
        return [AttemptedRollout.of(r, latest[r.rollout_id]) if r.rollout_id in latest else r for r in found]

    async def _all_rollouts(self, **filters: Any) -> list[Rollout]:
        out: list[Rollout] = []
        cursor: str | None = None
        while True:
            page = await self.store.query_rollouts(**filters, limit=_PAGE, cursor=cursor)
            out.extend(page.items)
            if page.next_cursor is None:
                return out
            cursor = page.next_cursor

    async def update_rollout(self, rollout_id: str, input: Any = None, mode: Any = None, resources_id: Any = None,
                             status: RolloutStatus | str | None = None, config: RolloutConfig | None = None,
                             metadata: dict[str, Any] | None = None) -> Rollout:
        """Cancel a rollout or merge metadata; agentbolt never rewrites a rollout's input,
        mode, resources or config once enqueued (enqueue a new rollout instead)."""
        input, mode, resources_id, status, config, metadata = map(
            given, (input, mode, resources_id, status, config, metadata))
        if any(v is not None for v in (input, mode, resources_id, config)):
            raise NotImplementedError(
                "agentbolt does not change a rollout's input, mode, resources or config after enqueueing: "
                "cancel it (status='cancelled') and enqueue a new one"
            )
        if status is not None and RolloutStatus(status) != RolloutStatus.CANCELLED:
            raise NotImplementedError(
                f"a rollout's status follows its attempts on agentbolt; set the attempt's status instead "
                f"(update_attempt), or cancel the rollout (status='cancelled'), not {status!r}"
            )
        return await self.store.update_rollout(
            rollout_id, status=RolloutStatus(status) if status is not None else None, metadata=metadata
        )

    async def wait_for_rollouts(self, rollout_ids: list[str], timeout: float | None = None) -> list[Rollout]:
        """The listed rollouts that finished within ``timeout`` seconds (all of them if None)."""
        return await self.store.wait_for_rollouts(rollout_ids, timeout=timeout)

    # ------------------------------------------------------------------ attempts
    async def query_attempts(self, rollout_id: str, *, sort_by: str | None = "sequence_id",
                             sort_order: Literal["asc", "desc"] = "asc", limit: int = -1,
                             offset: int = 0) -> list[Attempt]:
        return window(await self.store.query_attempts(rollout_id), sort_by, sort_order, limit, offset)

    async def get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        return (await self.store.get_latest_attempts([rollout_id])).get(rollout_id)

    async def update_attempt(self, rollout_id: str, attempt_id: str, status: AttemptStatus | str | None = None,
                             worker_id: str | None = None, last_heartbeat_time: float | None = None,
                             metadata: dict[str, Any] | None = None) -> Attempt:
        """Report an attempt's status or metadata (``attempt_id="latest"`` for the latest);
        ``last_heartbeat_time`` sends a heartbeat (the store stamps the time itself)."""
        status, worker_id, last_heartbeat_time, metadata = map(
            given, (status, worker_id, last_heartbeat_time, metadata))
        if attempt_id == "latest":
            latest = await self.get_latest_attempt(rollout_id)
            if latest is None:
                raise ValueError(f"rollout {rollout_id} has no attempt yet")
            attempt_id = latest.attempt_id
        attempt: Attempt | None = None
        if last_heartbeat_time is not None:
            attempt = await self.store.heartbeat(rollout_id, attempt_id)
        if status is not None or metadata is not None:
            attempt = await self.store.update_attempt(
                rollout_id, attempt_id, status=AttemptStatus(status) if status is not None else None, metadata=metadata
            )
        return attempt if attempt is not None else await self.store.get_attempt(rollout_id, attempt_id)

    # ------------------------------------------------------------------ spans
    async def add_span(self, span: Span | dict[str, Any]) -> Span:
        return await self.store.add_span(span if isinstance(span, Span) else Span.model_validate(span))

    async def add_many_spans(self, spans: Sequence[Span | dict[str, Any]]) -> list[Span]:
        return await self.store.add_spans([s if isinstance(s, Span) else Span.model_validate(s) for s in spans])

    async def add_otel_span(self, rollout_id: str, attempt_id: str, readable_span: ReadableSpan,
                            sequence_id: int | None = None) -> Span:
        """Store an OpenTelemetry SDK span as a span of the attempt."""
        span = to_span(readable_span, rollout_id, attempt_id)
        if sequence_id is not None:
            span = span.model_copy(update={"sequence_id": sequence_id})
        return await self.store.add_span(span)

    async def get_next_span_sequence_id(self, rollout_id: str, attempt_id: str) -> int:
        spans = await self.store.get_spans(rollout_id, attempt_id)
        return max((s.sequence_id for s in spans if s.sequence_id is not None), default=-1) + 1

    async def get_many_span_sequence_ids(self, rollout_attempt_ids: Sequence[tuple[str, str]]) -> list[int]:
        return [await self.get_next_span_sequence_id(r, a) for r, a in rollout_attempt_ids]

    async def query_spans(
        self,
        rollout_id: str,
        attempt_id: str | None = None,
        *,
        trace_id: str | None = None,
        trace_id_contains: str | None = None,
        span_id: str | None = None,
        span_id_contains: str | None = None,
        parent_id: str | None = None,
        parent_id_contains: str | None = None,
        name: str | None = None,
        name_contains: str | None = None,
        filter_logic: Literal["and", "or"] = "and",
        limit: int = -1,
        offset: int = 0,
        sort_by: str | None = "sequence_id",
        sort_order: Literal["asc", "desc"] = "asc",
    ) -> list[Span]:
        """Every span of the rollout (or attempt; ``"latest"`` for the latest) that
        matches, ordered by attempt then sequence id unless ``sort_by`` says otherwise."""
        exact = {"trace_id": trace_id, "span_id": span_id, "parent_id": parent_id, "name": name}
        partial = {"trace_id": trace_id_contains, "span_id": span_id_contains, "parent_id": parent_id_contains,
                   "name": name_contains}
        tests: list[Callable[[Span], bool]] = []
        for field, want in exact.items():
            if want is not None:
                tests.append(functools.partial(_equals, field, want))
        for field, part in partial.items():
            if part:
                tests.append(functools.partial(_contains, field, part))
        keep = combine(tests, filter_logic)
        spans = [s for s in await self.store.get_spans(rollout_id, attempt_id) if keep(s)]
        if sort_by == "sequence_id":  # the store's order already (attempt, then sequence id)
            sort_by = None
            spans = spans[::-1] if sort_order == "desc" else spans
        return window(spans, sort_by, sort_order, limit, offset)

    # ------------------------------------------------------------------ resources
    async def add_resources(self, resources: NamedResources) -> ResourcesUpdate:
        """Publish a new version holding ``resources`` (a plain string is a prompt template)."""
        return ResourcesUpdate.of(await self.store.add_resources(resources_of(resources)))

    async def update_resources(self, resources_id: str, resources: NamedResources) -> ResourcesUpdate:
        """Publish ``resources`` as a *new* version: agentbolt never changes a published
        version (every rollout records the one it ran with); the returned id is the new one."""
        if resources_id != "default":  # v0.3's Baseline names its one version "default"
            version_of(resources_id)  # a malformed id is still an error
        return ResourcesUpdate.of(await self.store.add_resources(resources_of(resources)))

    async def get_resources_by_id(self, resources_id: str) -> ResourcesUpdate | None:
        version = version_of(resources_id)
        try:
            return ResourcesUpdate.of(await self.store.get_resources(version)) if version is not None else None
        except NotFoundError:
            return None

    async def get_latest_resources(self) -> ResourcesUpdate | None:
        latest = await self.store.get_latest_resources()
        return ResourcesUpdate.of(latest) if latest is not None else None

    async def query_resources(self, *, resources_id_contains: str | None = None, sort_by: str | None = None,
                              sort_order: Literal["asc", "desc"] = "asc", limit: int = -1,
                              offset: int = 0) -> list[ResourcesUpdate]:
        out: list[ResourcesUpdate] = []
        cursor: str | None = None
        while True:
            page = await self.store.query_resources(limit=_PAGE, cursor=cursor)
            out.extend(ResourcesUpdate.of(r) for r in page.items)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        out.reverse()  # oldest first, as v0.3 lists them
        if resources_id_contains:
            out = [r for r in out if resources_id_contains in r.resources_id]
        return window(out, sort_by, sort_order, limit, offset)

    # ------------------------------------------------------------------ workers
    async def query_workers(self, *, status_in: Sequence[WorkerStatus | str] | None = None,
                            worker_id_contains: str | None = None, filter_logic: Literal["and", "or"] = "and",
                            sort_by: str | None = None, sort_order: Literal["asc", "desc"] = "asc",
                            limit: int = -1, offset: int = 0) -> list[Worker]:
        tests: list[Callable[[Worker], bool]] = []
        if status_in is not None:
            wanted = {WorkerStatus(s) for s in status_in}
            tests.append(lambda w: w.status in wanted)
        if worker_id_contains:
            tests.append(lambda w: worker_id_contains in w.worker_id)
        keep = combine(tests, filter_logic)
        return window([w for w in await self.store.query_workers() if keep(w)], sort_by, sort_order, limit, offset)

    async def get_worker_by_id(self, worker_id: str) -> Worker | None:
        try:
            return await self.store.get_worker(worker_id)
        except NotFoundError:
            return None

    async def update_worker(self, worker_id: str, heartbeat_stats: dict[str, Any] | None = None) -> Worker:
        metadata = {"heartbeat_stats": heartbeat_stats} if heartbeat_stats is not None else None
        return await self.store.update_worker(worker_id, metadata=metadata)

    # ------------------------------------------------------------------ lifecycle
    async def close(self) -> None:
        await self.store.close()


class InMemoryLightningStore(LightningStore):
    """A :class:`LightningStore` over a new agentbolt :class:`~agentbolt.MemoryStore`.
    v0.3's tuning options (eviction thresholds, ``thread_safe``) do not apply and are ignored."""

    def __init__(self, **_options: Any) -> None:
        super().__init__(MemoryStore())


def _equals(field: str, want: Any, span: Span) -> bool:
    return bool(getattr(span, field) == want)  # third-party: v0.3's filter names a span field


def _contains(field: str, part: str, span: Span) -> bool:
    return part in (getattr(span, field) or "")  # third-party: v0.3's filter names a span field


def LightningStoreThreaded(store: LightningStore | Store) -> LightningStore:
    """v0.3 wrapped a store to share it between threads; agentbolt's runners share a store
    as asyncio tasks of one loop, so this returns the store as a :class:`LightningStore`."""
    return as_lightning_store(store)


def as_lightning_store(store: LightningStore | Store) -> LightningStore:
    return store if isinstance(store, LightningStore) else LightningStore(store)


def as_store(store: Any) -> Any:
    """The agentbolt store behind a :class:`LightningStore` (anything else unchanged)."""
    return store.store if isinstance(store, LightningStore) else store



__getattr__ = module_getattr(__name__)  # third-party: v0.3 names defined elsewhere, or not provided (why)
