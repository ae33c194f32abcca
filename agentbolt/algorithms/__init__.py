"""Algorithms: they enqueue rollouts, read what runners recorded, and (learning ones)
publish new resources.

``APO``, ``SFT`` and ``GRPO`` (and their configs and results) are imported on first use:
a runner process that only runs an agent never pays for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentbolt.algorithms.base import (
    DEFAULT_ROLLOUT_CONFIG,
    Algorithm,
    AlgorithmContext,
)
from agentbolt.algorithms.evaluate import Evaluate, EvaluationResult, EvaluationRow

if TYPE_CHECKING:
    from agentbolt.algorithms.apo import APO, APOConfig, APOResult, Candidate
    from agentbolt.algorithms.grpo import (
        GRPO,
        GRPOConfig,
        GRPOPolicies,
        GRPOResult,
    )
    from agentbolt.algorithms.sft import SFT, SFTConfig, SFTResult
    from agentbolt.training.lora import LoraSettings

_LAZY = {
    **dict.fromkeys(("APO", "APOConfig", "APOResult", "Candidate"), "agentbolt.algorithms.apo"),
    **dict.fromkeys(("GRPO", "GRPOConfig", "GRPOPolicies", "GRPOResult"), "agentbolt.algorithms.grpo"),
    "LoraSettings": "agentbolt.training.lora",
    **dict.fromkeys(("SFT", "SFTConfig", "SFTResult"), "agentbolt.algorithms.sft"),
}

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
    "GRPOPolicies",
    "GRPOResult",
    "LoraSettings",
    "SFTConfig",
    "SFTResult",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentbolt.algorithms' has no attribute {name!r}")
    value = vars(importlib.import_module(module))[name]  # a name of _LAZY, from the module it names
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
