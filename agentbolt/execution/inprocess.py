"""In-process execution: runners are asyncio tasks next to the algorithm, in one
process, sharing one store object and one tracer. The default for small jobs, and the
only strategy that accepts any agent (lambdas and closures included).

With a gateway, the store and the gateway are also served over HTTP from a background
thread of this process, and the runners reach the store through that server — as they
do in the process strategies — so each attempt gets its scoped token and a
:class:`~agentbolt.runner.harness.Harness` finds the gateway with no ``server_url``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, TypeVar

from agentbolt.execution.base import (
    AlgorithmMain,
    ExecutionStrategy,
    RunnersFailedError,
    RunnerSpec,
    run_supervised,
    server_gateway,
)
from agentbolt.runner.job import RunnerStats
from agentbolt.store.base import Store

if TYPE_CHECKING:
    from agentbolt.gateway.control import GatewayControl
    from agentbolt.gateway.gateway import Gateway
    from agentbolt.gateway.spec import GatewaySpec

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
        main: AlgorithmMain[T],
        runners: RunnerSpec,
        *,
        n_runners: int,
        store: Store | str | None,
        gateway: GatewaySpec | Gateway | None = None,
    ) -> T:
        from agentbolt.tracing.tracer import Tracer

        store_obj, owned = _local_store(store)
        await store_obj.start()
        try:
            async with _served(store_obj, gateway) as (runner_store, control):
                tracer = Tracer(runner_store)
                tracer.start()
                stop = asyncio.Event()
                prefix = uuid.uuid4().hex[:6]
                tasks = [
                    asyncio.create_task(
                        runners.build(runner_store, worker_id=f"inproc-{prefix}-{i}", tracer=tracer).run(stop=stop),
                        name=f"agentbolt-runner-{i}",
                    )
                    for i in range(n_runners)
                ]
                interrupted = False
                try:
                    return await run_supervised(main(store_obj, control), _watch(tasks))
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
        finally:
            if owned:
                await store_obj.close()


@contextlib.asynccontextmanager
async def _served(
    store: Store, gateway: GatewaySpec | Gateway | None
) -> AsyncIterator[tuple[Store, GatewayControl | None]]:
    """The store runners use and the gateway's control: ``store`` itself and, when it is
    a server's HttpStore, a RemoteGateway to that server's gateway (else None); or — with
    a gateway — an HttpStore to a server of ``store`` + gateway in a background thread
    (stopped after the runners) and a
    :class:`~agentbolt.gateway.control.LocalGatewayControl` for algorithms that update
    the served weights."""
    if gateway is None:
        control = server_gateway(store)
        try:
            yield store, control
        finally:
            if control is not None:
                await control.aclose()
        return
    from agentbolt.gateway.gateway import Gateway
    from agentbolt.gateway.spec import as_gateway_spec
    from agentbolt.server.testing import serve_in_thread
    from agentbolt.store.http import HttpStore

    if isinstance(store, HttpStore):  # a conflict of settings, as for the process strategies
        raise ValueError(  # noqa: TRY004
            f"the store is the running server at {store.base_url}, so there is no server here to put the gateway "
            "in: start that server with the engine (`agentbolt server --engine ...`) and leave gateway= out"
        )
    if not isinstance(gateway, Gateway):
        spec = as_gateway_spec(gateway)
        log.info("starting the gateway: %s", spec.engine.describe())
        gateway = await asyncio.to_thread(spec.build)  # a local model loads here
    token = secrets.token_urlsafe(24)
    with contextlib.ExitStack() as stack:
        # entering and leaving wait for the server thread: off the event loop
        url = await asyncio.to_thread(stack.enter_context, serve_in_thread(store, admin_token=token, gateway=gateway))
        log.info("agentbolt server with the gateway on %s (in a thread of this process)", url)
        runner_store = HttpStore(url, token=token)
        try:
            await runner_store.start()
            from agentbolt.gateway.control import LocalGatewayControl

            yield runner_store, LocalGatewayControl(gateway, server_url=url)
        finally:
            await runner_store.close()
            await asyncio.to_thread(stack.close)


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
