"""A rollout that made no recorded model call: what to say about it, in one wording.

Such a rollout trains nothing — there is no call to learn from — yet it may well have
succeeded with a reward: a framework's cache answered every prompt (DSPy caches by
prompt, whatever the base URL), or the agent called a model through a client that
agentbolt neither traces nor sees at the gateway. The runner warns about it
(:mod:`agentbolt.runner.no_model_call`), ``Trainer.dev`` says it instead of samples, and
GRPO and SFT count such rollouts and leave them out; all three say it with the words
below, so the preview and the training log read the same.
"""

from __future__ import annotations

from collections.abc import Iterable

from agentbolt.adapters.calls import extract_model_calls
from agentbolt.types import Span

__all__ = ["NO_MODEL_CALL", "WHAT_TO_DO", "answered_a_call", "left_out", "why_no_samples"]

NO_MODEL_CALL = "made no recorded model call"
"""What such a rollout did, after "this rollout" / "N rollouts"."""
WHAT_TO_DO = (
    "it trains nothing. Send the agent's model calls through the gateway (an LLM resource such as "
    "agentbolt.gateway_llm(), a client built from llm.endpoint) or through a client agentbolt traces "
    "(docs/frameworks.md), and switch off caches that answer without calling the model "
    "(DSPy: dspy.LM(..., cache=False))"
)
"""Why it matters and what to do."""


def answered_a_call(spans: Iterable[Span]) -> bool:
    """Whether ``spans`` hold a model call that answered (did not fail): what training needs."""
    return any(not call.failed for call in extract_model_calls(spans))


def why_no_samples() -> str:
    """The reason a rollout without a model call has no training samples."""
    return f"this rollout {NO_MODEL_CALL}: {WHAT_TO_DO}"


def left_out(algorithm: str, count: int, total: int) -> str:
    """The one line an algorithm logs about the ``count`` rollouts (of ``total``) it left out."""
    return (f"{algorithm}: {count} of {total} rollouts {NO_MODEL_CALL} that answered and are left out of "
            f"the training data; {WHAT_TO_DO}")
