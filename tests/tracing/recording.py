"""Record into a claimed attempt and read back what the store got."""

from __future__ import annotations

from agentbolt.store.base import Store
from agentbolt.types import Claim, Span


async def claim(store: Store, task: object = None) -> Claim:
    """Enqueue one rollout and claim it: a live attempt to record into."""
    await store.enqueue_rollout(task)
    c = await store.claim_rollout("test-worker")
    assert c is not None
    return c


async def stored_spans(store: Store, c: Claim) -> list[Span]:
    return await store.get_spans(c.rollout.rollout_id, c.attempt.attempt_id)


def model_calls(spans: list[Span]) -> list[Span]:
    """The spans that are model calls (normalised; framework wrappers left out)."""
    return [s for s in spans if "agentbolt.llm.request" in s.attributes]


def named(spans: list[Span], name: str) -> list[Span]:
    return [s for s in spans if s.name == name]
