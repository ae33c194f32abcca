"""Warn when a succeeded attempt made no recorded model call.

Such an attempt passes — it may have a reward — and trains nothing
(:mod:`agentbolt.adapters.no_model_call` says why and what to do). The runner checks each
attempt that succeeded, after the tracer's flush, and logs one warning per rollout.

What the check trusts, cheapest first:

1. the attempt's :class:`~agentbolt.tracing.context.CallTally`, counted in this process as
   the agent ran: the model-call spans the tracer recorded, and the requests sent through
   ``httpx`` to the attempt's gateway URL (the gateway records each). Either one means a
   call was recorded: no store read, the common case;
2. otherwise the store: the attempt's spans, for a call the gateway recorded from a client
   agentbolt does not see (not ``httpx``). The gateway writes its spans in the background,
   within about 50 ms of the answer, so when the attempt was given an ``LLM`` resource the
   store is read once more after :data:`GATEWAY_GRACE` seconds before warning.

A call made by an HTTP client other than ``httpx`` whose gateway span is stored later
than that would be warned about wrongly; the algorithms count from the store after
flushing the gateway, which is exact.
"""

from __future__ import annotations

import asyncio
import logging

from agentbolt.adapters.calls import is_model_call
from agentbolt.adapters.no_model_call import NO_MODEL_CALL, WHAT_TO_DO
from agentbolt.store.base import Store
from agentbolt.tracing.context import AttemptContext
from agentbolt.types import LLM

__all__ = ["GATEWAY_GRACE", "warn_if_no_model_call"]

log = logging.getLogger("agentbolt.runner")

GATEWAY_GRACE = 0.25
"""Seconds to wait for the gateway's spans (written every 50 ms) before the second read."""


async def warn_if_no_model_call(store: Store, ctx: AttemptContext) -> bool:
    """Log a warning when the succeeded attempt ``ctx`` made no recorded model call;
    returns whether it did. A store that cannot be read is taken to hold a call."""
    if ctx.calls.any:
        return False
    resources = ctx.resources.resources.values() if ctx.resources is not None else ()
    reads = 2 if any(isinstance(r, LLM) for r in resources) else 1
    for read in range(reads):
        if read:
            await asyncio.sleep(GATEWAY_GRACE)
        try:
            spans = await store.get_spans(ctx.rollout_id, ctx.attempt_id)
        except Exception as exc:  # noqa: BLE001 — a warning is not worth failing the attempt
            log.debug("could not read the spans of rollout %s to check its model calls: %s", ctx.rollout_id, exc)
            return False
        if any(is_model_call(s) for s in spans):
            return False
    log.warning("rollout %s succeeded but %s: %s", ctx.rollout_id, NO_MODEL_CALL, WHAT_TO_DO)
    return True
