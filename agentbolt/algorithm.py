"""``agentbolt.algorithm``: another name for :mod:`agentbolt.algorithms` (both spellings
appear in guides), exporting the same objects."""

from agentbolt.algorithms import (
    DEFAULT_ROLLOUT_CONFIG,
    Algorithm,
    AlgorithmContext,
    Evaluate,
    EvaluationResult,
    EvaluationRow,
    GRPO,
    GRPOConfig,
    GRPOResult,
    LoraSettings,
)

__all__ = [
    "Algorithm",
    "AlgorithmContext",
    "DEFAULT_ROLLOUT_CONFIG",
    "Evaluate",
    "EvaluationResult",
    "EvaluationRow",
    "GRPO",
    "GRPOConfig",
    "GRPOResult",
    "LoraSettings",
]
