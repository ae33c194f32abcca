"""``@algo``: a function as a v0.3 algorithm.

The function takes keyword arguments by name — any of ``store``, ``train_dataset``,
``val_dataset``, ``llm_proxy``, ``adapter``, ``initial_resources`` — and may be async::

    @algo
    async def tune(*, store: LightningStore, train_dataset=None):
        ...

A dataset the function has no parameter for is refused (``TypeError``), as in v0.3: it
would be dropped silently otherwise.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from agentbolt.compat.algorithm.base import Algorithm

__all__ = ["FunctionalAlgorithm", "algo"]


class FunctionalAlgorithm(Algorithm):
    """The algorithm a function decorated with :func:`algo` becomes."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn
        self._params = inspect.signature(fn).parameters
        functools.update_wrapper(self, fn)

    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self._fn)

    def _arguments(self, train_dataset: Any, val_dataset: Any) -> dict[str, Any]:
        available = {
            "store": self._store,
            "train_dataset": train_dataset,
            "val_dataset": val_dataset,
            "llm_proxy": self._llm_proxy,
            "adapter": self._adapter,
            "initial_resources": self._initial_resources,
        }
        if any(p.kind is p.VAR_KEYWORD for p in self._params.values()):
            return available
        for dataset in ("train_dataset", "val_dataset"):
            if available[dataset] is not None and dataset not in self._params:
                raise TypeError(f"{dataset} is provided but not supported by the algorithm function "
                                f"{self._fn!r}: add a {dataset} parameter to it, "
                                f"or do not pass one")
        return {k: v for k, v in available.items() if k in self._params}

    def run(self, train_dataset: Any = None, val_dataset: Any = None) -> Any:
        return self._fn(**self._arguments(train_dataset, val_dataset))


def algo(fn: Callable[..., Any]) -> FunctionalAlgorithm:
    """Make ``fn`` an algorithm ``Trainer(algorithm=...)`` accepts."""
    if not callable(fn):
        raise TypeError(f"@algo decorates a function, got {type(fn).__name__}")
    return FunctionalAlgorithm(fn)
