"""Groups of rollouts in flight: the two GRPO schedules.

A *group* is G rollouts of one task, enqueued together with the same ``group_id`` in
their metadata. The scheduler keeps ``in_flight`` groups queued or running:

* **sync** (``in_flight == tasks_per_step``): enqueue one batch of groups, wait for all
  of them, train, repeat — nothing runs while the policy trains.
* **async** (``in_flight > tasks_per_step``): the first ``tasks_per_step`` groups to
  complete are handed to the trainer, the rest keep running (carried over to the next
  step) and new groups refill the pipeline right away, so runners never wait for the
  update. Their tokens may come from an older policy: the staleness bound and the
  importance weights of the loss deal with that.

Tasks are drawn epoch by epoch from the training set (shuffled per epoch with the seed);
the position is part of :meth:`GroupScheduler.state`, so a resumed run draws the tasks a
crashed one would have drawn next.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentbolt.algorithms.base import AlgorithmContext
from agentbolt.types import Rollout, RolloutMode, RolloutStatus

__all__ = ["Group", "GroupScheduler"]

log = logging.getLogger("agentbolt.algorithms.grpo")

@dataclass
class Group:
    """G rollouts of one task."""

    group_id: str
    task_index: int
    rollout_ids: list[str]
    enqueued_version: int | None
    enqueued_at: float = field(default_factory=time.time)
    rollouts: list[Rollout] = field(default_factory=list)
    """Filled in (finished) when the group is handed out."""

    def to_json(self) -> dict[str, Any]:
        return {"group_id": self.group_id, "task_index": self.task_index, "rollout_ids": self.rollout_ids,
                "enqueued_version": self.enqueued_version, "enqueued_at": self.enqueued_at}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Group:
        return cls(data["group_id"], int(data["task_index"]), list(data["rollout_ids"]),
                   data.get("enqueued_version"), float(data.get("enqueued_at", time.time())))


class GroupScheduler:
    """Enqueues groups of ``group_size`` rollouts and hands out complete ones."""

    def __init__(self, ctx: AlgorithmContext, dataset: Sequence[Any], *, group_size: int, in_flight: int,
                 shuffle: bool = True, seed: int = 0, timeout: float | None = None) -> None:
        if not dataset:
            raise ValueError("GRPO needs a non-empty training dataset")
        self.ctx = ctx
        self.dataset = list(dataset)
        self.group_size = group_size
        self.in_flight = in_flight
        self.shuffle = shuffle
        self.seed = seed
        self.timeout = timeout
        self.epoch = 0
        self.cursor = 0
        self.groups_started = 0
        self.pending: list[Group] = []
        self._order = self._epoch_order(0)

    # ------------------------------------------------------------------ task order
    def _epoch_order(self, epoch: int) -> list[int]:
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(f"{self.seed}-{epoch}").shuffle(order)
        return order

    def _next_task(self) -> int:
        if self.cursor >= len(self._order):
            self.epoch += 1
            self.cursor = 0
            self._order = self._epoch_order(self.epoch)
        index = self._order[self.cursor]
        self.cursor += 1
        return index

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        """Where the task stream is and which groups are in flight (for checkpoints)."""
        return {"epoch": self.epoch, "cursor": self.cursor, "groups_started": self.groups_started,
                "pending": [g.to_json() for g in self.pending]}

    def restore(self, state: dict[str, Any]) -> None:
        self.epoch = int(state["epoch"])
        self.cursor = int(state["cursor"])
        self.groups_started = int(state.get("groups_started", 0))
        self._order = self._epoch_order(self.epoch)
        self.pending = [Group.from_json(g) for g in state.get("pending", [])]

    async def _first_complete(self, n: int) -> list[Group]:
        """Wait (one long-poll per group, waking as each group finishes) until ``n``
        pending groups are complete — or all of them, if fewer are pending; their
        finished rollouts are filled in."""
        store = self.ctx.store
        need = min(n, len(self.pending))
        waits = {asyncio.ensure_future(store.wait_for_rollouts(g.rollout_ids)): g for g in self.pending}
        done_groups: list[Group] = []
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        try:
            while len(done_groups) < need:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                done, _ = await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    raise TimeoutError(
                        f"only {len(done_groups)} of the {need} groups needed finished within {self.timeout:g} s: "
                        "are runners running? (GRPOConfig.rollout_timeout)"
                    )
                for task in done:
                    group = waits.pop(task)
                    finished = {r.rollout_id: r for r in task.result()}
                    if len(finished) == len(set(group.rollout_ids)):
                        group.rollouts = [finished[rid] for rid in group.rollout_ids]
                        done_groups.append(group)
        finally:
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
        order = {g.group_id: i for i, g in enumerate(self.pending)}
        return sorted(done_groups, key=lambda g: order[g.group_id])

    async def cancel_lost(self) -> int:
        """After :meth:`restore`: cancel the unfinished rollouts of groups a crashed run
        started after its checkpoint (they are not in flight here, and a resumed run
        draws their tasks again), so runners do not run them again for nothing."""
        keep = {rid for g in self.pending for rid in g.rollout_ids}
        unfinished = [s for s in RolloutStatus if not s.is_terminal]
        lost, cursor = [], None
        while True:
            page = await self.ctx.store.query_rollouts(status=unfinished, mode=RolloutMode.TRAIN, limit=500,
                                                       cursor=cursor)
            for r in page.items:
                seq = r.metadata.get("group_seq")
                if isinstance(seq, int) and seq >= self.groups_started and r.rollout_id not in keep:
                    lost.append(r.rollout_id)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        for rid in lost:
            await self.ctx.store.cancel_rollout(rid)
        return len(lost)

    async def cancel_pending(self) -> None:
        """At the end of a run: the groups still in flight are not needed, cancel their
        rollouts (after a crash they stay, and a resumed run picks them up)."""
        for group in self.pending:
            for rid in group.rollout_ids:
                try:
                    await self.ctx.store.cancel_rollout(rid)
                except Exception as exc:  # noqa: BLE001 — finished meanwhile, or the store is going away
                    log.debug("could not cancel rollout %s: %s", rid, exc)

    # ------------------------------------------------------------------ flow
    async def fill(self, version: int | None) -> int:
        """Enqueue groups until ``in_flight`` are pending; returns how many were added."""
        added = 0
        while len(self.pending) < self.in_flight:
            index = self._next_task()
            group_id = f"g{self.groups_started:06d}-t{index}"
            self.groups_started += 1
            rollouts = await self.ctx.enqueue(
                [self.dataset[index]] * self.group_size, RolloutMode.TRAIN,
                metadata={"group_id": group_id, "group_seq": self.groups_started - 1, "task_index": index,
                          "policy_version": version},
            )
            self.pending.append(Group(group_id, index, [r.rollout_id for r in rollouts], version))
            added += 1
        return added

    async def next_batch(self, n: int, version: int | None) -> list[Group]:
        """The first ``n`` groups whose rollouts have all finished (refilling the
        pipeline first); the other pending groups stay in flight."""
        await self.fill(version)
        complete = await self._first_complete(n)
        taken = complete[:n]
        taken_ids = {g.group_id for g in taken}
        self.pending = [g for g in self.pending if g.group_id not in taken_ids]
        return taken
