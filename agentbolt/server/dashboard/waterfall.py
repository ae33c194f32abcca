"""The waterfall of one attempt: spans nested by parent (or by time), with kinds, summaries and rewards."""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentbolt import semconv
from agentbolt.adapters.calls import ModelCall, extract_model_calls, is_model_call
from agentbolt.semconv import (
    AGENT_NAME,
    LLM_PROMPT_TOKEN_IDS,
    LLM_REQUEST,
    LLM_RESPONSE,
    LLM_RESPONSE_LOGPROBS,
    LLM_RESPONSE_TOKEN_IDS,
    LLM_WRAPPED_SPAN_IDS,
    LLM_WRAPPER,
    OPERATION_INPUT,
    OPERATION_OUTPUT,
    OPERATION_SPAN,
    ROLLOUT_SPAN,
)
from agentbolt.server.dashboard.calls import span_error, token_counts
from agentbolt.server.dashboard.text import clip, duration, json_text
from agentbolt.types import Span

__all__ = ["MAX_WATERFALL_SPANS", "SUMMARY_CHARS", "reward_marks", "span_kind", "waterfall"]

SUMMARY_CHARS = 160
MAX_WATERFALL_SPANS = 2000
_PREVIEW_KEYS = 12
_PREVIEW_VALUE_CHARS = 200
_BULKY_ATTRIBUTES = frozenset(
    {
        LLM_REQUEST,
        LLM_RESPONSE,
        LLM_PROMPT_TOKEN_IDS,
        LLM_RESPONSE_TOKEN_IDS,
        LLM_RESPONSE_LOGPROBS,
        LLM_WRAPPED_SPAN_IDS,
        semconv.ROLLOUT_ID,
        semconv.ATTEMPT_ID,
        semconv.OI_INPUT,
        semconv.OI_OUTPUT,
    }
)
"""Attributes never shown in a span's preview: large, or already on the page."""


def span_kind(span: Span) -> str:
    """``llm``, ``reward``, ``tool``, ``agent`` or ``other``: how the waterfall colours it."""
    attrs = span.attributes
    op = attrs.get(semconv.GEN_AI_OPERATION)
    oi_kind = str(attrs.get(semconv.OI_SPAN_KIND) or "").upper()
    if span.name == semconv.REWARD_SPAN:
        return "reward"
    llm_op = op in (semconv.CHAT, semconv.TEXT_COMPLETION)
    if is_model_call(span) or attrs.get(LLM_WRAPPER) or oi_kind == "LLM" or llm_op:
        return "llm"
    if op == "execute_tool" or oi_kind == "TOOL" or semconv.GEN_AI_TOOL_NAME in attrs or semconv.OI_TOOL_NAME in attrs:
        return "tool"
    if span.name == ROLLOUT_SPAN or op in ("invoke_agent", "create_agent") or oi_kind == "AGENT":
        return "agent"
    return "other"


def _number_text(value: float) -> str:
    return f"{value:.4g}"


def _rewards_of(span: Span) -> list[tuple[str, float]]:
    """The named rewards a reward span carries, the primary one first."""
    attrs = span.attributes
    primary = str(attrs.get(semconv.REWARD_PRIMARY) or "reward")
    named = [
        (key[len(semconv.REWARD_PREFIX) :], float(v))
        for key, v in attrs.items()
        if key.startswith(semconv.REWARD_PREFIX) and isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    value = semconv.primary_reward(span.name, attrs)
    if value is not None and not any(name == primary for name, _ in named):
        named.append((primary, value))
    named.sort(key=lambda nv: nv[0] != primary)
    return named


def _summary(span: Span, kind: str, call: ModelCall | None) -> str:
    attrs = span.attributes
    parts: list[str] = []
    if kind == "llm" and call is not None:
        prompt, completion = token_counts(call)
        parts.append(call.model or span.name)
        if prompt is not None or completion is not None:
            shown = ["?" if n is None else str(n) for n in (prompt, completion)]
            parts.append(f"{shown[0]} → {shown[1]} tokens")
        if call.agent_name:
            parts.append(f"agent {call.agent_name}")
        if call.finish_reason:
            parts.append(call.finish_reason)
    elif kind == "reward":
        rewards = _rewards_of(span)
        if rewards:
            (name, value), rest = rewards[0], rewards[1:]
            text = f"{name} = {_number_text(value)}"
            if rest:
                text += " (" + ", ".join(f"{n} = {_number_text(v)}" for n, v in rest) + ")"
            parts.append(text)
    elif kind == "tool":
        parts.append(str(attrs.get(semconv.GEN_AI_TOOL_NAME) or attrs.get(semconv.OI_TOOL_NAME) or span.name))
    elif kind == "agent":
        parts.append(str(attrs.get(AGENT_NAME) or attrs.get(semconv.GEN_AI_AGENT_NAME) or span.name))
    elif span.name == semconv.SANDBOX_SPAN:  # what a harness sandbox blocked
        count = attrs.get(semconv.SANDBOX_COUNT, 1)
        parts.append(f"sandbox blocked {attrs.get(semconv.SANDBOX_KIND, '?')} ×{count}: "
                     f"{attrs.get(semconv.SANDBOX_DETAIL, '')}")
    elif span.name == OPERATION_SPAN and (
        OPERATION_INPUT in attrs or OPERATION_OUTPUT in attrs
    ):  # e.g. a query and its rows
        parts.append(f"{_recorded_text(attrs.get(OPERATION_INPUT))} → {_recorded_text(attrs.get(OPERATION_OUTPUT))}")
    if not parts:
        parts.append(span.name)
    error = span_error(span)
    if error:
        parts.append(f"error: {error}")
    return clip(" · ".join(parts), SUMMARY_CHARS)


def _recorded_text(value: Any) -> str:
    """An operation's recorded input or output (JSON text) as plain text: a string unquoted."""
    if value is None:
        return "…"
    try:
        decoded = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return str(value)
    return decoded if isinstance(decoded, str) else json_text(decoded)


def _preview_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return clip(value, _PREVIEW_VALUE_CHARS)
    if isinstance(value, (list, tuple)) and len(value) <= 5 and all(isinstance(v, (bool, int, float)) for v in value):
        return list(value)
    if isinstance(value, (list, tuple)):
        return f"[{len(value)} items]"
    return clip(json_text(value), _PREVIEW_VALUE_CHARS)


def _attributes_preview(attrs: Mapping[str, Any]) -> dict[str, Any]:
    keys = [k for k in attrs if k not in _BULKY_ATTRIBUTES]
    return {k: _preview_value(attrs[k]) for k in keys[:_PREVIEW_KEYS]}


def _order(span: Span) -> tuple[float, int, str]:
    return (span.start_time, span.sequence_id if span.sequence_id is not None else 0, span.span_id)


def _place_by_time(spans: Sequence[Span], parents: dict[str, str]) -> set[str]:
    """Give each span without a known parent the innermost span that encloses it in time.

    The gateway records a model call with no parent (it cannot know the agent's span), so
    it would sit at the top next to ``agentbolt.rollout``; by time it belongs inside the
    span that was open around it. Adds the choices to ``parents`` (span id → parent id)
    and returns the ids placed. Longer spans are placed first and a span never goes
    under one of its own descendants, so no cycle forms; a span nothing encloses stays a root.
    """
    by_id = {s.span_id: s for s in spans}
    roots = [s for s in spans if s.span_id not in parents and s.end_time is not None]
    framed = sorted((s for s in spans if s.end_time is not None), key=lambda s: s.start_time)

    def chain(span_id: str) -> list[str]:
        """``span_id`` and its ancestors, innermost first (stops at a cycle)."""
        out = [span_id]
        while (up := parents.get(out[-1])) is not None and up in by_id and up not in out:
            out.append(up)
        return out

    placed: set[str] = set()
    starts = [s.start_time for s in framed]
    ends = [s.end_time or 0.0 for s in framed]  # all set: framed spans have ended
    for span in sorted(roots, key=lambda s: (s.start_time - (s.end_time or 0.0), _order(s))):
        best: tuple[int, float, float] | None = None
        choice: str | None = None
        end = span.end_time or 0.0
        # spans that start no later (a prefix of ``framed``) and end no earlier
        for j in [j for j in range(bisect.bisect_right(starts, span.start_time)) if ends[j] >= end]:
            outer = framed[j]
            if outer.span_id == span.span_id:
                continue
            ancestry = chain(outer.span_id)
            if span.span_id in ancestry:  # one of its own descendants
                continue
            rank = (len(ancestry), -((outer.end_time or 0.0) - outer.start_time), outer.start_time)
            if best is None or rank > best:
                best, choice = rank, outer.span_id
        if choice is not None:
            parents[span.span_id] = choice
            placed.add(span.span_id)
    return placed


def _nested(spans: Sequence[Span]) -> list[tuple[Span, int, bool]]:
    """Spans with their depth and whether they were placed by time, each parent before
    its children, siblings by start time. A span whose parent is not among ``spans`` goes
    under the innermost span enclosing it in time (see :func:`_place_by_time`), else it
    is a root; spans caught in a parent cycle (corrupt data) come last, as roots."""
    by_id = {s.span_id: s for s in spans}
    parents = {
        s.span_id: s.parent_id
        for s in spans
        if s.parent_id is not None and s.parent_id in by_id and s.parent_id != s.span_id
    }
    placed = _place_by_time(spans, parents)
    children: dict[str, list[Span]] = {}
    roots: list[Span] = []
    for s in spans:
        if s.span_id in parents:
            children.setdefault(parents[s.span_id], []).append(s)
        else:
            roots.append(s)
    out: list[tuple[Span, int, bool]] = []
    seen: set[str] = set()

    def visit(start: list[Span]) -> None:
        stack = [(s, 0) for s in sorted(start, key=_order, reverse=True)]
        while stack:
            span, depth = stack.pop()
            if span.span_id in seen:
                continue
            seen.add(span.span_id)
            out.append((span, depth, span.span_id in placed))
            kids = sorted(children.get(span.span_id, ()), key=_order, reverse=True)
            stack.extend((k, depth + 1) for k in kids)

    visit(roots)
    if len(seen) < len(by_id):
        visit([s for s in spans if s.span_id not in seen])
    return out


def reward_marks(spans: Iterable[Span]) -> list[dict[str, Any]]:
    """Every reward the spans carry, where it happened: ``{time, value, name, primary, span_id}``."""
    marks: list[dict[str, Any]] = []
    for span in spans:
        if span.name != semconv.REWARD_SPAN:
            continue
        time = span.end_time if span.end_time is not None else span.start_time
        for i, (name, value) in enumerate(_rewards_of(span)):
            marks.append({"time": time, "value": value, "name": name, "primary": i == 0, "span_id": span.span_id})
    marks.sort(key=lambda m: m["time"])
    return marks


def waterfall(
    spans: Sequence[Span], *, attempt_id: str | None, attempt_start: float | None, truncated: bool
) -> dict[str, Any]:
    """The trace of one attempt for a nested time-axis display (see :func:`_nested`).

    A row's ``placed`` is ``"by_time"`` when its span recorded no parent of this attempt
    (a model call the gateway recorded) and sits under the span enclosing it in time."""
    calls = {c.span_id: c for c in extract_model_calls(spans)}
    for span in spans:  # a client span the gateway also recorded is dropped above: parse it alone
        if span.span_id not in calls and is_model_call(span):
            calls.update((c.span_id, c) for c in extract_model_calls([span]))
    rows = []
    for span, depth, by_time in _nested(spans):
        kind = span_kind(span)
        rows.append(
            {
                "span_id": span.span_id,
                "parent_id": span.parent_id,
                "name": span.name,
                "kind": kind,
                "start": span.start_time,
                "end": span.end_time,
                "duration": duration(span.start_time, span.end_time),
                "status": span.status.value,
                "depth": depth,
                "placed": "by_time" if by_time else None,
                "summary": _summary(span, kind, calls.get(span.span_id)),
                "attributes_preview": _attributes_preview(span.attributes),
            }
        )
    starts = [s.start_time for s in spans]
    if attempt_start is not None:
        starts.append(attempt_start)
    return {
        "attempt_id": attempt_id,
        "t0": min(starts) if starts else None,
        "spans": rows,
        "rewards": reward_marks(spans),
        "truncated": truncated,
    }
