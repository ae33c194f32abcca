"""Reward rules: which reward each model call of an attempt gets.

Rewards are spans (``agentbolt.reward``, see ``docs/semantic-conventions.md``) at the
moment they were emitted; only the *primary* value (``agentbolt.reward.value``) is used.
Two rules:

* ``"final"`` — every call gets the attempt's final reward: the value of its **last**
  reward span (the same value the store keeps as the rollout's reward). With no reward
  span, every call gets None.
* ``"preceding"`` — each reward goes to the model call that **precedes** it: the last
  call that had returned (span ended) when the reward was emitted. Several rewards after
  the same call: the last one counts. A reward emitted before any call returned is
  assigned to no call. A call followed by no reward before the next call (including the
  calls after the last reward) gets **None, not 0**: an unrewarded step is not a step
  that scored zero; the algorithm decides what None means for it.

Rewards are assigned over *all* of the attempt's successful calls, before
``agent_match`` selects some: a reward that follows the planner's call stays the
planner's and does not slide onto the solver's previous call. Failed calls (status
``error``) take no reward.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Literal

from agentbolt import semconv
from agentbolt.adapters.calls import ModelCall, span_order
from agentbolt.types import Span

__all__ = ["REWARD_RULES", "RewardRule", "assign_rewards", "check_reward_rule", "final_reward", "reward_spans"]

RewardRule = Literal["final", "preceding"]
REWARD_RULES: tuple[str, ...] = ("final", "preceding")


def check_reward_rule(rule: str) -> RewardRule:
    """``rule`` if it is a known reward rule; a ValueError naming them otherwise."""
    if rule == "final":
        return "final"
    if rule == "preceding":
        return "preceding"
    raise ValueError(
        f"unknown reward_rule {rule!r}: use 'final' (the attempt's last reward to every call) "
        f"or 'preceding' (each reward to the model call just before it)"
    )


def reward_spans(spans: Sequence[Span]) -> list[tuple[float, float]]:
    """``(time, primary value)`` of every valid reward span, in the order emitted."""
    found = [
        (s, value)
        for s in spans
        if s.name == semconv.REWARD_SPAN and (value := semconv.primary_reward(s.name, s.attributes)) is not None
    ]
    found.sort(key=lambda sv: span_order(sv[0]))
    return [(s.start_time, value) for s, value in found]


def final_reward(spans: Sequence[Span]) -> float | None:
    """The attempt's final reward: the last reward span's primary value, or None."""
    rewards = reward_spans(spans)
    return rewards[-1][1] if rewards else None


def assign_rewards(calls: Sequence[ModelCall], spans: Sequence[Span], rule: RewardRule) -> list[float | None]:
    """The reward of each of ``calls`` (one attempt's successful calls) under ``rule``."""
    check_reward_rule(rule)
    rewards = reward_spans(spans)
    if rule == "final":
        last = rewards[-1][1] if rewards else None
        return [last] * len(calls)
    order = sorted(range(len(calls)), key=lambda i: calls[i].finished_at)
    ends = [calls[i].finished_at for i in order]
    out: list[float | None] = [None] * len(calls)
    for when, value in rewards:
        pos = bisect.bisect_right(ends, when) - 1
        if pos >= 0:
            out[order[pos]] = value
    return out
