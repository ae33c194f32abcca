"""What an algorithm is, and what it gets to work with.

An algorithm talks only to the store: it enqueues rollouts (one per dataset item),
waits for runners to finish them, reads rewards and spans, and (for learning
algorithms) publishes new resources. :class:`AlgorithmContext` carries the store and
the datasets, with helpers for the enqueue-and-wait step every algorithm needs.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentbolt.store.base import Store
from agentbolt.types import Rollout, RolloutConfig, RolloutCreate, RolloutMode, Span

if TYPE_CHECKING:
    from agentbolt.gateway.control import GatewayControl

__all__ = ["DEFAULT_ROLLOUT_CONFIG", "Algorithm", "AlgorithmContext"]

DEFAULT_ROLLOUT_CONFIG = RolloutConfig(unresponsive_seconds=60.0)
"""Rollouts enqueued by algorithms are retried when their runner goes silent for a
minute (a crashed process, a lost machine); runners heartbeat every few seconds."""

_CHUNK = 500


@dataclass
class AlgorithmContext:
    """The store and datasets an algorithm runs with."""

    store: Store
    train_dataset: Sequence[Any] | None = None
    val_dataset: Sequence[Any] | None = None
    rollout_config: RolloutConfig = field(default_factory=lambda: DEFAULT_ROLLOUT_CONFIG.model_copy(deep=True))
    """Limits and retry rules for rollouts enqueued through this context."""
    gateway: GatewayControl | None = None
    """The run's model gateway, for algorithms that update the weights it serves or read
    its calls: a :class:`~agentbolt.gateway.control.LocalGatewayControl` when it is in this
    process, a :class:`~agentbolt.gateway.control.RemoteGateway` when it is in the server
    the runners use (every execution strategy hands one over); None when the run has no
    server and no gateway."""

    async def enqueue(
        self,
        dataset: Iterable[Any],
        mode: RolloutMode | str = RolloutMode.TRAIN,
        *,
        resources_version: int | None = None,
        config: RolloutConfig | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> list[Rollout]:
        """Queue one rollout per item (its ``input``), in dataset order. Each rollout's
        metadata records its ``dataset_index``."""
        mode = RolloutMode(mode)
        cfg = config or self.rollout_config
        specs = [
            RolloutCreate(
                input=item,
                mode=mode,
                resources_version=resources_version,
                config=cfg,
                metadata={**(metadata or {}), "dataset_index": i},
            )
            for i, item in enumerate(dataset)
        ]
        out: list[Rollout] = []
        for i in range(0, len(specs), _CHUNK):
            out.extend(await self.store.enqueue_rollouts(specs[i : i + _CHUNK]))
        return out

    async def wait(self, rollouts: Sequence[Rollout | str], timeout: float | None = None) -> list[Rollout]:
        """Wait until every rollout has finished (or ``timeout`` s) and return all of
        them, freshly read, in the order given; unfinished ones keep their status."""
        ids = [r if isinstance(r, str) else r.rollout_id for r in rollouts]
        if not ids:
            return []
        finished = await self.store.wait_for_rollouts(ids, timeout=timeout)
        if len(finished) == len(set(ids)):
            by_id = {r.rollout_id: r for r in finished}
        else:
            by_id = {}
            for i in range(0, len(ids), _CHUNK):
                chunk = ids[i : i + _CHUNK]
                page = await self.store.query_rollouts(rollout_ids=chunk, limit=len(chunk))
                by_id.update((r.rollout_id, r) for r in page.items)
        return [by_id[rid] for rid in ids]

    async def run_dataset(
        self,
        dataset: Iterable[Any],
        mode: RolloutMode | str = RolloutMode.TRAIN,
        *,
        resources_version: int | None = None,
        config: RolloutConfig | None = None,
        metadata: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> list[Rollout]:
        """:meth:`enqueue` the dataset, then :meth:`wait` for it: the finished rollouts."""
        rollouts = await self.enqueue(
            dataset, mode, resources_version=resources_version, config=config, metadata=metadata
        )
        return await self.wait(rollouts, timeout=timeout)


class Algorithm(abc.ABC):
    """Base class of algorithms. :meth:`run` is called once by
    :meth:`agentbolt.Trainer.fit` while runners work; what it returns, ``fit`` returns.

    Optional capabilities are declared here, with what an algorithm without them means:
    ``adapter`` (its spans-to-training-data function, previewed by ``Trainer.dev``) and
    ``data_parallel`` with :meth:`follow` (torchrun ranks > 0 join what rank 0 announces)."""

    #: what turns a rollout's spans into this algorithm's training data (GRPO's
    #: :class:`~agentbolt.adapters.SampleAdapter` with its ``agent_match``): ``Trainer.dev``
    #: shows its samples; None: the algorithm trains on no samples of its own (dev shows
    #: the RL adapter's)
    adapter: Callable[[list[Span]], Iterable[Any]] | None = None
    #: whether it trains data-parallel under torchrun: ranks > 0 then run :meth:`follow`
    #: instead of :meth:`run` (GRPO, SFT); False: every rank runs :meth:`run`
    data_parallel: bool = False

    @abc.abstractmethod
    async def run(self, ctx: AlgorithmContext) -> Any:
        """Drive training (or evaluation) through ``ctx.store``."""

    async def follow(self) -> Any:
        """On a torchrun rank > 0 of a ``data_parallel`` algorithm: take part in what rank 0
        announces — every update, and with a sharded policy every read of it
        (:mod:`agentbolt.training.ranks`) — until it says stop. Only called when
        ``data_parallel`` is True."""
        raise NotImplementedError(f"{type(self).__name__} does not train data-parallel (data_parallel = False)")

    def configure_gateway(self, config: Any) -> None:
        """Adjust the run's :class:`~agentbolt.gateway.GatewayConfig` (sampling forced per
        mode, ...) before the trainer starts its gateway. Nothing by default."""
