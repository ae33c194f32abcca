"""Did any model call of the attempt succeed? A program whose every call the gateway
refused or failed (a 4xx or 5xx on each) learnt nothing from the model: whatever the
evaluator says of its work, it is an infrastructure failure, not a score.

The gateway records every call it answers as a span in the store (its status in
``http.response.status_code``), written in the background within
``GatewayConfig.span_flush_interval`` of the answer. A runner cannot wait on that writer
as an algorithm does (``POST /v1/gateway/flush`` is the admin's; a runner holds only the
attempt's scoped token, which must not drive the gateway), so an attempt that looks
refused is read again after a short settle time before it is failed; one that looks fine
needs no wait. Calls refused before the gateway (a bad token: 401/403) are not recorded
and cannot be counted here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from agentbolt import semconv
from agentbolt.tracing.context import AttemptContext
from agentbolt.types import Span

__all__ = ["GatewayCalls", "gateway_calls", "refused_calls"]

SETTLE_S = 0.5
"""How long a refused-looking attempt waits for spans still on their way before it is failed."""


@dataclass(frozen=True, slots=True)
class GatewayCalls:
    """The attempt's calls as the gateway recorded them."""

    succeeded: int
    failed: int
    last_status: int | None = None
    last_error: str | None = None
    transient: bool = False
    """Some failure was a 429 or 5xx (worth another try), not only the request's own 4xx."""

    @property
    def none_succeeded(self) -> bool:
        return self.failed > 0 and self.succeeded == 0

    @property
    def reason(self) -> str:
        return (f"no model call of this attempt succeeded: the gateway answered all {self.failed} with an error, "
                f"the last with {self.last_status}: {self.last_error}")


def gateway_calls(spans: Iterable[Span]) -> GatewayCalls:
    """Count the gateway's model-call spans among ``spans`` by outcome (in start order)."""
    ok = failed = 0
    last: Span | None = None
    transient = False
    for span in sorted(spans, key=lambda s: s.start_time):
        if span.attributes.get(semconv.SCOPE_NAME) != semconv.GATEWAY_SCOPE:
            continue
        status = span.attributes.get(semconv.HTTP_STATUS)
        if isinstance(status, int) and status < 400:
            ok += 1
            continue
        failed += 1
        last = span
        transient = transient or not isinstance(status, int) or status == 429 or status >= 500
    if last is None:
        return GatewayCalls(ok, failed)
    status = last.attributes.get(semconv.HTTP_STATUS)
    message = (last.status_message or "").removeprefix("EngineError: ") or "no message"
    return GatewayCalls(ok, failed, status if isinstance(status, int) else None, message, transient)


async def refused_calls(ctx: AttemptContext, settle: float = SETTLE_S) -> GatewayCalls | None:
    """The attempt's calls when the gateway recorded some and none succeeded, else None."""
    for wait in (0.0, settle):
        await asyncio.sleep(wait)
        calls = gateway_calls(await ctx.store.get_spans(ctx.rollout_id, ctx.attempt_id))
        if not calls.none_succeeded:
            return None
    return calls
