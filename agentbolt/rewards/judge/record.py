"""What a judge leaves in the store: per rollout, one ``agentbolt.judge`` span (the call:
messages, answer, client, this rollout's score and rationale) and, when it scored, one
``agentbolt.reward`` span with the judge's score as a named reward (primary, so it
becomes the rollout's reward) and the rationale beside it.

The judge span is not a model call (it has no ``agentbolt.llm.request``), so adapters
never turn it into training data: judge calls are recorded, never trained on. Both spans
go to the rollout's latest attempt, under its root span, after the attempt ended (their
times are the judge call's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentbolt import semconv
from agentbolt.rewards.judge.client import JudgeCall
from agentbolt.rewards.judge.errors import JudgeError
from agentbolt.tracing.emitters import to_json
from agentbolt.types import Span, SpanStatus

__all__ = ["JudgeKind", "Verdict", "failure_spans", "judge_attributes", "verdict_spans"]

JudgeKind = Literal["group", "rubric"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """A judge's score of one rollout, and the call that gave it."""

    rollout_id: str
    score: float
    rationale: str
    call: JudgeCall


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a rollout's judge spans go: its latest attempt, under its root span."""

    rollout_id: str
    attempt_id: str
    trace_id: str | None = None
    parent_id: str | None = None

    @classmethod
    def of(cls, rollout_id: str, attempt_id: str, spans: Sequence[Span]) -> Placement:
        root = next((s for s in spans if s.name == semconv.ROLLOUT_SPAN), None)
        return cls(rollout_id, attempt_id, root.trace_id if root else None, root.span_id if root else None)

    def span(self, **fields: object) -> Span:
        ids = {"trace_id": self.trace_id} if self.trace_id else {}
        return Span(rollout_id=self.rollout_id, attempt_id=self.attempt_id, parent_id=self.parent_id,
                    **ids, **fields)


def judge_attributes(call: JudgeCall | None, *, kind: JudgeKind, name: str, group: Sequence[str]) -> dict[str, Any]:
    """The attributes of an ``agentbolt.judge`` span for ``call``."""
    attrs: dict[str, Any] = {semconv.JUDGE_KIND: kind, semconv.JUDGE_NAME: name,
                             semconv.JUDGE_GROUP: list(group)}
    if call is not None:
        attrs.update({semconv.JUDGE_CALL_ID: call.call_id, semconv.JUDGE_CLIENT: call.client,
                      semconv.JUDGE_REQUEST: to_json(call.messages), semconv.JUDGE_RESPONSE: call.answer,
                      semconv.JUDGE_ATTEMPTS: call.attempts})
        if call.model:
            attrs[semconv.JUDGE_MODEL] = call.model
    return attrs


def verdict_spans(verdict: Verdict, where: Placement, *, kind: JudgeKind, name: str,
                  group: Sequence[str]) -> list[Span]:
    """The judge span and the reward span of one scored rollout."""
    call = verdict.call
    judged = {**judge_attributes(call, kind=kind, name=name, group=group), semconv.JUDGE_SCORE: verdict.score,
              semconv.JUDGE_RATIONALE: verdict.rationale}
    reward = {**semconv.reward_span_attributes({name: verdict.score}, name),
              semconv.JUDGE_RATIONALE: verdict.rationale, semconv.JUDGE_CALL_ID: call.call_id}
    return [
        where.span(name=semconv.JUDGE_SPAN, status=SpanStatus.OK, start_time=call.start_time, end_time=call.end_time,
                   attributes=judged),
        where.span(name=semconv.REWARD_SPAN, status=SpanStatus.OK, start_time=call.end_time, end_time=call.end_time,
                   attributes=reward),
    ]


def failure_spans(error: JudgeError, where: Placement, *, kind: JudgeKind, name: str,
                  group: Sequence[str]) -> list[Span]:
    """The judge span of a rollout the judge failed to score (status error, no reward)."""
    call = error.call
    attrs = {**judge_attributes(call, kind=kind, name=name, group=group),
             semconv.EXCEPTION_TYPE: type(error).__name__, semconv.EXCEPTION_MESSAGE: str(error)}
    times = {"start_time": call.start_time, "end_time": call.end_time} if call is not None else {}
    return [where.span(name=semconv.JUDGE_SPAN, status=SpanStatus.ERROR, status_message=str(error)[:1000],
                       attributes=attrs, **times)]
