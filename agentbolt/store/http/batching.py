"""Coalesce concurrent store calls into ``POST /v1/batch`` requests.

Many runner tasks share one :class:`~agentbolt.store.http.HttpStore`; each claims,
posts spans and reports outcomes on its own. Sent one by one, every call pays a full
HTTP round trip and a server request. The :class:`Batcher` sends a call at once when no
batch is in flight; while ``concurrency`` batches are in flight, new calls wait and go
together in the next one. Under load, batches grow by themselves; when idle, a call
costs one request, as before.

A batcher belongs to one event loop. Each caller gets its own result (or its own
error): the batch only shares the trip.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from agentbolt.store.errors import StoreError

__all__ = ["MAX_BATCH_BYTES", "MAX_BATCH_OPS", "Batcher"]

MAX_BATCH_OPS = 10_000
"""Most ops per batch request (the server's limit)."""
MAX_BATCH_BYTES = 4 * 2**20
"""A batch closes once its ops reach this many bytes (well under the server's default
16 MiB body limit); a larger single op travels alone."""

SendBatch = Callable[[bytes, int], Awaitable[list[dict[str, Any]]]]
"""``send(body, n_ops)`` posts one batch body and returns its ``n_ops`` results."""


def _copy_error(exc: BaseException) -> BaseException:
    """A fresh exception of the same kind per caller, so tracebacks do not pile up."""
    if isinstance(exc, StoreError):
        twin = type(exc)(exc.message)
        twin.status_code = exc.status_code
        twin.__cause__ = exc.__cause__
        return twin
    return exc


class Batcher:
    """Queue of op bodies, flushed as batch requests (see the module docstring)."""

    def __init__(
        self,
        send: SendBatch,
        *,
        concurrency: int = 2,
        max_ops: int = MAX_BATCH_OPS,
        max_bytes: int = MAX_BATCH_BYTES,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self._send = send
        self._concurrency = concurrency
        self._max_ops = max_ops
        self._max_bytes = max_bytes
        self._pending: deque[tuple[bytes, asyncio.Future[dict[str, Any]]]] = deque()
        self._in_flight = 0
        self._scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.batches_sent = 0
        """How many batch requests went out (for tests and tuning)."""

    def submit(self, op: bytes) -> asyncio.Future[dict[str, Any]]:
        """Queue one op (``{"op": ..., "args": ...}`` as JSON bytes); the future gets its
        result object ``{"ok": ..., ...}`` or the error that failed the whole batch."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._pending.append((op, fut))
        self._schedule(loop)
        return fut

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        # call_soon, not a direct flush: calls made in the same loop iteration (and
        # tasks woken by the previous batch's results) join this batch.
        if not self._scheduled and self._in_flight < self._concurrency and self._pending:
            self._scheduled = True
            loop.call_soon(self._flush)

    def _take(self) -> tuple[list[bytes], list[asyncio.Future[dict[str, Any]]]]:
        ops: list[bytes] = []
        futs: list[asyncio.Future[dict[str, Any]]] = []
        size = 0
        while self._pending and len(ops) < self._max_ops:
            op, fut = self._pending[0]
            if fut.done():  # the caller gave up (cancelled) before it was sent
                self._pending.popleft()
                continue
            if ops and size + len(op) > self._max_bytes:
                break
            self._pending.popleft()
            ops.append(op)
            futs.append(fut)
            size += len(op) + 1
        return ops, futs

    def _flush(self) -> None:
        self._scheduled = False
        loop = asyncio.get_running_loop()
        while self._in_flight < self._concurrency:
            ops, futs = self._take()
            if not ops:
                return
            self._in_flight += 1
            self.batches_sent += 1
            task = loop.create_task(self._run(ops, futs))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, ops: list[bytes], futs: list[asyncio.Future[dict[str, Any]]]) -> None:
        try:
            body = b'{"ops":[' + b",".join(ops) + b"]}"
            results = await self._send(body, len(ops))
            if len(results) != len(futs):
                raise StoreError(f"the server answered {len(results)} results to a batch of {len(futs)} ops")
        except BaseException as exc:
            for fut in futs:
                if not fut.done():
                    fut.set_exception(_copy_error(exc))
            if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
                raise
        else:
            for fut, result in zip(futs, results, strict=True):
                if not fut.done():
                    fut.set_result(result)
        finally:
            self._in_flight -= 1
            self._schedule(asyncio.get_running_loop())

    async def aclose(self) -> None:
        """Wait for batches in flight to finish (their callers get their answers)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
