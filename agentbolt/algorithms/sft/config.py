"""``SFTConfig``: every knob of an SFT (or rejection-sampling fine-tuning) run.

Loads from YAML (``SFTConfig.from_yaml("sft.yaml")``) or keyword arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentbolt.training.lora import LoraSettings

__all__ = ["SFTConfig"]


class SFTConfig(BaseModel):
    """Settings of :class:`~agentbolt.algorithms.SFT` (see docs/algorithms.md)."""

    model_config = ConfigDict(extra="forbid")

    # --- which rollouts are learned from
    min_reward: float | None = Field(1.0, description="Keep rollouts whose reward is at least this (None: no bar).")
    top_k_per_task: int | None = Field(None, ge=1, description="Keep only the best k rollouts of each task.")
    agent_match: str | None = None
    """Only the model calls of agents whose name matches this regex (multi-agent programs)."""
    train_on_history: bool = False
    """Also train on assistant turns that were already in a call's request (by default they
    are context: ``weight: 0``; each is a record of its own anyway)."""

    # --- rejection sampling (iterations)
    iterations: int = Field(1, ge=1, description="Rounds of sample → select → train → publish.")
    samples_per_task: int = Field(4, ge=1, description="Rollouts sampled per training task in a sampling round.")
    sample_temperature: float = Field(1.0, ge=0, description="Gateway temperature of training (sampling) calls.")
    rollout_timeout: float | None = Field(None, gt=0, description="Seconds to wait for a sampling round.")

    # --- chat data
    max_seq_len: int = Field(2048, ge=8, description="Longest record in tokens.")
    overlong: Literal["skip", "truncate"] = "skip"
    """What to do with a longer record: skip it, or cut it (its trained tokens past the cut are lost)."""

    # --- the update
    epochs: int = Field(2, ge=1)
    learning_rate: float = Field(2e-4, gt=0)
    batch_size: int = Field(8, ge=1, description="Records per optimizer step.")
    micro_batch_tokens: int = Field(4096, ge=1, description="Padded tokens per forward/backward (accumulated).")
    weight_decay: float = Field(0.0, ge=0)
    adam_betas: tuple[float, float] = (0.9, 0.999)
    max_grad_norm: float | None = Field(1.0, gt=0)
    warmup_ratio: float = Field(0.05, ge=0, lt=1, description="Share of optimizer steps with a linear warmup.")
    lr_schedule: Literal["cosine", "linear", "constant"] = "cosine"
    """Decay after the warmup, to 0 at the last optimizer step of an iteration."""
    lora: LoraSettings | None = Field(default_factory=LoraSettings)
    """A LoRA adapter to train; ``None`` trains every weight."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    sharding: Literal["none", "fsdp"] = "none"
    """How the policy's weights lie over ``torchrun``'s ranks. ``none``: every rank holds
    the whole policy (data parallelism; one process: nothing to split). ``fsdp``: FSDP2
    shards weights, gradients and optimizer state over the ranks (PyTorch's
    ``fully_shard``, :mod:`agentbolt.training.fsdp`), the update unchanged otherwise; a
    ``bfloat16`` ``dtype`` then computes through FSDP's mixed precision, weights kept in
    float32. Checked on CPU/gloo only; ``Trainer.fit`` does not take it yet (publishing and
    checkpoints read the whole policy on rank 0) and says so."""
    gradient_checkpointing: bool = False
    seed: int = 0

    # --- evaluation, checkpoints, output
    eval_before: bool = True
    eval_after: bool = True
    success_threshold: float = 1.0
    checkpoint: bool = True
    """Save the trained weights after every iteration (``run_dir/checkpoints``)."""
    resume: bool = True
    """Continue after the last finished iteration of ``run_dir`` when there is one."""
    export_dir: str | None = None
    """Write the trained policy here as a Hugging Face model directory (default ``run_dir/model``)."""
    run_dir: str | None = None
    """Metrics, the training records of each iteration, checkpoints and the export (default ./runs/sft-<time>)."""
    run_name: str | None = None
    loggers: list[str] = Field(default_factory=lambda: ["jsonl", "store"])
    progress: bool = True
    max_failed_steps: int = Field(3, ge=0)
    """Stop (NoSuccessfulRolloutsError, naming the most common failure) after this many
    sampling iterations in a row in which no rollout succeeded; 0 never stops."""

    @model_validator(mode="after")
    def _check(self) -> SFTConfig:
        if self.min_reward is None and self.top_k_per_task is None:
            raise ValueError("SFTConfig selects nothing: set min_reward (e.g. 1.0), top_k_per_task (e.g. 1), or both; "
                             "to learn from every succeeded rollout set min_reward to the lowest possible reward")
        return self

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> SFTConfig:
        """Read a YAML mapping of these fields; ``overrides`` win."""
        data = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(data, dict):
            raise TypeError(f"{path}: expected a mapping of SFTConfig fields, got {type(data).__name__}")
        return cls.model_validate({**data, **overrides})
