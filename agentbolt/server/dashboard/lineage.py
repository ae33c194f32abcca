"""A rollout attempt's samples as the dashboard draws them: conversations as a tree.

The attempt's model calls are merged by lineage with :class:`~agentbolt.adapters.SampleAdapter`
— every call counted, so that the conversations of agents ``agent_match`` leaves out show
too — and each sample is described, never its token ids: its conversation, how it started
(``first``, ``new_conversation``, ``diverged`` with ``diverged_at`` and the sample it
diverged from), its calls (agent, tokens, finish reason, trained under ``agent_match``)
and its token counts. Conversation 0 is the attempt's first; the others (sub-agents, a
title call) are its branches; a ``diverged`` sample hangs under the sample it shares its
prefix with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentbolt.adapters.match import AgentMatcher, agent_matcher
from agentbolt.adapters.samples import UNNAMED_AGENT, Sample, SampleAdapter
from agentbolt.adapters.triplets import MissingTokenIdsError
from agentbolt.types import Span

__all__ = ["lineage_view"]


def lineage_view(spans: Sequence[Span], *, attempt_id: str | None, agent_match: str | None = None) -> dict[str, Any]:
    """``{attempt_id, agent_match, samples: [...], counts, skipped_calls, error}`` (see module doc);
    ``error`` says why there are no samples when the calls cannot be merged (no token ids)."""
    trains = agent_matcher(agent_match)
    out: dict[str, Any] = {"attempt_id": attempt_id, "agent_match": agent_match, "samples": [], "counts": None,
                           "skipped_calls": 0, "error": None}
    try:
        found = SampleAdapter().adapt(spans)
    except MissingTokenIdsError as exc:
        out["error"] = str(exc)
        return out
    if not found:
        return out
    rollout = found[-1]
    index = {s.span_ids[0]: i for i, s in enumerate(rollout.samples) if s.span_ids}
    samples = [_sample_view(i, s, index, trains) for i, s in enumerate(rollout.samples)]
    counts = rollout.counts
    trained = sum(int(s["tokens_trained"]) for s in samples)
    out.update(attempt_id=rollout.attempt_id, samples=samples, skipped_calls=rollout.skipped_calls, counts={
        "calls": counts.calls, "conversations": counts.conversations, "samples": counts.samples,
        "breaks": dict(counts.breaks), "tokens_trained": trained,
        "tokens_context": sum(int(s["tokens"]) for s in samples) - trained, "tokens_shared": counts.tokens_shared})
    return out


def _sample_view(i: int, sample: Sample, index: Mapping[str, int], trains: AgentMatcher) -> dict[str, Any]:
    calls = [{"span_id": c.span_id, "agent_name": c.agent_name, "start": c.start, "length": c.length,
              "trained": trains(c.agent_name), "finish_reason": c.finish_reason} for c in sample.calls]
    trained = sum(c.length for c in sample.calls if trains(c.agent_name))
    origin = sample.origin
    return {
        "index": i, "conversation": origin.conversation, "cause": origin.cause,
        "diverged_at": origin.diverged_at, "diverged_from": origin.diverged_from,
        "parent": None if origin.diverged_from is None else index.get(origin.diverged_from),
        "agents": sorted({c.agent_name or UNNAMED_AGENT for c in sample.calls}),
        "tokens": len(sample.token_ids), "tokens_trained": trained,
        "tokens_context": len(sample.token_ids) - trained, "calls": calls,
    }
