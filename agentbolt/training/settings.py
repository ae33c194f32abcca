"""``PolicyTrainingConfig``: what the config of every weight-training algorithm (GRPO,
SFT) shares — how the policy is held (a LoRA or every weight, the compute dtype,
sharding over ranks, activation checkpointing), the optimizer's fixed knobs, and loading
from YAML. Each algorithm's config adds its own fields (and its own learning rate, whose
good default differs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field

from agentbolt.training.lora import LoraSettings

__all__ = ["PolicyTrainingConfig"]


class PolicyTrainingConfig(BaseModel):
    """The fields GRPO's and SFT's configs share (see docs/algorithms.md)."""

    model_config = ConfigDict(extra="forbid")

    lora: LoraSettings | None = Field(default_factory=LoraSettings)
    """A LoRA to train; ``None`` trains every weight."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """The trainer's compute dtype. ``auto``: bfloat16 on GPUs that support it, float32 on
    CPU. Trained weights stay float32 whatever it is (full fine-tuning runs bf16 under autocast)."""
    sharding: Literal["none", "fsdp"] = "none"
    """How the policy's weights lie over ``torchrun``'s ranks. ``none``: every rank holds
    the whole policy (data parallelism; one process: nothing to split). ``fsdp``: FSDP2
    shards weights, gradients and optimizer state over the ranks (PyTorch's
    ``fully_shard``, :mod:`agentbolt.training.fsdp`), the update unchanged otherwise; a
    ``bfloat16`` ``dtype`` then computes through FSDP's mixed precision, weights kept in
    float32. Under ``Trainer.fit`` every rank joins each read of the policy (publishing —
    full weights in parts, one group at a time —, the probe, sharded checkpoints, the
    export: :mod:`agentbolt.training.ranks`). Checked on CPU/gloo only (2 ranks, one host)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory). The shared-prefix forward
    needs a key/value cache, which checkpointing turns off: such micro-batches run whole."""
    weight_decay: float = Field(0.0, ge=0)
    adam_betas: tuple[float, float] = (0.9, 0.999)
    max_grad_norm: float | None = Field(1.0, gt=0)
    """Clip the global gradient norm to this before each optimizer step (None: no clipping)."""

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> Self:
        """Read a YAML mapping of these fields; ``overrides`` win."""
        data = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a mapping of {cls.__name__} fields, got {type(data).__name__}")
        return cls.model_validate({**data, **overrides})
