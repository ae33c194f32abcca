"""v0.3's ``Algorithm`` base class, and how agentbolt's Trainer runs one.

A v0.3 algorithm implements ``run(train_dataset, val_dataset)`` and reaches the store
with ``self.get_store()``. :class:`V03Algorithm` is the agentbolt
:class:`~agentbolt.algorithms.Algorithm` that :class:`~agentbolt.Trainer` makes of it:
it hands the algorithm the run's store (as a v0.3
:class:`~agentbolt.compat.store.LightningStore`), the initial resources, the adapter and
the LLM proxy, then runs it (a synchronous ``run`` in a worker thread).
"""

from __future__ import annotations

import asyncio
import inspect
import weakref
from typing import Any

from agentbolt.algorithms.base import Algorithm as BoltAlgorithm
from agentbolt.algorithms.base import AlgorithmContext
from agentbolt.compat.store import LightningStore, as_lightning_store
from agentbolt.compat.types import NamedResources

__all__ = ["Algorithm", "V03Algorithm"]


class Algorithm:
    """v0.3's algorithm base: override :meth:`run` (sync or async)."""

    _store: LightningStore | None = None
    _initial_resources: NamedResources | None = None
    _trainer_ref: Any = None
    _adapter: Any = None
    _llm_proxy: Any = None

    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.run)

    def set_trainer(self, trainer: Any) -> None:
        self._trainer_ref = weakref.ref(trainer)

    def get_trainer(self) -> Any:
        trainer = self._trainer_ref() if self._trainer_ref is not None else None
        if trainer is None:
            raise ValueError("this algorithm has no trainer: run it through Trainer.fit")
        return trainer

    def set_store(self, store: Any) -> None:
        self._store = as_lightning_store(store)

    def get_store(self) -> LightningStore:
        if self._store is None:
            raise ValueError("this algorithm has no store yet: run it through Trainer.fit, or call set_store(store)")
        return self._store

    def set_initial_resources(self, resources: NamedResources) -> None:
        self._initial_resources = resources

    def get_initial_resources(self) -> NamedResources | None:
        return self._initial_resources

    def set_adapter(self, adapter: Any) -> None:
        self._adapter = adapter

    def get_adapter(self) -> Any:
        if self._adapter is None:
            raise ValueError("no adapter was given: Trainer(adapter=...)")
        return self._adapter

    def set_llm_proxy(self, llm_proxy: Any) -> None:
        self._llm_proxy = llm_proxy

    def get_llm_proxy(self) -> Any:
        return self._llm_proxy

    def run(self, train_dataset: Any = None, val_dataset: Any = None) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement run(train_dataset=None, val_dataset=None)")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(*args, **kwargs)


class V03Algorithm(BoltAlgorithm):
    """An agentbolt algorithm running a v0.3 one (see the module doc)."""

    def __init__(self, algorithm: Algorithm, *, initial_resources: NamedResources | None = None,
                 adapter: Any = None, llm_proxy: Any = None) -> None:
        self.algorithm = algorithm
        self.initial_resources = initial_resources
        self.adapter = adapter
        self.llm_proxy = llm_proxy

    def __repr__(self) -> str:
        return f"<v0.3 algorithm {type(self.algorithm).__name__}>"

    async def run(self, ctx: AlgorithmContext) -> Any:
        algo = self.algorithm
        algo.set_store(LightningStore(ctx.store))
        if self.initial_resources is not None:
            algo.set_initial_resources(self.initial_resources)
        if self.adapter is not None:
            algo.set_adapter(self.adapter)
        if self.llm_proxy is not None:
            algo.set_llm_proxy(self.llm_proxy)
        if algo.is_async():
            return await algo.run(train_dataset=ctx.train_dataset, val_dataset=ctx.val_dataset)
        result = await asyncio.to_thread(algo.run, train_dataset=ctx.train_dataset, val_dataset=ctx.val_dataset)
        return await result if inspect.isawaitable(result) else result
