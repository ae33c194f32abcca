"""What an execution strategy does: run the algorithm while runners work, then stop
the runners — wherever they live (tasks in this process, child processes, other
machines).
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from agentbolt.runner.runner import Runner
from agentbolt.store.base import Store

if TYPE_CHECKING:
    from agentbolt.gateway.control import GatewayControl
    from agentbolt.gateway.gateway import Gateway
    from agentbolt.gateway.spec import GatewaySpec

__all__ = [
    "AlgorithmMain",
    "ExecutionStrategy",
    "RunnerSpec",
    "RunnersFailedError",
    "process_gateway",
    "run_supervised",
    "server_gateway",
]

log = logging.getLogger("agentbolt.trainer")

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class AlgorithmMain(Protocol[T_co]):
    """The algorithm's side of a run: given the store to use and the run's gateway
    control (``None`` when the run has neither a gateway nor a server), do the work and
    return a result. Strategies call it as ``main(store, control)``."""

    def __call__(self, store: Store, gateway: GatewayControl | None = None, /) -> Awaitable[T_co]: ...


class RunnersFailedError(RuntimeError):
    """The runners (or the server they use) stopped and cannot be brought back, so the
    algorithm would wait forever."""


@dataclass
class RunnerSpec:
    """How to build runners — a plain, picklable description (child processes get it).

    ``agent`` is what the user gave: an object (pickled by reference for child
    processes) or a ``"module:object"`` string.
    """

    agent: Any
    concurrency: int = 4
    hooks: Any = ()
    heartbeat_interval: float = 2.0
    poll_interval: float = 0.2
    shutdown_grace: float = 10.0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_runner(cls, runner: Runner | None, *, agent: Any = None, hooks: Any = ()) -> RunnerSpec:
        """Settings of ``runner`` (a template, e.g. ``Runner(run_fn=fn, concurrency=8)``),
        with ``agent`` replacing its agent and ``hooks`` added after its own."""
        extra_hooks = _as_list(hooks)
        if runner is None:
            if agent is None:
                raise TypeError("no agent: pass one to fit(agent, ...) or give Trainer(runner=Runner(run_fn=...))")
            return cls(agent=agent, hooks=tuple(extra_hooks))
        if agent is None:
            if runner.agent is None:
                raise TypeError("no agent: the Runner has none and fit() got none")
            agent = runner.agent.source
        return cls(
            agent=agent,
            concurrency=runner.concurrency,
            hooks=tuple(_as_list(runner.hooks_source) + extra_hooks),
            heartbeat_interval=runner.heartbeat_interval,
            poll_interval=runner.poll_interval,
            shutdown_grace=runner.shutdown_grace,
        )

    def build(self, store: Store, *, worker_id: str | None = None, tracer: Any = None) -> Runner:
        return Runner(
            self.agent,
            store=store,
            concurrency=self.concurrency,
            worker_id=worker_id,
            hooks=self.hooks,
            tracer=tracer,
            heartbeat_interval=self.heartbeat_interval,
            poll_interval=self.poll_interval,
            shutdown_grace=self.shutdown_grace,
            **self.extra,
        )


def _as_list(hooks: Any) -> list[Any]:
    if hooks is None:
        return []
    if isinstance(hooks, (list, tuple)):
        return list(hooks)
    return [hooks]


class ExecutionStrategy(abc.ABC):
    """Where runners run. :meth:`execute` starts them, runs ``main`` (the algorithm)
    against a store that reaches them, stops them and returns ``main``'s result.

    ``gateway`` (given only when the trainer has one) — serve the model gateway next to
    the store, so agents (a :class:`~agentbolt.runner.harness.Harness`'s programs) reach
    their model through it.
    """

    name: ClassVar[str]
    run_dir: str | Path | None = None
    """Where a strategy that starts a server keeps its files (the SQLite store, logs);
    the trainer's ``run_dir`` fills it when unset. Unused by the in-process strategy."""

    @abc.abstractmethod
    async def execute(
        self,
        main: AlgorithmMain[T],
        runners: RunnerSpec,
        *,
        n_runners: int,
        store: Store | str | None,
        gateway: GatewaySpec | Gateway | None = None,
    ) -> T: ...


def process_gateway(gateway: GatewaySpec | Gateway | None, strategy: str) -> GatewaySpec | None:
    """The gateway as a spec a server process can build; a live Gateway cannot go there."""
    from agentbolt.gateway.spec import GatewaySpec

    if gateway is None or isinstance(gateway, GatewaySpec):
        return gateway
    raise TypeError(
        f"the {strategy} strategy serves the gateway from a server process, which cannot receive a "
        f"{type(gateway).__name__} object: describe it as data, e.g. gateway=GatewaySpec(engine=EngineSpec("
        "kind='vllm', url='http://127.0.0.1:8000/v1')), or use strategy='inprocess'"
    )


def server_gateway(store: Store) -> GatewayControl | None:
    """The gateway control of the server the algorithm's store talks to: a
    :class:`~agentbolt.gateway.control.RemoteGateway` (the caller closes it) when ``store``
    is an :class:`~agentbolt.store.http.HttpStore`, else None (no server, so no gateway)."""
    from agentbolt.store.http import HttpStore

    if not isinstance(store, HttpStore):
        return None
    from agentbolt.gateway.control import RemoteGateway

    return RemoteGateway(store.base_url, token=store.token)


async def run_supervised(main: Awaitable[T], watch: Awaitable[Any]) -> T:
    """Run ``main`` while ``watch`` looks after the runners. ``watch`` only returns by
    raising (e.g. :class:`RunnersFailedError`); then ``main`` is cancelled and that
    error raised. Cancelling this cancels both."""
    main_task = asyncio.ensure_future(main)
    watch_task = asyncio.ensure_future(watch)
    try:
        done, _ = await asyncio.wait({main_task, watch_task}, return_when=asyncio.FIRST_COMPLETED)
        if main_task in done:
            return main_task.result()
        main_task.cancel()
        await asyncio.gather(main_task, return_exceptions=True)
        watch_task.result()
        raise RunnersFailedError("the runners stopped before the algorithm finished")
    finally:
        for task in (main_task, watch_task):
            if not task.done():
                task.cancel()
        await asyncio.gather(main_task, watch_task, return_exceptions=True)
