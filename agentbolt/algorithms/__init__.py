"""Algorithms: they enqueue rollouts, read what runners recorded, and (learning ones)
publish new resources. ``agentbolt.algorithm`` is another name for this package."""

from agentbolt.algorithms.apo import APO, APOConfig, APOResult, Candidate
from agentbolt.algorithms.base import (
    DEFAULT_ROLLOUT_CONFIG,
    Algorithm,
    AlgorithmContext,
)
from agentbolt.algorithms.evaluate import Evaluate, EvaluationResult, EvaluationRow
from agentbolt.algorithms.grpo import GRPO, GRPOConfig, GRPOResult, LoraSettings
from agentbolt.algorithms.sft import SFT, SFTConfig, SFTResult

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
