"""agentbolt: train existing AI agents with RL, prompt optimisation and fine-tuning."""

from agentbolt.store import MemoryStore, Store
from agentbolt.types import (
    LLM,
    Attempt,
    AttemptStatus,
    Claim,
    JsonResource,
    PromptTemplate,
    Resources,
    Rollout,
    RolloutConfig,
    RolloutCreate,
    RolloutMode,
    RolloutStatus,
    Span,
    Worker,
)

__version__ = "0.1.0"

__all__ = [
    "Store",
    "MemoryStore",
    "LLM",
    "PromptTemplate",
    "JsonResource",
    "Resources",
    "Rollout",
    "RolloutCreate",
    "RolloutConfig",
    "RolloutMode",
    "RolloutStatus",
    "Attempt",
    "AttemptStatus",
    "Claim",
    "Span",
    "Worker",
    "__version__",
]
