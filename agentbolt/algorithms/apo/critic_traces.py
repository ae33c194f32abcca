"""Failing rollouts as the critic reads them: their model calls, read from the store's spans, rendered as text."""

from __future__ import annotations

import asyncio
import time

from agentbolt.adapters.calls import ModelCall, extract_model_calls
from agentbolt.algorithms.apo.textual_gradient import render_trace
from agentbolt.algorithms.base import AlgorithmContext
from agentbolt.types import Rollout

__all__ = ["model_calls", "rollout_trace"]


async def rollout_trace(ctx: AlgorithmContext, n: int, rollout: Rollout, max_chars: int) -> str:
    """The rollout as the critic reads it (its model calls read from its spans)."""
    calls = await model_calls(ctx, rollout.rollout_id)
    return render_trace(n, rollout.input, calls, rollout.reward, max_chars)


async def model_calls(ctx: AlgorithmContext, rollout_id: str, patience: float = 0.5) -> list[ModelCall]:
    """The model calls of a finished rollout's latest attempt. A gateway in this process
    is flushed first; one in a server process writes its spans within its flush interval,
    so wait up to ``patience`` s for at least one there."""
    gateway = ctx.gateway
    if gateway is not None:
        await gateway.flush()  # in this process: the spans are written now; in a server: a no-op
    remote = gateway is not None and gateway.engine is None
    deadline = time.monotonic() + (patience if remote else 0.0)
    while True:
        calls = extract_model_calls(await ctx.store.get_spans(rollout_id, "latest"))
        if calls or time.monotonic() >= deadline:
            return calls
        await asyncio.sleep(0.1)
