"""``SFTConfig``: every knob of an SFT (or rejection-sampling fine-tuning) run.

Loads from YAML (``SFTConfig.from_yaml("sft.yaml")``) or keyword arguments.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from agentbolt.training.settings import PolicyTrainingConfig

__all__ = ["SFTConfig"]


class SFTConfig(PolicyTrainingConfig):
    """Settings of :class:`~agentbolt.algorithms.SFT` (see docs/algorithms.md)."""

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
    tool_parser: str | None = None
    """The format tool calls are written in when the chat template has no tool support (the
    gateway's ``tool_parser``). None: the in-process engine's, else read from the chat
    template, as the gateway does."""

    # --- the update
    epochs: int = Field(2, ge=1)
    learning_rate: float = Field(2e-4, gt=0)
    batch_size: int = Field(8, ge=1, description="Records per optimizer step.")
    micro_batch_tokens: int = Field(4096, ge=1, description="Padded tokens per forward/backward (accumulated).")
    warmup_ratio: float = Field(0.05, ge=0, lt=1, description="Share of optimizer steps with a linear warmup.")
    lr_schedule: Literal["cosine", "linear", "constant"] = "cosine"
    """Decay after the warmup, to 0 at the last optimizer step of an iteration."""
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
