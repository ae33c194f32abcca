"""Execution strategies: where a trainer's runners run.

* ``"inprocess"`` — asyncio tasks in this process (default; any agent).
* ``"multiprocess"`` — a server on SQLite plus runner processes (agent importable).
* ``"external"`` — a server for ``agentbolt runner`` processes you start anywhere.
"""

from agentbolt.execution.base import ExecutionStrategy, RunnersFailedError, RunnerSpec
from agentbolt.execution.external import ExternalStrategy
from agentbolt.execution.inprocess import InProcessStrategy
from agentbolt.execution.multiprocess import MultiProcessStrategy

__all__ = [
    "ExecutionStrategy",
    "RunnerSpec",
    "RunnersFailedError",
    "InProcessStrategy",
    "MultiProcessStrategy",
    "ExternalStrategy",
    "strategy_from",
]

_BY_NAME = {
    "inprocess": InProcessStrategy,
    "in-process": InProcessStrategy,
    "in_process": InProcessStrategy,
    "multiprocess": MultiProcessStrategy,
    "multi-process": MultiProcessStrategy,
    "multi_process": MultiProcessStrategy,
    "external": ExternalStrategy,
}


def strategy_from(value: "str | ExecutionStrategy") -> ExecutionStrategy:
    """An execution strategy from its name (or the strategy itself)."""
    if isinstance(value, ExecutionStrategy):
        return value
    try:
        return _BY_NAME[value.lower()]()
    except (KeyError, AttributeError):
        raise ValueError(
            f"unknown execution strategy {value!r}: use 'inprocess', 'multiprocess' or 'external' "
            "(or an ExecutionStrategy object)"
        ) from None
