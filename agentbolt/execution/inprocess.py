"""In-process execution: runners are asyncio tasks next to the algorithm, in one
process, sharing one store object and one tracer. The default for small jobs, and the
only strategy that accepts any agent (lambdas and closures included)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agentbolt.execution.base import ExecutionStrategy, RunnersFailedError, RunnerSpec, run_supervised
from agentbolt.runner.runner import RunnerStats
from agentbolt.store.base import Store

__all__ = ["InProcessStrategy"]

log = logging.getLogger("agentbolt.trainer")

T = TypeVar("T")


def _local_store(store: Store | str | None) -> tuple[Store, bool]:
    """The store object to use, and whether this strategy made it (and closes it)."""
    if store is None:
        from agentbolt.store.memory import MemoryStore

        return MemoryStore(), True
    if isinstance(store, str):
        from agentbolt.store.url import open_store

        return open_store(store), True
    return store, False


class InProcessStrategy(ExecutionStrategy):
    """``n_runners`` runners as tasks in this process. Without a store, a fresh
    :class:`~agentbolt.store.memory.MemoryStore` is used."""

    name = "inprocess"

    async def execute(
        self,
        main: Callable[[Store], Awaitable[T]],
        runners: RunnerSpec,
        *,
        n_runners: int,
        store: Store | str | None,
    ) -> T:
        from agentbolt.tracing.tracer import Tracer

        store_obj, owned = _local_store(store)
        await store_obj.start()
        tracer = Tracer(store_obj)
        tracer.start()
        stop = asyncio.Event()
        prefix = uuid.uuid4().hex[:6]
        tasks = [
            asyncio.create_task(
                runners.build(store_obj, worker_id=f"inproc-{prefix}-{i}", tracer=tracer).run(stop=stop),
                name=f"agentbolt-runner-{i}",
            )
            for i in range(n_runners)
        ]
        interrupted = False
        try:
            return await run_supervised(main(store_obj), _watch(tasks))
        except asyncio.CancelledError:
            interrupted = True
            raise
        finally:
            if interrupted:  # Ctrl-C: stop running attempts now (they are reported retryable)
                for task in tasks:
                    task.cancel()
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            await tracer.aclose()
            if owned:
                await store_obj.close()


async def _watch(tasks: list[asyncio.Task[RunnerStats]]) -> Any:
    pending = set(tasks)
    first_error: BaseException | None = None
    while pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            exc = None if task.cancelled() else task.exception()
            if exc is not None:
                first_error = first_error or exc
                log.error("an in-process runner stopped with an error", exc_info=exc)
    raise RunnersFailedError(f"every runner stopped before the algorithm finished (first error: {first_error!r})")
