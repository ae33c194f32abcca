"""``APOConfig``: every knob of an APO run, as one typed object.

Loads from YAML (``APOConfig.from_yaml("apo.yaml")``) or keyword arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["APOConfig"]


class APOConfig(BaseModel):
    """Settings of :class:`~agentbolt.algorithms.APO` (see docs/algorithms.md)."""

    model_config = ConfigDict(extra="forbid")

    # --- what is optimised
    prompt_name: str = Field("prompt_template", min_length=1, description="Resource name of the prompt template.")

    # --- the search
    beam_width: int = Field(4, ge=1, description="Candidates kept after each round (the parents of the next).")
    branch_factor: int = Field(2, ge=1, description="New candidates per parent per round.")
    rounds: int = Field(3, ge=0, description="Rounds of critique-edit-validate after evaluating the initial prompt.")
    train_batch_size: int = Field(8, ge=1, description="Training rollouts per parent per round (to find failures).")
    val_batch_size: int | None = Field(
        16, ge=1, description="Validation items every candidate is scored on (a fixed subset); None: all of them."
    )
    selection: Literal["beam", "pareto"] = "beam"
    """``beam``: keep the ``beam_width`` best by mean validation reward. ``pareto``: keep
    the candidates that are best on at least one validation item (GEPA-style), at most
    ``beam_width`` of them (most items won first, then mean)."""

    # --- the textual gradient
    max_failures_shown: int = Field(4, ge=1, description="Low-reward traces shown to the critic per gradient.")
    failure_threshold: float = 1.0
    """A training rollout whose reward is below this is a failure the critic sees."""
    critic_temperature: float | None = Field(1.0, ge=0, description="None: send no temperature (the LLM's own).")
    editor_temperature: float | None = Field(0.0, ge=0, description="None: send no temperature (the LLM's own).")
    max_tokens: int | None = Field(None, ge=1, description="max_tokens of critic and editor calls (None: not sent).")
    max_edit_retries: int = Field(2, ge=0, description="Editor retries after a reply that breaks the placeholders.")
    max_trace_chars: int = Field(4000, ge=200, description="Each trace is cut to this many characters.")
    llm_timeout: float = Field(120.0, gt=0, description="Seconds per critic/editor request.")
    llm_max_retries: int = Field(4, ge=0, description="Retries of a critic/editor call on 429, 5xx or connection "
                                                      "errors.")
    llm_retry_backoff: float = Field(1.0, ge=0, description="First retry delay (s); doubles each retry.")
    llm_concurrency: int = Field(8, ge=1, description="Critic/editor conversations at once.")

    # --- evaluation, output
    eval_before: bool = True
    """Score the initial prompt on the whole validation set (``result.before``)."""
    eval_after: bool = True
    """Score the best prompt on the whole validation set (``result.after``)."""
    success_threshold: float = 1.0
    """A rollout whose reward is at least this counts as a success (in ``before``/``after``)."""
    run_dir: str | None = None
    """apo_history.jsonl, apo_state.json, metrics.jsonl, best_prompt.txt go here (default ./runs/apo-<time>)."""
    run_name: str | None = None
    resume: bool = True
    """Continue after the last completed round recorded in ``run_dir``."""
    seed: int = 0
    loggers: list[str] = Field(default_factory=lambda: ["jsonl", "store"])
    """Metric sinks: jsonl, store, tensorboard, wandb, mlflow."""
    rollout_timeout: float | None = Field(None, gt=0, description="Seconds to wait for a batch of rollouts.")
    progress: bool = True
    max_failed_steps: int = Field(3, ge=0)
    """Stop (NoSuccessfulRolloutsError, naming the most common failure) after this many
    rounds in a row whose training batches had no successful rollout; 0 never stops."""

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> APOConfig:
        """Read a YAML mapping of these fields; ``overrides`` win."""
        data = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a mapping of APOConfig fields, got {type(data).__name__}")  # noqa: TRY004
        return cls.model_validate({**data, **overrides})
