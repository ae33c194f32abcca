"""Spans → each attempt's model calls, parsed once.

::

    attempts = parse_attempts(await store.get_spans(rollout_id, "latest"))
    SampleAdapter("solver").adapt_calls(attempts)      # the samples, without parsing again
    off_policy_in(attempts[-1].calls)                   # GRPO's sampling check, the same calls

Parsing a span into a :class:`~.calls.ModelCall` (request, response, token ids,
logprobs, agent name) is the costly part of turning a rollout into training data. A
reader that needs the calls more than once — GRPO builds samples from them, checks how
they were sampled and, with several policies, builds each policy's samples — parses each
attempt once with :func:`parse_attempts` and passes the :class:`AttemptCalls` on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agentbolt.adapters.calls import ModelCall, extract_model_calls, group_by_attempt
from agentbolt.adapters.rewards import final_reward
from agentbolt.types import Span

__all__ = ["AttemptCalls", "parse_attempts"]


@dataclass(frozen=True, slots=True)
class AttemptCalls:
    """One rollout attempt's model calls, in start order, and its final reward."""

    calls: tuple[ModelCall, ...]
    """Every call of the attempt (:func:`~.calls.extract_model_calls`), failed ones included."""
    reward: float | None
    """The attempt's final reward (:func:`~.rewards.final_reward`)."""

    @property
    def succeeded(self) -> bool:
        """Whether any of its calls succeeded."""
        return any(not c.failed for c in self.calls)


def parse_attempts(spans: Iterable[Span]) -> list[AttemptCalls]:
    """The model calls of each attempt in ``spans`` (in attempt order), each span parsed once."""
    return [AttemptCalls(tuple(extract_model_calls(group)), final_reward(group)) for group in group_by_attempt(spans)]
