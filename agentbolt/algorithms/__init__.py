"""Algorithms: they enqueue rollouts, read what runners recorded, and (learning ones)
publish new resources. ``agentbolt.algorithm`` is another name for this package."""

from agentbolt.algorithms.base import DEFAULT_ROLLOUT_CONFIG, Algorithm, AlgorithmContext
from agentbolt.algorithms.evaluate import Evaluate, EvaluationResult, EvaluationRow
from agentbolt.algorithms.grpo import GRPO, GRPOConfig, GRPOResult, LoraSettings

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
