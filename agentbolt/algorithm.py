"""``agentbolt.algorithm``: another name for :mod:`agentbolt.algorithms` (both spellings
appear in guides), exporting the same objects."""

from agentbolt.algorithms import (
    APO,
    DEFAULT_ROLLOUT_CONFIG,
    GRPO,
    SFT,
    Algorithm,
    AlgorithmContext,
    APOConfig,
    APOResult,
    Candidate,
    Evaluate,
    EvaluationResult,
    EvaluationRow,
    GRPOConfig,
    GRPOResult,
    LoraSettings,
    SFTConfig,
    SFTResult,
)

__all__ = [
    "APO",
    "DEFAULT_ROLLOUT_CONFIG",
    "GRPO",
    "SFT",
    "APOConfig",
    "APOResult",
    "Algorithm",
    "AlgorithmContext",
    "Candidate",
    "Evaluate",
    "EvaluationResult",
    "EvaluationRow",
    "GRPOConfig",
    "GRPOResult",
    "LoraSettings",
    "SFTConfig",
    "SFTResult",
]
