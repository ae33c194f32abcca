"""A training step's rows: how many went in, how many trained, why the others were dropped.

A *row* is one rollout handed to the step. GRPO logs (:mod:`agentbolt.algorithms.grpo.row_accounting`)
``rows/in``, ``rows/trained`` and ``rows/dropped/<reason>`` for every reason of
:data:`DROP_REASONS` (0 when none), each dropped row counted once, under the first
reason that applies in this order:

* ``unscored`` — the group judge (``group_reward``) left its group unscored;
* ``failed`` — the rollout failed or was cancelled for infrastructure reasons (or has no reward);
* ``off_policy`` — refused: a training call was sampled otherwise than the importance ratio assumes;
* ``no_model_call`` — no model call succeeded (none made, or the gateway refused every one);
* ``no_trained_call`` — no call has token ids and is selected by ``agent_match``;
* ``zero_variance`` — its group's rewards were all equal (no signal);
* ``truncated`` — every sample went to overlong filtering (a call cut at ``max_tokens``);
* ``stale`` — staler than ``max_policy_lag``;
* ``unknown_version`` — tokens of a policy version whose weights the trainer does not hold.

The store keeps numbers only; :func:`why_nothing_trained` turns a step's values into the
one-line answer to "why did this step train nothing?" (GRPO's log and the dashboard use it).
``GRPOPolicies`` logs the same per policy, under ``<policy>/rows/...``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

__all__ = ["DROP_REASONS", "DropReason", "dropped_rows", "why_nothing_trained"]

DropReason = Literal["unscored", "failed", "off_policy", "no_model_call", "no_trained_call", "zero_variance",
                     "truncated", "stale", "unknown_version"]
DROP_REASONS: tuple[DropReason, ...] = ("unscored", "failed", "off_policy", "no_model_call", "no_trained_call",
                                        "zero_variance", "truncated", "stale", "unknown_version")

_PHRASES: dict[DropReason, str] = {
    "unscored": "left unscored by the group judge",
    "failed": "failed (infrastructure) or had no reward",
    "off_policy": "refused: sampled otherwise than training assumes",
    "no_model_call": "made no successful model call",
    "no_trained_call": "had no call with token ids that agent_match trains",
    "zero_variance": "in groups with zero reward variance",
    "truncated": "cut at max_tokens and filtered as overlong",
    "stale": "staler than max_policy_lag",
    "unknown_version": "from a policy version the trainer does not hold",
}


def dropped_rows(values: Mapping[str, float | int | None], prefix: str = "") -> dict[DropReason, int]:
    """The step's ``rows/dropped/<reason>`` counts that are not 0, in :data:`DROP_REASONS` order
    (``prefix``: a policy's, ``"<policy>/"``, in a run that trains several)."""
    found = {r: int(values.get(f"{prefix}rows/dropped/{r}") or 0) for r in DROP_REASONS}
    return {r: n for r, n in found.items() if n}


def why_nothing_trained(values: Mapping[str, float | int | None], prefix: str = "") -> str | None:
    """One line saying why a step trained no row (None: it trained some, or logged no ``rows/in``)."""
    rows_in, trained = values.get(f"{prefix}rows/in"), values.get(f"{prefix}rows/trained")
    if rows_in is None or trained is None or trained > 0:
        return None
    if not rows_in:
        return "the step had no rollouts"
    dropped = dropped_rows(values, prefix)
    if len(dropped) == 1:
        ((reason, n),) = dropped.items()
        line = f"all {n} rollouts {_PHRASES[reason]}"
        groups = values.get(f"{prefix}groups/dropped_equal")
        if reason == "zero_variance" and groups:
            line = f"all {int(groups)} groups had zero reward variance ({n} rollouts)"
        return line
    parts = "; ".join(f"{n} {_PHRASES[r]}" for r, n in dropped.items())
    return f"none of {int(rows_in)} rollouts trained: {parts}" if parts else f"none of {int(rows_in)} rollouts trained"
