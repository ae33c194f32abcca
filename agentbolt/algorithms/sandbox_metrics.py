"""Sandbox events as training metrics: a rising count warns that the policy is learning to
cheat (read an answer key, reach the network, break out of its workspace).

Harnessed programs record what their sandbox blocked as ``agentbolt.sandbox`` spans
(see :mod:`agentbolt.runner.harness.sandbox.events`); this counts them over a batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from agentbolt import semconv
from agentbolt.semconv import ANNOTATION_PREFIX, ANNOTATION_SPAN

__all__ = ["sandbox_metrics"]

_SANDBOXED = ANNOTATION_PREFIX + "harness.sandboxed"


async def sandbox_metrics(store: Any, rollout_ids: Sequence[str]) -> dict[str, Any]:
    """``sandbox/events`` (all events), ``sandbox/rollouts`` (rollouts with any) and
    ``sandbox/<kind>`` over the latest attempts of ``rollout_ids``; ``{}`` when none of
    them ran in a sandbox (agents that are not harnessed programs)."""
    spans = await asyncio.gather(*(store.get_spans(rid, "latest") for rid in rollout_ids), return_exceptions=True)
    sandboxed = 0
    totals: dict[str, int] = {}
    flagged = 0
    for found in spans:
        if isinstance(found, BaseException):
            continue
        if not any(s.name == ANNOTATION_SPAN and s.attributes.get(_SANDBOXED) is True for s in found):
            continue
        sandboxed += 1
        counts = semconv.sandbox_event_counts(found)
        flagged += bool(counts)
        for kind, n in counts.items():
            totals[kind] = totals.get(kind, 0) + n
    if not sandboxed:
        return {}
    return {"sandbox/events": sum(totals.values()), "sandbox/rollouts": flagged,
            **{f"sandbox/{kind}": n for kind, n in sorted(totals.items())}}
