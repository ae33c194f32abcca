"""``GRPOConfig``: every knob of a GRPO run, as one typed object.

Loads from YAML (``GRPOConfig.from_yaml("grpo.yaml")``) or keyword arguments; the
field names are the ones the docs and the metrics use.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from agentbolt.adapters.match import agent_matcher
from agentbolt.training.settings import PolicyTrainingConfig

__all__ = ["GRPOConfig"]


class GRPOConfig(PolicyTrainingConfig):
    """Settings of :class:`~agentbolt.algorithms.GRPO` (see docs/algorithms.md)."""

    # --- what is sampled
    max_steps: int = Field(20, ge=1, description="Policy updates to run.")
    time_budget_s: float | None = Field(
        None, gt=0, description="Start no new step after this many seconds of training (then evaluate and export)."
    )
    tasks_per_step: int = Field(8, ge=1, description="Groups (tasks) per update.")
    group_size: int = Field(8, ge=2, description="Rollouts per task: the G of GRPO.")
    schedule: Literal["sync", "async"] = "sync"
    """``sync``: sample a batch of groups, then train on it. ``async``: keep
    ``groups_in_flight`` groups running and train on the first complete ones."""
    groups_in_flight: int | None = Field(None, ge=1, description="async: groups kept running (default 2 x "
                                                                 "tasks_per_step; at most (max_policy_lag + 1) x "
                                                                 "tasks_per_step).")
    max_policy_lag: int = Field(2, ge=0, description="async: drop rollouts with tokens older than this many versions "
                                                     "(younger ones are importance-corrected).")
    """2 by default: a group carried over twice (its long rollouts) is still trained, its
    tokens weighed by min(π_prox / π_behav, ``is_cap``) against the logprobs the engine
    recorded; with 1, such groups were dropped (a bias toward short episodes, and 18 % of
    the started rollouts wasted in ``benchmarks/async_speedup.py``)."""
    shuffle: bool = True
    seed: int = 0
    agent_match: str | None = None
    """A regular expression on the agent name (``re.search``): only the matched agents'
    tokens carry loss; the other agents' calls stay in the rollout (its reward counts,
    their tokens are context) and train nothing. None: every call is trained."""

    overlong: Literal["keep", "mask", "drop"] = "keep"
    """Trained calls cut at ``max_tokens`` (``finish_reason == "length"``, kept per call in
    the samples): ``keep`` trains them; ``mask`` takes their tokens out of the loss (DAPO's
    overlong filtering); ``drop`` leaves their rollout out of the update. Either way the
    rollout still counts in its group's advantages (:mod:`.overlong`)."""

    failure_reward: float | None = None
    """The reward of a rollout the agent program itself failed (its own exception, often
    caused by the policy's output; :mod:`.failures`), which then enters its group instead
    of being left out. None (default): failed rollouts are left out. Never given for
    infrastructure failures: timeouts, lost workers, retryable errors, cancelled rollouts,
    attempts without a successful model call."""

    # --- advantages
    scale_std: bool = False
    """Divide A by the group's reward std (the GRPO paper; off by default: it
    over-weights near-uniform groups, Dr. GRPO)."""
    leave_one_out: bool = False

    # --- the update
    learning_rate: float = Field(1e-5, gt=0)
    ppo_epochs: int = Field(1, ge=1, description="Optimizer passes over each batch.")
    micro_batch_tokens: int = Field(4096, ge=1, description="Token budget per forward/backward (gradient "
                                                            "accumulation).")
    eps_low: float = Field(0.2, ge=0)
    eps_high: float = Field(0.2, ge=0)
    clip_ratio_c: float | None = Field(None, gt=1, description="Dual clip (verl's clip_ratio_c, e.g. 3.0): with A < 0 "
                                                                "the surrogate is held at c·A once ρ > c; None: off.")
    loss_norm: Literal["rollout_token_mean", "rollout_sum"] = "rollout_token_mean"
    """How each rollout's token losses are summed (:mod:`.loss`). ``rollout_token_mean``:
    divided by the rollout's trained tokens — every rollout weighs the same, but a long
    rollout's tokens each weigh less (a long wrong answer is pushed down less per token).
    ``rollout_sum``: divided by the constant ``loss_norm_tokens`` (Dr. GRPO's
    constant-length normalisation) — every token weighs the same, long rollouts weigh more."""
    loss_norm_tokens: float | None = Field(None, gt=0, description="rollout_sum: the constant L each rollout's sum "
                                                                   "is divided by (Dr. GRPO: the generation budget, "
                                                                   "e.g. max_tokens).")
    is_cap: float = Field(2.0, ge=1, description="Cap of the truncated importance weight π_prox/π_behav.")
    kl_coef: float = Field(0.0, ge=0, description="β of the KL to the reference (initial) policy; 0 = off.")
    log_kl: bool = False
    """Compute (and log) the KL to the reference even when ``kl_coef`` is 0 (one extra forward)."""
    device: str | None = None
    """Where the policy trains (``cpu``, ``cuda``, ``cuda:1``). Default: the in-process
    engine's device; with an engine elsewhere, ``cuda`` when there is one, else ``cpu``."""
    recompute_old_logprobs: bool | None = None
    """Compute π_old with the trainer instead of using the engine's sampling-time
    logprobs (which then only weigh the behaviour policy's mismatch). ``None``: unless
    trainer and engine both compute in float32 on the same device (another dtype, bf16 on
    both sides, or an engine that does not report them, such as vLLM)."""

    # --- publishing to the engine
    lora_dir: str | None = None
    """Engines that read LoRAs from disk (vLLM) get each version saved here, under
    ``v<version>/``; it must be a path the vLLM server can read (default: ``run_dir/loras``)."""
    check_publish: bool = True
    """After each publish to an engine that reports its numerics (in this process or in a
    server), compare its logprobs with the trainer's on a probe
    (``publish/max_abs_logprob_diff``); a difference above ``publish_tolerance`` while both
    compute in float32 on the same device, or above 0.5 otherwise (16-bit rounding:
    :data:`~agentbolt.training.publish.LOW_PRECISION_TOLERANCE`), stops the run."""
    publish_tolerance: float = Field(1e-3, gt=0)

    # --- evaluation, checkpoints, output
    eval_every: int = Field(0, ge=0, description="Evaluate the validation set every N steps (0: before and after "
                                                 "only).")
    eval_before: bool = True
    eval_after: bool = True
    success_threshold: float = 1.0
    """A rollout whose reward is at least this counts as a success."""
    checkpoint_every: int = Field(1, ge=0, description="Checkpoint every N steps (0: never).")
    keep_checkpoints: int = Field(2, ge=1)
    resume: bool = True
    """Continue from the newest checkpoint in ``run_dir`` when there is one."""
    export_dir: str | None = None
    """Write the trained policy here as a Hugging Face model directory (LoRA merged)."""
    run_dir: str | None = None
    """Checkpoints, metrics.jsonl and the export go here (default: ./runs/grpo-<time>)."""
    run_name: str | None = None
    loggers: list[str] = Field(default_factory=lambda: ["jsonl", "store"])
    """Metric sinks: jsonl, store, tensorboard, wandb, mlflow."""
    rollout_timeout: float | None = Field(None, gt=0, description="Seconds to wait for a batch before giving up.")
    progress: bool = True
    """A bar on a terminal; elsewhere (CI, nohup, containers) a plain line per step."""
    stop_success_rate: float | None = Field(None, gt=0, le=1)
    """Stop early once the **training** success rate — the share of a step's sampled
    rollouts whose reward reaches ``success_threshold`` (the ``success_rate`` metric) — has
    been at least this for ``stop_success_steps`` steps in a row (:mod:`.early_stop`; said on
    the console and logged). It reads only the rollouts trained on, never the validation
    set. A policy that solves nearly every group learns little more: groups whose rollouts
    all succeed tie and train nothing. None (default): train to ``max_steps`` or
    ``time_budget_s``."""
    stop_success_steps: int = Field(2, ge=1, description="Steps in a row at stop_success_rate or above before the "
                                                         "run stops.")
    max_failed_steps: int = Field(3, ge=0)
    """Stop the run (NoSuccessfulRolloutsError, naming the most common failure) after this
    many steps in a row in which no rollout succeeded; 0 never stops."""

    @model_validator(mode="after")
    def _check(self) -> GRPOConfig:
        agent_matcher(self.agent_match)  # a bad pattern fails here, with what to do
        if self.groups_in_flight is not None and self.groups_in_flight < self.tasks_per_step:
            raise ValueError(
                f"groups_in_flight ({self.groups_in_flight}) must be at least tasks_per_step ({self.tasks_per_step}): "
                "async training needs at least one batch of groups running"
            )
        if self.loss_norm == "rollout_sum" and self.loss_norm_tokens is None:
            raise ValueError("loss_norm='rollout_sum' divides each rollout's summed loss by a constant: set "
                             "loss_norm_tokens (Dr. GRPO uses the generation budget, e.g. the agent's max_tokens)")
        in_flight = self.groups_in_flight
        if self.schedule == "async" and in_flight is not None and in_flight > self.max_in_flight:
            raise ValueError(
                f"groups_in_flight ({in_flight}) is more than (max_policy_lag + 1) x tasks_per_step "
                f"({self.max_in_flight}): with groups of similar lengths, the last group started waits for "
                f"{in_flight // self.tasks_per_step - 1} updates before it is trained, so it would be "
                "sampled only to be dropped as too stale. Lower groups_in_flight or raise max_policy_lag"
            )
        return self

    @property
    def max_in_flight(self) -> int:
        """Admission bound of the async schedule: (``max_policy_lag`` + 1) x ``tasks_per_step``
        groups. One more batch would be too stale by construction when groups last alike
        (each step hands out ``tasks_per_step`` groups, oldest first among the complete)."""
        return (self.max_policy_lag + 1) * self.tasks_per_step

    @property
    def in_flight(self) -> int:
        """Groups kept running: one batch for ``sync``, ``groups_in_flight`` for ``async``."""
        if self.schedule == "sync":
            return self.tasks_per_step
        return self.groups_in_flight or min(2 * self.tasks_per_step, self.max_in_flight)
