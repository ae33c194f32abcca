"""A step's metrics of how its rollouts' calls became samples (:mod:`agentbolt.adapters.samples`).

Per rollout, then summed or averaged over the step's rollouts that made a model call:
``samples/per_rollout``, ``calls/per_rollout`` (trained calls), ``conversations/per_rollout``,
``merge/misses`` and ``merge/rate`` (trained follow-up calls that started a new sample, and
the share that merged), ``merge/breaks/<cause>`` (samples that started as a
``new_conversation`` or ``diverged``: :mod:`agentbolt.adapters.lineage`), and
``tokens/{trained,context,shared}`` (the samples' trained tokens, their untrained ones, and
the untrained leading tokens a sample shares with an earlier one of its rollout, which the
update's prefix groups can run once).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentbolt.adapters.lineage import BREAK_CAUSES
from agentbolt.adapters.samples import RolloutSamples

__all__ = ["merge_metrics"]


def merge_metrics(per_rollout: Sequence[RolloutSamples]) -> dict[str, Any]:
    """The metrics above (None where no rollout made a call)."""
    n = len(per_rollout)
    calls = [p.num_calls for p in per_rollout]
    follow_ups = sum(max(c - 1, 0) for c in calls)
    misses = sum(p.merge_misses for p in per_rollout)
    out: dict[str, Any] = {
        "samples/per_rollout": sum(len(p.samples) for p in per_rollout) / n if n else None,
        "calls/per_rollout": sum(calls) / n if n else None,
        "conversations/per_rollout": sum(p.counts.conversations for p in per_rollout) / n if n else None,
        "merge/misses": misses,
        "merge/rate": 1.0 - misses / follow_ups if follow_ups else None,
    }
    for cause in BREAK_CAUSES[1:]:
        out[f"merge/breaks/{cause}"] = sum(p.counts.breaks.get(cause, 0) for p in per_rollout)
    out["tokens/trained"] = sum(p.counts.tokens_trained for p in per_rollout)
    out["tokens/context"] = sum(p.counts.tokens_context for p in per_rollout)
    out["tokens/shared"] = sum(p.counts.tokens_shared for p in per_rollout)
    return out
