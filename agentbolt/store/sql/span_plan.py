"""Planning a span batch: which spans are new, their sequence ids, the rows to insert.

Shared by the SQL backends (SQLite, PostgreSQL): both load the batch's target attempts,
look up the span ids already stored, then plan here. A re-sent span (stored before, or
earlier in the same batch) is returned as stored and takes no new sequence id; a span
without a ``sequence_id`` gets the attempt's next one. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentbolt.store.sql.rows import dump_span, span_from_data
from agentbolt.types import Attempt, Span

__all__ = ["SpanKey", "SpanPlan", "plan_spans"]

SpanKey = tuple[str, str]
"""``(rollout_id, attempt_id)``."""


class _Rollout(Protocol):
    seq: int


class _Attempt(Protocol):
    model: Attempt
    next_span_seq: int


@dataclass(slots=True)
class SpanPlan:
    """What storing a span batch will do: rows to insert, spans to return, new spans.

    A row is ``(rollout_seq, attempt_seq, span_id, sequence_id, name, start_time, json)``."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    out: list[Span] = field(default_factory=list)
    new: list[tuple[SpanKey, Span]] = field(default_factory=list)
    next_seq: dict[SpanKey, int] = field(default_factory=dict)


def _numbered(span: Span, sequence_id: int) -> Span:
    """A copy of ``span`` with its ``sequence_id``: pydantic's ``model_copy(update=...)``
    without its generality (a third of the cost, on every span stored)."""
    copy = span.__copy__()
    copy.__dict__["sequence_id"] = sequence_id
    copy.__pydantic_fields_set__.add("sequence_id")
    return copy


def plan_spans(
    spans: Sequence[Span],
    targets: Mapping[SpanKey, tuple[_Rollout, _Attempt]],
    stored: Mapping[SpanKey, Mapping[str, str]],
) -> SpanPlan:
    """Plan storing ``spans``; ``stored`` holds the JSON of spans already stored, by key
    and span id (only the ids of this batch are needed)."""
    plan = SpanPlan(next_seq={key: la.next_span_seq for key, (_, la) in targets.items()})
    known: dict[SpanKey, dict[str, Span | str]] = {key: dict(stored.get(key, {})) for key in targets}
    for s in spans:
        key = (s.rollout_id, s.attempt_id)
        hit = known[key].get(s.span_id)
        if hit is not None:  # stored before, or earlier in this batch: returned as stored
            plan.out.append(hit if isinstance(hit, Span) else span_from_data(hit))
            continue
        seq = plan.next_seq[key]
        sid = s.sequence_id
        if sid is None:
            sid = seq
            s = _numbered(s, sid)
        plan.next_seq[key] = max(seq, sid) + 1
        known[key][s.span_id] = s
        lr, la = targets[key]
        plan.rows.append((lr.seq, la.model.sequence_id, s.span_id, sid, s.name, s.start_time, dump_span(s, sid)))
        plan.new.append((key, s))
        plan.out.append(s)
    return plan
