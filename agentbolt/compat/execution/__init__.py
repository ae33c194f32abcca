"""v0.3's execution strategies and stop events, on agentbolt's strategies.

* :class:`SharedMemoryExecutionStrategy` (``"shm"``) — agentbolt's ``"inprocess"``:
  runners are asyncio tasks next to the algorithm (v0.3 used threads);
* :class:`ClientServerExecutionStrategy` (``"cs"``) — agentbolt's ``"multiprocess"``:
  the store is served over HTTP and runners are child processes.

v0.3's options (roles, hosts, ports, thread placement) have no counterpart and are
ignored: agentbolt picks a free port, and ``agentbolt runner`` plays v0.3's ``runner`` role
on other machines (strategy ``"external"``).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import threading
from typing import Any, Protocol

from agentbolt.execution.base import ExecutionStrategy
from agentbolt.execution.inprocess import InProcessStrategy
from agentbolt.execution.multiprocess import MultiProcessStrategy

__all__ = [
    "ClientServerExecutionStrategy",
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


class ClientServerExecutionStrategy(MultiProcessStrategy):
    """A store server and runner processes (agentbolt's ``"multiprocess"``)."""

    def __init__(self, **_options: Any) -> None:
        super().__init__()


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
