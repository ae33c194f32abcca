"""v0.3's execution strategies and stop events, on agentbolt's strategies.

* :class:`SharedMemoryExecutionStrategy` (``"shm"``) — agentbolt's ``"inprocess"``:
  runners are asyncio tasks next to the algorithm (v0.3 used threads);
* :class:`ClientServerExecutionStrategy` (``"cs"``) — agentbolt's ``"multiprocess"``:
  the store is served over HTTP and runners are child processes. With every store: a
  SQLite store is served by an ``agentbolt server`` process, any other (in memory —
  ``InMemoryLightningStore``, as in v0.3 — or PostgreSQL) by this process, on ``server_host``/
  ``server_port`` (``AGL_SERVER_HOST``/``AGL_SERVER_PORT``, default loopback and a free
  port), with a fresh admin token the runner processes are given.

v0.3's other options (roles, thread placement, timeouts) have no counterpart and are
ignored; ``agentbolt runner`` plays v0.3's ``runner`` role on other machines (strategy
``"external"``).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import os
import secrets
import threading
from typing import Any, Protocol, TypeVar

from agentbolt.execution.base import AlgorithmMain, ExecutionStrategy, RunnerSpec
from agentbolt.execution.inprocess import InProcessStrategy
from agentbolt.execution.multiprocess import MultiProcessStrategy

__all__ = [
    "ClientServerExecutionStrategy",
    "strategy_of",
    "ExecutionStrategyRegistry",
    "ExecutionEvent",
    "ExecutionStrategy",
    "MultiprocessingEvent",
    "SharedMemoryExecutionStrategy",
    "ThreadingEvent",
]


class SharedMemoryExecutionStrategy(InProcessStrategy):
    """Runners as tasks of this process (agentbolt's ``"inprocess"``)."""

    def __init__(self, **_options: Any) -> None:
        super().__init__()


T = TypeVar("T")


class ClientServerExecutionStrategy(MultiProcessStrategy):
    """A store server and runner processes (agentbolt's ``"multiprocess"``), with any store
    (see the module doc)."""

    def __init__(self, *, server_host: str | None = None, server_port: int | None = None, **_options: Any) -> None:
        super().__init__()
        self.server_host = server_host or os.environ.get("AGL_SERVER_HOST") or "127.0.0.1"
        port = server_port if server_port is not None else os.environ.get("AGL_SERVER_PORT")
        self.server_port = int(port) if port else None

    async def execute(self, main: AlgorithmMain[T], runners: RunnerSpec, *, n_runners: int, store: Any,
                      gateway: Any = None) -> T:
        from agentbolt.store.base import Store
        from agentbolt.store.http import HttpStore
        from agentbolt.store.sqlite import SqliteStore

        if not isinstance(store, Store) or isinstance(store, (HttpStore, SqliteStore)):
            # a SQLite store (or none: one in the run directory) is served by an agentbolt server
            # process; a running server is used as it is
            return await super().execute(main, runners, n_runners=n_runners, store=store, gateway=gateway)
        if gateway is not None:
            raise ValueError(f"the {type(store).__name__} is served by this process, which has no model gateway to "
                             "put in it: give the Trainer a SQLite store (store='sqlite:///run.db', or leave store "
                             "out) with the gateway, or use strategy='shm'")
        from agentbolt.compat.store_server import LightningStoreServer
        from agentbolt.execution.children import free_port

        token = secrets.token_urlsafe(24)
        server = LightningStoreServer(store, self.server_host, self.server_port or free_port(), admin_token=token)
        await server.start()
        connect_host = "127.0.0.1" if self.server_host in ("0.0.0.0", "::", "") else self.server_host
        try:
            served = HttpStore(f"http://{connect_host}:{server.port}", token=token)
            return await super().execute(main, runners, n_runners=n_runners, store=served)
        finally:
            await server.stop()


class ExecutionEvent(Protocol):
    """A stop signal: ``set()``, ``is_set()``, ``wait()``, ``clear()``."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...

    def clear(self) -> None: ...


class ThreadingEvent:
    """A stop signal shared by threads (``LitAgentRunner.iter(event=...)`` stops when set)."""

    def __init__(self) -> None:
        self._event: threading.Event | multiprocessing.synchronize.Event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)


class MultiprocessingEvent(ThreadingEvent):
    """A stop signal shared by processes."""

    def __init__(self) -> None:
        self._event = multiprocessing.get_context("spawn").Event()


ExecutionStrategyRegistry: dict[str, str] = {
    "shm": f"{__name__}:SharedMemoryExecutionStrategy",
    "cs": f"{__name__}:ClientServerExecutionStrategy",
}
"""v0.3's strategy aliases (``Trainer(strategy="shm")``) and the classes they name."""


def _served_here(store: Any) -> bool:
    """Whether ``store`` is one agentbolt's multiprocess strategy cannot hand to runner
    processes itself (an agentbolt store other than SQLite or a running server)."""
    from agentbolt.store.base import Store
    from agentbolt.store.http import HttpStore
    from agentbolt.store.sqlite import SqliteStore

    return isinstance(store, Store) and not isinstance(store, (HttpStore, SqliteStore))


def strategy_of(strategy: Any, store: Any = None) -> Any:
    """The strategy a v0.3 ``Trainer(strategy=...)`` names for ``store``: ``"cs"`` (or
    ``{"type": "cs", **options}``) is agentbolt's ``"multiprocess"``, or a
    :class:`ClientServerExecutionStrategy` when v0.3's server options are given or the
    store must be served by this process (in memory, PostgreSQL); other values are
    returned as they are (agentbolt's names, ``"shm"``, strategy objects)."""
    if strategy == "cs":
        options: dict[str, Any] = {}
    elif isinstance(strategy, dict) and str(strategy.get("type", "")).rsplit(".", 1)[-1] in (
            "cs", "ClientServerExecutionStrategy"):
        options = {k: v for k, v in strategy.items() if k != "type"}
    else:
        return strategy
    if not options and not _served_here(store):
        return "multiprocess"
    return ClientServerExecutionStrategy(**options)
