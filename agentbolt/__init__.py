"""agentbolt: train existing AI agents with RL, prompt optimisation and fine-tuning."""

from agentbolt import algorithms
from agentbolt.runner import (
    AttemptStopped,
    Hooks,
    LitAgent,
    RetryableError,
    Runner,
    RunnerStats,
    gateway_llm,
    rollout,
)
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
    emit_output,
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
    MetricRecord,
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
from agentbolt.version import __version__

__all__ = [
    "LLM",
    "Attempt",
    "AttemptStatus",
    "AttemptStopped",
    "Claim",
    "Hooks",
    "JsonResource",
    "LitAgent",
    "MemoryStore",
    "MetricRecord",
    "NoActiveRolloutError",
    "PromptTemplate",
    "Resources",
    "RetryableError",
    "Rollout",
    "RolloutConfig",
    "RolloutCreate",
    "RolloutMode",
    "RolloutStatus",
    "Runner",
    "RunnerStats",
    "Span",
    "SpansDroppedError",
    "Store",
    "Tracer",
    "Trainer",
    "Worker",
    "__version__",
    "agent",
    "algorithms",
    "current_context",
    "emit_annotation",
    "emit_exception",
    "emit_message",
    "emit_object",
    "emit_output",
    "emit_reward",
    "gateway_llm",
    "open_store",
    "operation",
    "rollout",
]


def __getattr__(name: str) -> object:
    """Agent Lightning v0.3's names that agentbolt does not define itself
    (``LightningStore``, ``LitAgentRunner``, ``find_final_reward``, ``@algo``...), from
    :mod:`agentbolt.compat`, imported on first use: ``import agentbolt as agl`` runs v0.3
    programs while agentbolt's own namespace (``__all__``, ``dir``) stays agentbolt's."""
    from agentbolt.compat import names

    if name in names.PROVIDED or name in names.UNSUPPORTED:
        from agentbolt.compat import resolve

        value = resolve(name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'agentbolt' has no attribute {name!r}")
