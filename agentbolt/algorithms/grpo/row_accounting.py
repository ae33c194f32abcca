"""Per step, which rollouts (rows) trained and why each other one was dropped.

:func:`row_metrics` is fed what the step decided, in the order it decided it — the
rollouts handed over, the groups that entered advantages (:mod:`.advantages`), the ones
``_collect`` refused (:mod:`.onpolicy`) or found without a model call, the samples built,
those left after overlong filtering (:mod:`.overlong`), the staleness split
(:mod:`.staleness`) and the samples trained — and gives ``rows/in``, ``rows/trained``
and ``rows/dropped/<reason>`` for every reason of :data:`~agentbolt.metrics.rows.DROP_REASONS`
(each dropped row under the first reason that applies; see :mod:`agentbolt.metrics.rows`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentbolt.adapters.samples import Sample
from agentbolt.algorithms.grpo.advantages import Advantages, GroupMember
from agentbolt.metrics.rows import DROP_REASONS, DropReason
from agentbolt.training.staleness import StalenessSplit

__all__ = ["row_metrics"]


def row_metrics(offered: Sequence[str], members: Mapping[str, Sequence[GroupMember]],
                refused: Mapping[str, DropReason], built: Sequence[Sample], advantages: Advantages,
                kept: Sequence[Sample], split: StalenessSplit | None, trained: Sequence[Sample]) -> dict[str, int]:
    """``rows/in``, ``rows/trained``, ``rows/dropped/<reason>`` of one step.

    ``offered``: every rollout handed to the step; ``members``: the groups that entered
    advantages (a judge may have left some out); ``refused``: rollouts ``_collect`` built
    no sample for (``off_policy``, ``no_model_call``); ``built``: the samples built;
    ``kept``: those with an advantage left after overlong filtering; ``split``: the
    staleness split (None: not checked); ``trained``: the samples of the update."""
    grouped = {m.rollout_id: m for ms in members.values() for m in ms}
    with_samples = {s.rollout_id for s in built}
    kept_ids = {s.rollout_id for s in kept}
    trained_ids = {s.rollout_id for s in trained}
    unknown = set(split.unknown_rollouts) if split else set()
    dropped = dict.fromkeys(DROP_REASONS, 0)
    for rid in dict.fromkeys(offered):
        if rid in trained_ids:
            continue
        member = grouped.get(rid)
        reason: DropReason
        if member is None:
            reason = "unscored"
        elif member.failed or member.reward is None:
            reason = "failed"
        elif rid in refused:
            reason = refused[rid]
        elif rid not in with_samples:
            reason = "no_trained_call"
        elif rid not in advantages.by_rollout:
            reason = "zero_variance"
        elif rid not in kept_ids:
            reason = "truncated"
        elif rid in unknown:
            reason = "unknown_version"
        else:  # kept, not trained: the staleness split took it
            reason = "stale"
        dropped[reason] += 1
    out = {"rows/in": len(dict.fromkeys(offered)), "rows/trained": len(trained_ids)}
    out.update({f"rows/dropped/{r}": n for r, n in dropped.items()})
    return out
