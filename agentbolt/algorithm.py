"""``agentbolt.algorithm``: another name for :mod:`agentbolt.algorithms` (both spellings
appear in guides), exporting the same objects (the learning algorithms on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentbolt import algorithms as _algorithms
from agentbolt.algorithms import (
    DEFAULT_ROLLOUT_CONFIG,
    Algorithm,
    AlgorithmContext,
    Evaluate,
    EvaluationResult,
    EvaluationRow,
)

if TYPE_CHECKING:
    from agentbolt.algorithms import (
        APO,
        GRPO,
        SFT,
        APOConfig,
        APOResult,
        Candidate,
        GRPOConfig,
        GRPOPolicies,
        GRPOResult,
        LoraSettings,
        SFTConfig,
        SFTResult,
    )

__all__ = [  # the same names as agentbolt.algorithms.__all__
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
    "GRPOPolicies",
    "GRPOResult",
    "LoraSettings",
    "SFTConfig",
    "SFTResult",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(_algorithms, name)
    raise AttributeError(f"module 'agentbolt.algorithm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
