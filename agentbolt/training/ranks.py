"""Rank 0 leads, the other ``torchrun`` ranks follow: what every rank takes part in.

Under ``torchrun``, ``Trainer.fit`` runs a data-parallel algorithm (``data_parallel =
True``: GRPO) on rank 0 only — the store, the runners, the gateway, the metrics — while
the other ranks run its ``follow()``: they wait for what rank 0 :func:`announce`\\ s and
join it, until it says :func:`stop`. The same loop serves one process (nothing is
announced), data parallelism and a sharded policy:

* an **update** (the algorithm's own operation): every rank trains its share;
* with a policy sharded by FSDP2 (:mod:`.fsdp`), every **read of the whole policy** is
  a collective too — rank 0 cannot gather the weights alone — so rank 0 announces each
  before it makes it, and the others make the same call (:func:`policy_reads`):

  ==============  ===============================================  ==========================
  operation       rank 0                                           the other ranks
  ==============  ===============================================  ==========================
  ``publish``     gathers the weights and sends them to the        gather, and drop them
                  engine (in parts: :mod:`.publish`)
  ``logprobs``    the train = serve probe's forward                the same forward
  ``base``        compares its base weights with the served ones   gather, and drop them
  ``save``        writes its shards and the checkpoint's state     write their shards (DCP)
  ``export``      writes the gathered model                        gather
  ==============  ===============================================  ==========================

  With an unsharded policy (one process, or data parallelism, where rank 0 holds the
  whole policy) these reads are rank 0's alone and nothing is announced
  (:func:`announce_read`).

A rank 0 that fails in the middle of a collective leaves the others waiting in it:
``torchrun`` then stops them all (its default). Rank 0 finishes a collective it started
even when what it does with the result fails (an engine refusing a part), so the ranks
stay in step.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentbolt.training import distributed as dist
from agentbolt.training import fsdp

__all__ = ["Handler", "announce", "announce_read", "export", "follow", "load_checkpoint", "policy_reads", "save_shards",
           "stop"]

Handler = Callable[..., object]
"""What a following rank runs for one announced operation (its arguments: the announcement's)."""


def announce(op: str, **args: Any) -> None:
    """Rank 0: tell the following ranks to join ``op`` with ``args`` (pickled). Nothing
    without a process group."""
    if dist.is_distributed():
        dist.broadcast_object({"op": op, **args})


def announce_read(policy: Any, op: str, **args: Any) -> None:
    """Rank 0, before it reads the whole ``policy``: announce ``op`` when the policy is
    sharded over ranks (the read is then a collective); nothing otherwise."""
    if policy.sharded and dist.is_distributed() and dist.is_main():
        announce(op, **args)


def stop() -> None:
    """Rank 0: the following ranks return from :func:`follow`."""
    if dist.is_distributed():
        dist.broadcast_object(None)


async def follow(handlers: Mapping[str, Handler]) -> None:
    """A rank other than 0: run the handler of each operation rank 0 announces (off the
    event loop), in order, until it stops."""
    while True:
        message = await asyncio.to_thread(dist.broadcast_object, None)
        if message is None:
            return
        op = message.pop("op")
        handler = handlers.get(op)
        if handler is None:
            raise RuntimeError(f"rank 0 announced {op!r}, which this rank cannot join (it joins {sorted(handlers)}): "
                               "every rank must run the same agentbolt version")
        await asyncio.to_thread(handler, **message)


def policy_reads(policy: Any, optimizer: Any = None) -> dict[str, Handler]:
    """The handlers of the reads of a sharded ``policy`` (see the module doc); ``optimizer``:
    the one whose state checkpoints hold with the weights."""
    import torch

    def logprobs(ids: list[list[int]]) -> None:
        t = torch.tensor(ids, device=policy.device)
        policy.inference_logprobs(t, torch.ones_like(t))

    return {
        "publish": lambda: _drain(policy.weight_parts()),  # in parts, or weight_update() alone
        "logprobs": logprobs,
        "base": lambda: _drain(policy.base_weights()),
        "save": lambda path: fsdp.save_sharded(path, policy.model, optimizer),
        "export": lambda path: policy.export(path),
    }


def save_shards(policy: Any, optimizer: Any, path: Path) -> None:
    """Rank 0: write the sharded ``policy``'s (and ``optimizer``'s) shards to ``path``,
    every rank its own (announced)."""
    announce_read(policy, "save", path=str(path))
    fsdp.save_sharded(path, policy.model, optimizer)


def export(policy: Any, where: str) -> Path:
    """Rank 0: :meth:`~agentbolt.training.policy.Policy.export` (announced when sharded:
    every rank joins the gather, rank 0 writes)."""
    announce_read(policy, "export", path=where)
    out: Path = policy.export(where)
    return out


def load_checkpoint(found: Any, policy: Any, optimizer: Any = None) -> None:
    """Put a checkpoint's weights (and, when sharded, its optimizer state) into ``policy``:
    a sharded checkpoint (DCP) into a policy sharded over any number of ranks, or not
    sharded at all — every rank calls it; a whole-state one into an unsharded policy."""
    if found.shards is not None:
        fsdp.load_sharded(found.shards, policy.model, optimizer)
    elif policy.sharded:
        raise NotImplementedError(f"{found.path} holds the whole trainable state (written by a run whose policy was "
                                  "not sharded), which does not load into a sharded policy: resume it with "
                                  "sharding='none'")
    else:
        policy.load_trainable_state(found.weights)


def _drain(items: Any) -> None:
    collections.deque(items, maxlen=0)
