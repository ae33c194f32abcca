"""agentbolt: train existing AI agents with RL, prompt optimisation and fine-tuning."""

from agentbolt import algorithms
from agentbolt import algorithm  # noqa: F401  (another name for agentbolt.algorithms)
from agentbolt.runner import AttemptStopped, Hooks, LitAgent, RetryableError, Runner, RunnerStats, rollout
from agentbolt.store import MemoryStore, Store, open_store
from agentbolt.tracing import (
    NoActiveRolloutError,
    SpansDroppedError,
    Tracer,
    agent,
    current_context,
    emit_annotation,
    emit_exception,
    emit_message,
    emit_object,
    emit_reward,
    operation,
)
from agentbolt.trainer import Trainer
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
    "algorithms",
    "algorithm",
    "rollout",
    "LitAgent",
    "Runner",
    "RunnerStats",
    "Hooks",
    "RetryableError",
    "AttemptStopped",
    "Trainer",
    "Tracer",
    "agent",
    "current_context",
    "emit_reward",
    "emit_message",
    "emit_object",
    "emit_exception",
    "emit_annotation",
    "operation",
    "NoActiveRolloutError",
    "SpansDroppedError",
    "Store",
    "MemoryStore",
    "open_store",
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
