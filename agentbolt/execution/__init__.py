"""Execution strategies: where a trainer's runners run.

* ``"inprocess"`` — asyncio tasks in this process (default; any agent).
* ``"multiprocess"`` — a server on SQLite plus runner processes (agent importable).
* ``"external"`` — a server for ``agentbolt runner`` processes you start anywhere.

Other spellings (``"in-process"``, ``"multi_process"``...) are :data:`agentbolt.aliases.STRATEGIES`.
"""

from agentbolt.aliases import STRATEGIES
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
    "multiprocess": MultiProcessStrategy,
    "external": ExternalStrategy,
}


def strategy_from(value: "str | ExecutionStrategy") -> ExecutionStrategy:
    """An execution strategy from its name (or the strategy itself)."""
    if isinstance(value, ExecutionStrategy):
        return value
    try:
        name = value.lower()
        return _BY_NAME[STRATEGIES.get(name, name)]()
    except (KeyError, AttributeError):
        raise ValueError(
            f"unknown execution strategy {value!r}: use 'inprocess', 'multiprocess' or 'external' "
            "(or an ExecutionStrategy object)"
        ) from None
