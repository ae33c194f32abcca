"""GRPO for multi-call agents: :class:`GRPO` (the algorithm, :mod:`.algorithm`) and its parts.

* :mod:`.policies` — :class:`GRPOPolicies`: several policies (one LoRA per agent) in one run,
  composing :class:`GRPO`'s public step parts (``prepare``, ``read``, ``batch``, ``train``).
* :mod:`.collect` — a step's rollouts read once (each rollout's spans parsed once) and one
  policy's :class:`GRPOBatch` built from them.
* the samples it trains on come from :class:`agentbolt.adapters.SampleAdapter` (exact
  token prefix, ``agent_match``); ``Sample`` and ``RolloutSamples`` are re-exported here.
* :mod:`.advantages` — rollout-level group advantages; all-equal groups dropped.
* :mod:`.loss` — PPO-clipped, importance-corrected loss normalised per rollout (torch).
* :mod:`.groups` — the sync and async schedules of groups of rollouts.
* :mod:`.update` — one update over micro-batches (torch); :mod:`.config`.

The training core GRPO shares with SFT — the policy (LoRA or full, dtype, reference
model), batching and micro-batches (:mod:`agentbolt.training.batch`), publishing each
update and numbering its versions (:class:`agentbolt.training.sync.PolicySync`), the
maximum policy lag of async training (:mod:`agentbolt.training.staleness`, whose names are
re-exported here), checkpoints, data parallelism, the run skeleton — is
:mod:`agentbolt.training`.

``loss`` needs torch and is imported on first use of :func:`grpo_loss`, so the rest
works without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentbolt.adapters.samples import RolloutSamples, Sample
from agentbolt.algorithms.grpo.advantages import (
    Advantages,
    GroupMember,
    apply_advantages,
    compute_advantages,
    group_advantages,
)
from agentbolt.algorithms.grpo.algorithm import GRPO, GRPOLearner, GRPOResult, NoGatewayError
from agentbolt.algorithms.grpo.collect import GRPOBatch, StepRollouts
from agentbolt.algorithms.grpo.config import GRPOConfig
from agentbolt.algorithms.grpo.policies import GRPOPolicies
from agentbolt.semconv import LLM_POLICY_VERSION as POLICY_VERSION
from agentbolt.training.staleness import StalenessSplit, policy_lag, split_stale

if TYPE_CHECKING:
    from agentbolt.algorithms.grpo.loss import (
        GRPOLossOutput,
        grpo_loss,
        per_rollout_mean,
    )

__all__ = [
    "GRPO",
    "POLICY_VERSION",
    "Advantages",
    "GRPOBatch",
    "GRPOConfig",
    "GRPOLearner",
    "GRPOLossOutput",
    "GRPOPolicies",
    "GRPOResult",
    "GroupMember",
    "NoGatewayError",
    "RolloutSamples",
    "Sample",
    "StalenessSplit",
    "StepRollouts",
    "apply_advantages",
    "compute_advantages",
    "group_advantages",
    "grpo_loss",
    "per_rollout_mean",
    "policy_lag",
    "split_stale",
]

_TORCH_NAMES = {"GRPOLossOutput", "grpo_loss", "per_rollout_mean"}


def __getattr__(name: str) -> Any:
    if name in _TORCH_NAMES:
        from agentbolt.algorithms.grpo import loss

        return vars(loss)[name]
    raise AttributeError(f"module 'agentbolt.algorithms.grpo' has no attribute {name!r}")
