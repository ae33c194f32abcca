"""``FastAlgorithm`` and ``Baseline``: v0.3's quick algorithms for trying an agent out.

:class:`Baseline` runs every training item (mode ``train``) and validation item (mode
``val``) ``n_epochs`` times, keeping at most ``max_queue_length`` rollouts queued, and
logs each finished rollout with its spans and final reward (logger
``agentbolt.compat.baseline``). ``Trainer.dev`` uses agentbolt's own preview instead.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from agentbolt.compat.algorithm.base import Algorithm
from agentbolt.compat.emitter import find_final_reward

__all__ = ["Baseline", "FastAlgorithm"]

log = logging.getLogger("agentbolt.compat.baseline")


class FastAlgorithm(Algorithm):
    """Base of algorithms that give quick feedback (v0.3's ``Trainer.dev`` needed one)."""


class Baseline(FastAlgorithm):
    """Run the datasets through the agent and log what happened (see the module doc)."""

    def __init__(self, *, n_epochs: int = 1, train_split: float = 0.5, polling_interval: float = 5.0,
                 max_queue_length: int = 4, span_verbosity: Literal["keys", "key_values", "none"] = "keys") -> None:
        if not 0.0 < train_split < 1.0:
            raise ValueError("train_split must be between 0 and 1.")
        self.n_epochs = n_epochs
        self.train_split = train_split
        self.polling_interval = min(polling_interval, 0.5)
        self.max_queue_length = max_queue_length
        self.span_verbosity = span_verbosity
        self.rewards: list[float | None] = []
        """Final reward of every finished rollout, in enqueue order."""

    async def run(self, train_dataset: Any = None, val_dataset: Any = None) -> None:
        items = [(x, "train") for x in (train_dataset or [])] + [(x, "val") for x in (val_dataset or [])]
        if not items:
            log.error("Baseline needs a train_dataset or a val_dataset")
            return
        store = self.get_store()
        resources_id = None
        if self._initial_resources is not None and await store.get_latest_resources() is None:
            resources_id = (await store.add_resources(self._initial_resources)).resources_id
        ids: list[str] = []
        for epoch in range(self.n_epochs):
            log.info("Baseline epoch %d/%d: %d items", epoch + 1, self.n_epochs, len(items))
            for item, mode in items:
                while len(await store.query_rollouts(status_in=["queuing", "requeuing"])) > self.max_queue_length:
                    await asyncio.sleep(self.polling_interval)
                ids.append((await store.enqueue_rollout(input=item, mode=mode, resources_id=resources_id)).rollout_id)
        finished = {r.rollout_id: r for r in await store.wait_for_rollouts(rollout_ids=ids)}
        for rid in ids:
            await self._log_rollout(finished[rid])

    async def _log_rollout(self, rollout: Any) -> None:
        spans = await self.get_store().query_spans(rollout.rollout_id, "latest")
        reward = find_final_reward(spans)
        self.rewards.append(reward)
        log.info("[Rollout %s] %s, %d spans, final reward %s", rollout.rollout_id, rollout.status.value,
                 len(spans), reward)
        if self.span_verbosity == "none":
            return
        for span in spans:
            detail = span.attributes if self.span_verbosity == "key_values" else list(span.attributes)
            log.info("[Rollout %s] span #%s %s: %s", rollout.rollout_id, span.sequence_id, span.name, detail)
