"""Failing rollouts as the critic reads them: their model calls, read from the store's spans, rendered as text."""

from __future__ import annotations

from agentbolt.adapters.calls import ModelCall, extract_model_calls
from agentbolt.algorithms.apo.textual_gradient import render_trace
from agentbolt.algorithms.base import AlgorithmContext
from agentbolt.types import Rollout

__all__ = ["model_calls", "rollout_trace"]


async def rollout_trace(ctx: AlgorithmContext, n: int, rollout: Rollout, max_chars: int) -> str:
    """The rollout as the critic reads it (its model calls read from its spans)."""
    calls = await model_calls(ctx, rollout.rollout_id)
    return render_trace(n, rollout.input, calls, rollout.reward, max_chars)


async def model_calls(ctx: AlgorithmContext, rollout_id: str) -> list[ModelCall]:
    """The model calls of a finished rollout's latest attempt, read once the gateway (in
    this process or a server's) has stored the spans of every finished call."""
    if ctx.gateway is not None:
        await ctx.gateway.flush()
    return extract_model_calls(await ctx.store.get_spans(rollout_id, "latest"))
