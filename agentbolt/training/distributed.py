"""Data parallelism with ``torch.distributed``, invisible to the rest of the trainer.

Launch the same script with ``torchrun --nproc_per_node N``: every rank builds the same
policy, rank 0 runs the store, the runners and the gateway, and each update is split by
rollout over the ranks. Each rank's loss is its rollouts' share of the batch loss
(:mod:`agentbolt.training.batch`), so summing gradients over ranks gives exactly the one-process gradient.
Gloo works on CPU (tests), NCCL on GPUs. Without a process group every helper is the
identity: the trainer's code is the same for one process and many.
A policy sharded with FSDP2 (:mod:`.fsdp`) keeps this split and loss, and lets FSDP's
reduce-scatter do the summing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import torch

__all__ = ["all_reduce_sum", "broadcast_object", "is_distributed", "is_main", "rank", "shard", "world_size"]

T = TypeVar("T")


def is_distributed() -> bool:
    """Whether a ``torch.distributed`` process group is up (False without torch)."""
    if importlib.util.find_spec("torch") is None:
        return False
    import torch.distributed

    return torch.distributed.is_available() and torch.distributed.is_initialized()


def rank() -> int:
    if not is_distributed():
        return 0
    import torch.distributed

    return torch.distributed.get_rank()


def world_size() -> int:
    if not is_distributed():
        return 1
    import torch.distributed

    return torch.distributed.get_world_size()


def is_main() -> bool:
    """Rank 0 (or no process group): the process that drives rollouts and writes files."""
    return rank() == 0


def shard(items: Sequence[T]) -> list[T]:
    """This rank's share of ``items`` (every ``world_size``-th, from its rank)."""
    return list(items[rank()::world_size()])


def all_reduce_sum(tensors: Iterable[torch.Tensor]) -> None:
    """Sum ``tensors`` in place over the ranks (one flattened call)."""
    if not is_distributed():
        return
    import torch
    import torch.distributed

    tensors = list(tensors)
    if not tensors:
        return
    flat = torch.cat([t.reshape(-1) for t in tensors])
    torch.distributed.all_reduce(flat, op=torch.distributed.ReduceOp.SUM)
    offset = 0
    for t in tensors:
        n = t.numel()
        t.copy_(flat[offset:offset + n].view_as(t))
        offset += n


def broadcast_object(obj: Any = None, src: int = 0) -> Any:
    """``obj`` from rank ``src`` to every rank (pickled)."""
    if not is_distributed():
        return obj
    import torch.distributed

    box = [obj]
    torch.distributed.broadcast_object_list(box, src=src)
    return box[0]
