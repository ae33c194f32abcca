"""A step's merge metrics: samples and conversations per rollout, breaks by cause and the
tokens trained, context and shared, summed over the step's rollouts."""

from __future__ import annotations

from adapters.test_lineage import MAIN_SYSTEM, SUB_SYSTEM, chat

from agentbolt.adapters.samples import SampleAdapter
from agentbolt.algorithms.grpo.merging import merge_metrics


def test_a_step_counts_samples_conversations_and_breaks_by_cause() -> None:
    compacted = [*MAIN_SYSTEM, 90]
    spans = [
        chat("m1", [*MAIN_SYSTEM, 10], [20], t=0, rollout="r1"),
        chat("s1", SUB_SYSTEM, [40], t=1, rollout="r1", system="sub"),  # a sub-agent: new conversation
        chat("m2", compacted, [21], t=2, rollout="r1"),  # compaction: diverged
        chat("x1", [*MAIN_SYSTEM, 11], [22, 23], t=0, rollout="r2"),  # one linear conversation
    ]
    per_rollout = SampleAdapter().adapt(spans)
    m = merge_metrics(per_rollout)
    assert (m["samples/per_rollout"], m["calls/per_rollout"], m["conversations/per_rollout"]) == (2.0, 2.0, 1.5)
    assert (m["merge/breaks/new_conversation"], m["merge/breaks/diverged"], m["merge/misses"]) == (1, 1, 2)
    assert m["merge/rate"] == 0.0  # both follow-up calls of r1 started a sample
    trained = sum(p.counts.tokens_trained for p in per_rollout)
    assert (m["tokens/trained"], m["tokens/shared"]) == (trained, len(MAIN_SYSTEM) - 1) and trained == 5
    assert m["tokens/context"] == sum(len(s.token_ids) for p in per_rollout for s in p.samples) - trained
    assert merge_metrics([])["samples/per_rollout"] is None
