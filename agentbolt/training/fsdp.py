"""The policy sharded with PyTorch's FSDP2 (``torch.distributed.fsdp.fully_shard``).

``sharding="fsdp"`` (:class:`~agentbolt.algorithms.grpo.config.GRPOConfig`,
:class:`~agentbolt.algorithms.sft.config.SFTConfig`) under ``torchrun``: each rank holds
1/N of every weight, of its gradient and of the optimizer state (the weights are
``DTensor`` shards; AdamW's moments follow them). :func:`shard_model` wraps each
transformer block, then the backbone's and output layer's own weights as one group
(the trainer calls the two separately, for logprobs at the trained positions only:
:mod:`.logprobs`; tied embeddings stay in one group), then the root.

The update is the data-parallel one (:mod:`.distributed`): every rank trains its rollouts
with a loss that is its exact share of the batch loss, and FSDP's reduce-scatter *sums*
the gradients (divide factor 1) — it replaces the all-reduce, it does not add to it.
FSDP's collectives run inside every forward and backward, so all ranks must run as many
of each, in the same order: :func:`filler_passes` says how many empty passes a rank with
fewer micro-batches adds (a zero loss: its gradient is 0), and prompts are not shared
within a micro-batch (a shared prefix is one forward more on some ranks only).

Checkpoints are sharded with ``torch.distributed.checkpoint`` (DCP): each rank writes its
shards of the trainable weights and of the optimizer state, and a checkpoint loads on any
number of ranks, or in one process without a process group (:func:`save_sharded`,
:func:`load_sharded`). :func:`full_state_dict` gathers the whole model (on rank 0) for an
export as a plain Hugging Face model or LoRA; :func:`gathered_parts` gathers it one FSDP
group at a time, so that rank 0 can send the full weights to an engine without holding a
second whole copy (:mod:`.publish`). Every read of the whole model is a collective: all
ranks make it, in the same order — under ``Trainer.fit`` rank 0 announces each one to the
others (:mod:`.ranks`). Without a process group nothing is sharded and the helpers act
on the plain model.

Verified on CPU with gloo (2 ranks, one host) only: NCCL on GPUs and several hosts are untested.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import torch

from agentbolt.training import distributed as dist

__all__ = ["Sharding", "filler_passes", "full_state_dict", "gathered", "gathered_model", "gathered_parts", "grad_norm",
           "is_sharded", "load_sharded", "local_bytes", "save_sharded", "shard_model", "whole"]

Sharding = Literal["none", "fsdp"]
"""How the policy's weights are laid out over the ranks: ``none`` (each rank holds the
whole policy: one process, or data parallelism) or ``fsdp`` (FSDP2 shards)."""


def shard_model(model: Any, *, compute_dtype: torch.dtype = torch.float32) -> bool:
    """Wrap ``model`` (a transformers causal LM, or a peft model of one) with
    ``fully_shard``: each transformer block, then the rest. ``compute_dtype`` other than
    float32: FSDP casts the gathered weights to it (``MixedPrecisionPolicy``), gradients
    are reduced in float32 and the sharded (master) weights stay as they are. Every rank
    calls it, and every rank's weights are rank 0's afterwards. Returns whether it
    sharded: without a process group there is nothing to shard over."""
    if not dist.is_distributed():
        return False
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

    from agentbolt.training.logprobs import split_head

    mp = MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32) \
        if compute_dtype != torch.float32 else MixedPrecisionPolicy()
    with torch.no_grad():  # every rank starts from rank 0's weights (a fresh LoRA's initialisation is random)
        for t in [*model.parameters(), *model.buffers()]:
            torch.distributed.broadcast(t.data, src=0)
    for block in _blocks(model):
        fully_shard(block, mp_policy=mp)
    split = split_head(model)
    if split is not None:  # called one after the other by the trainer (logprobs at chosen positions only)
        fully_shard(list(split), mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    _first_forward(model)
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(1.0)  # sum: each rank's loss is already its share
            module.set_force_sum_reduction_for_comms(True)  # a plain SUM (gloo has no pre-multiplied sum)
    return True


def _first_forward(model: Any) -> None:
    """One forward through the whole model, which makes it FSDP's root: the trainer then
    calls its backbone and output layer directly, and FSDP takes its root from the first
    module that runs (a group of two cannot be one)."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        model(input_ids=torch.zeros((1, 1), dtype=torch.long, device=_device(model)))
    model.train(was_training)


def _device(model: Any) -> torch.device:
    from torch.distributed.tensor import DTensor

    p = next(model.parameters())
    return p.device if not isinstance(p, DTensor) else p.to_local().device


def _blocks(model: Any) -> list[torch.nn.Module]:
    """The transformer blocks: the modules of the classes the model names as not to be
    split (``_no_split_modules``), else the entries of its ``layers`` list."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(base, "_no_split_modules", None) or ())  # third-party: models' internals vary
    blocks = [m for m in model.modules() if type(m).__name__ in names]
    if blocks:
        return blocks
    for module in model.modules():
        layers = getattr(module, "layers", None)  # third-party: models' internals vary
        if isinstance(layers, torch.nn.ModuleList):
            return list(layers)
    raise ValueError(f"FSDP: found no transformer blocks in {type(base).__name__} to shard")


def is_sharded(model: Any) -> bool:
    """Whether any of ``model``'s weights is an FSDP shard."""
    from torch.distributed.fsdp import FSDPModule

    return any(isinstance(m, FSDPModule) for m in model.modules())


def filler_passes(*mine: int) -> list[int]:
    """How many empty passes this rank adds so that every rank runs as many as the one
    with the most, for each kind of pass (``mine``: how many of each it has). A
    collective: call it before any of those passes."""
    if not dist.is_distributed():
        return [0] * len(mine)
    most = torch.tensor(mine, dtype=torch.long)
    torch.distributed.all_reduce(most, op=torch.distributed.ReduceOp.MAX)
    return [int(m) - n for m, n in zip(most.tolist(), mine, strict=True)]


def _local(t: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


def grad_norm(params: Iterable[torch.nn.Parameter], max_norm: float | None) -> float:
    """The global gradient norm over all ranks' shards, the gradients clipped to ``max_norm``."""
    params = [p for p in params if p.grad is not None]
    if not params:
        return 0.0
    squares = sum((_local(p.grad).double().square().sum() for p in params),  # type: ignore[arg-type]
                  torch.zeros((), dtype=torch.float64, device=_local(params[0].grad).device))  # type: ignore[arg-type]
    if dist.is_distributed():
        torch.distributed.all_reduce(squares)  # the shards' squares: the whole gradient's
    norm = float(squares.sqrt())
    if max_norm is not None and norm > 0:
        coef = min(max_norm / (norm + 1e-6), 1.0)
        for p in params:
            p.grad.mul_(coef)  # type: ignore[union-attr]
    return norm


def local_bytes(params: Iterable[torch.Tensor], optimizer: torch.optim.Optimizer | None = None) -> int:
    """Bytes this rank holds of ``params`` and of ``optimizer``'s state (local shards)."""
    total = sum(_local(p).numel() * _local(p).element_size() for p in params)
    if optimizer is not None:
        for state in optimizer.state.values():
            total += sum(_local(v).numel() * _local(v).element_size()
                         for v in state.values() if isinstance(v, torch.Tensor))
    return total


def full_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The whole model's weights as plain CPU tensors, gathered on rank 0 (an empty dict
    on the other ranks, which must call it too). Without sharding: a CPU copy."""
    if not is_sharded(model):
        return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state: dict[str, torch.Tensor] = get_model_state_dict(  # type: ignore[assignment]
        model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return state


def whole(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor of a shard (gathered from every rank: they all call it), or ``t``."""
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def gathered(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``tensors`` (shards) gathered whole, one at a time, as CPU tensors on rank 0; an
    empty dict on the other ranks, which must call it with the same names."""
    out = {}
    for name, t in tensors.items():
        full = whole(t).detach()
        if dist.is_main():
            out[name] = full.to("cpu")
        del full
    return out


def gathered_parts(model: Any) -> Iterator[dict[str, torch.Tensor]]:
    """The whole weights of a sharded ``model`` (its state dict, tied weights once), one
    FSDP group at a time — each transformer block, then the backbone's and output layer's
    own weights: ``{name: tensor}`` on CPU on rank 0, empty on the other ranks, which must
    iterate it too (each part is gathered from all). Rank 0 holds one part at a time if the
    caller drops each before asking for the next: the largest group, not a second model."""
    from torch.distributed.fsdp import FSDPModule

    owners = sorted((name for name, m in model.named_modules() if isinstance(m, FSDPModule)), key=len, reverse=True)
    tied = _tied(model)
    groups: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in model.state_dict().items():  # shards (DTensors): nothing is gathered yet
        if key not in tied:
            owner = next((o for o in owners if not o or key.startswith(o + ".")), "")
            groups.setdefault(owner, {})[key] = value
    for owner in list(groups):
        part = gathered(groups.pop(owner))
        yield part
        del part


def gathered_model(model: Any) -> Any:
    """A plain (unsharded) copy of ``model`` on rank 0, None on the others (all call it):
    the same architecture built from its config (and the same LoRA), with the
    gathered weights. Without sharding: ``model`` itself."""
    if not is_sharded(model):
        return model
    state = full_state_dict(model)
    if not dist.is_main():
        return None
    from transformers import AutoModelForCausalLM

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    copy = AutoModelForCausalLM.from_config(base.config, dtype=next(iter(state.values())).dtype)
    if hasattr(model, "peft_config"):
        from peft import get_peft_model

        copy = get_peft_model(copy, model.peft_config["default"])
    missing, unexpected = copy.load_state_dict(state, strict=False)
    if unexpected or [k for k in missing if k not in _tied(copy)]:
        raise ValueError(f"gathered weights do not fit the rebuilt model: missing {missing[:3]}, "
                         f"unexpected {unexpected[:3]}")
    return copy


def _tied(model: Any) -> set[str]:
    """Names of weights that are another weight (tied embeddings), absent from a state dict."""
    seen: dict[int, str] = {}
    tied = set()
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            tied.add(name)
        seen.setdefault(id(p), name)
    return tied


def _options() -> Any:
    """What training changes, not a LoRA's frozen base; set back without requiring the
    frozen weights (DCP itself refuses a checkpoint that lacks a weight asked of it)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(ignore_frozen_params=True, strict=False)


def _states(model: Any, optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

    if optimizer is None:
        return {"model": get_model_state_dict(model, options=_options())}
    weights, optim = get_state_dict(model, optimizer, options=_options())
    return {"model": weights, "optimizer": optim}


def save_sharded(directory: str | Path, model: Any, optimizer: torch.optim.Optimizer | None = None) -> Path:
    """Write ``model``'s trainable weights' (and ``optimizer``'s) shards to ``directory``
    with DCP: every rank calls it and writes its own; one process writes the whole. The
    directory must be one every rank sees (several hosts: a shared file system)."""
    import torch.distributed.checkpoint as dcp

    out = Path(directory)
    dcp.save(_states(model, optimizer), checkpoint_id=str(out))
    return out


def load_sharded(directory: str | Path, model: Any, optimizer: torch.optim.Optimizer | None = None) -> None:
    """Load what :func:`save_sharded` wrote, resharded to this run's ranks (any number, or
    one process without a process group)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_state_dict

    states = _states(model, optimizer)
    dcp.load(states, checkpoint_id=str(directory))
    if optimizer is None:
        set_model_state_dict(model, states["model"], options=_options())
    else:
        set_state_dict(model, optimizer, model_state_dict=states["model"], optim_state_dict=states["optimizer"],
                       options=_options())
