"""What the dashboard shows, computed from store objects: pure functions, no I/O.

The routes in :mod:`agentbolt.server.routes.dashboard` read the store and hand the
objects here; each function returns the small JSON-ready dict a page draws. Keeping the
shaping here (and out of the routes) lets it be tested without a server and keeps the
payloads small: long texts are clipped, big attributes left out.

Times are seconds since the epoch, like everywhere in agentbolt; a waterfall also gives
``t0`` (its earliest time) to subtract for a time axis.
"""

from __future__ import annotations

import bisect
import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from agentbolt import semconv
from agentbolt.adapters.calls import ModelCall, extract_model_calls, is_model_call
from agentbolt.tracing.names import (
    AGENT_NAME,
    EXCEPTION_EVENT,
    EXCEPTION_MESSAGE,
    EXCEPTION_TYPE,
    LLM_POLICY_VERSION,
    LLM_PROMPT_TOKEN_IDS,
    LLM_REQUEST,
    LLM_RESPONSE,
    LLM_RESPONSE_LOGPROBS,
    LLM_RESPONSE_TOKEN_IDS,
    LLM_WRAPPED_SPAN_IDS,
    LLM_WRAPPER,
    ROLLOUT_SPAN,
)
from agentbolt.types import (
    Attempt,
    JsonResource,
    MetricRecord,
    PromptTemplate,
    Resources,
    Rollout,
    Span,
    SpanStatus,
    Worker,
    WorkerStatus,
)

__all__ = [
    "INPUT_PREVIEW_CHARS",
    "MAX_WATERFALL_SPANS",
    "MESSAGE_CHARS",
    "RESPONSE_CHARS",
    "SUMMARY_CHARS",
    "WORKER_ALIVE_SECONDS",
    "RunTally",
    "attempt_view",
    "call_views",
    "clip",
    "duration",
    "input_preview",
    "metric_series",
    "resource_diffs",
    "resources_view",
    "reward_marks",
    "rollout_row",
    "run_summary",
    "span_kind",
    "waterfall",
    "worker_view",
]

INPUT_PREVIEW_CHARS = 120
SUMMARY_CHARS = 160
MESSAGE_CHARS = 4000
"""Longest text of one prompt message (and of a completion prompt)."""
RESPONSE_CHARS = 8000
"""Longest response text of a model call."""
MAX_WATERFALL_SPANS = 2000
WORKER_ALIVE_SECONDS = 60.0
"""A worker not offline that was heard from this recently counts as alive."""
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
        "input.value",
        "output.value",
    }
)
"""Attributes never shown in a span's preview: large, or already on the page."""


# ----------------------------------------------------------------------------- basics
def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``…`` when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def duration(start: float | None, end: float | None) -> float | None:
    """``end - start``, or None while either is unknown."""
    return None if start is None or end is None else end - start


def _json_text(value: Any) -> str:
    return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


def input_preview(value: Any) -> str:
    """A rollout input in one short line: a string as it is, anything else as compact JSON."""
    text = value if isinstance(value, str) else _json_text(value)
    return clip(" ".join(text.split()), INPUT_PREVIEW_CHARS)


# ----------------------------------------------------------------------------- rollouts
def rollout_row(rollout: Rollout, latest: Attempt | None) -> dict[str, Any]:
    """One line of the rollouts table. ``latest`` is the rollout's latest attempt, if known."""
    return {
        "rollout_id": rollout.rollout_id,
        "status": rollout.status.value,
        "mode": rollout.mode.value,
        "reward": rollout.reward,
        "created_at": rollout.created_at,
        "start_time": rollout.start_time,
        "end_time": rollout.end_time,
        "duration": duration(rollout.start_time, rollout.end_time),
        "attempt_count": rollout.attempt_count,
        "resources_version": rollout.resources_version
        if rollout.resources_version is not None
        else (latest.resources_version if latest is not None else None),
        "worker_id": latest.worker_id if latest is not None else None,
        "input_preview": input_preview(rollout.input),
    }


def attempt_view(attempt: Attempt) -> dict[str, Any]:
    """An attempt as the store has it, plus its ``duration`` (None while it runs)."""
    out = attempt.model_dump(mode="json")
    out["duration"] = duration(attempt.start_time, attempt.end_time)
    return out


# ----------------------------------------------------------------------------- spans
def span_kind(span: Span) -> str:
    """``llm``, ``reward``, ``tool``, ``agent`` or ``other``: how the waterfall colours it."""
    attrs = span.attributes
    op = attrs.get("gen_ai.operation.name")
    oi_kind = str(attrs.get("openinference.span.kind") or "").upper()
    if span.name == semconv.REWARD_SPAN:
        return "reward"
    if is_model_call(span) or attrs.get(LLM_WRAPPER) or oi_kind == "LLM" or op in ("chat", "text_completion"):
        return "llm"
    if op == "execute_tool" or oi_kind == "TOOL" or "gen_ai.tool.name" in attrs or "tool.name" in attrs:
        return "tool"
    if span.name == ROLLOUT_SPAN or op in ("invoke_agent", "create_agent") or oi_kind == "AGENT":
        return "agent"
    return "other"


def _number_text(value: float) -> str:
    return f"{value:.4g}"


def _token_counts(call: ModelCall) -> tuple[int | None, int | None]:
    usage = call.response.get("usage") if isinstance(call.response.get("usage"), dict) else {}
    prompt = len(call.prompt_token_ids) if call.prompt_token_ids is not None else None
    completion = len(call.response_token_ids) if call.response_token_ids is not None else None
    if prompt is None:
        prompt = _int(call.attributes.get("gen_ai.usage.input_tokens"), usage.get("prompt_tokens"))
    if completion is None:
        completion = _int(call.attributes.get("gen_ai.usage.output_tokens"), usage.get("completion_tokens"))
    return prompt, completion


def _int(*candidates: Any) -> int | None:
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _error_of(span: Span) -> str | None:
    if span.status != SpanStatus.ERROR:
        return None
    if span.status_message:
        return span.status_message
    for event in span.events:
        if event.name == EXCEPTION_EVENT:
            kind, message = event.attributes.get(EXCEPTION_TYPE), event.attributes.get(EXCEPTION_MESSAGE)
            return ": ".join(str(p) for p in (kind, message) if p) or "error"
    return "error"


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
        prompt, completion = _token_counts(call)
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
        parts.append(str(attrs.get("gen_ai.tool.name") or attrs.get("tool.name") or span.name))
    elif kind == "agent":
        parts.append(str(attrs.get(AGENT_NAME) or attrs.get("gen_ai.agent.name") or span.name))
    if not parts:
        parts.append(span.name)
    error = _error_of(span)
    if error:
        parts.append(f"error: {error}")
    return clip(" · ".join(parts), SUMMARY_CHARS)


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
    return clip(_json_text(value), _PREVIEW_VALUE_CHARS)


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


# ----------------------------------------------------------------------------- model calls
def _content_text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, dict):
                parts.append(f"[{part.get('type') or 'part'}]")
        return "".join(parts)
    return _json_text(content)


def _tool_calls_view(calls: Any) -> list[dict[str, Any]]:
    out = []
    for c in calls if isinstance(calls, list) else ():
        fn = c.get("function") if isinstance(c, dict) and isinstance(c.get("function"), dict) else {}
        args = fn.get("arguments")
        out.append(
            {
                "name": fn.get("name"),
                "arguments": clip(args if isinstance(args, str) else _json_text(args), MESSAGE_CHARS),
            }
        )
    return out


def _message_view(message: Mapping[str, Any]) -> dict[str, Any]:
    text = _content_text(message.get("content"))
    view: dict[str, Any] = {
        "role": str(message.get("role") or "?"),
        "content": clip(text, MESSAGE_CHARS) if text is not None else None,
    }
    if message.get("tool_calls"):
        view["tool_calls"] = _tool_calls_view(message.get("tool_calls"))
    return view


def _logprobs_summary(logprobs: list[float] | None) -> dict[str, Any] | None:
    if not logprobs:
        return None
    return {"mean": sum(logprobs) / len(logprobs), "min": min(logprobs), "n": len(logprobs)}


def call_views(spans: Sequence[Span]) -> list[dict[str, Any]]:
    """The model calls of an attempt's spans (a call seen by the gateway and by the
    agent's client counts once), with their texts clipped and token counts."""
    by_id = {s.span_id: s for s in spans}
    out = []
    for call in extract_model_calls(spans):
        prompt_tokens, completion_tokens = _token_counts(call)
        prompt = call.prompt
        prompt_text = None
        if call.messages is None and prompt is not None:
            prompt_text = clip(prompt if isinstance(prompt, str) else _json_text(prompt), MESSAGE_CHARS)
        span = by_id.get(call.span_id)
        policy = call.attributes.get(LLM_POLICY_VERSION)
        out.append(
            {
                "span_id": call.span_id,
                "agent_name": call.agent_name,
                "model": call.model,
                "operation": call.operation,
                "start": call.start_time,
                "end": call.end_time,
                "duration": duration(call.start_time, call.end_time),
                "prompt_messages": [_message_view(m) for m in call.messages] if call.messages is not None else None,
                "prompt_text": prompt_text,
                "response_text": clip(call.response_text, RESPONSE_CHARS) if call.response_text is not None else None,
                "response_tool_calls": _tool_calls_view(call.tool_calls),
                "finish_reason": call.finish_reason,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "has_token_ids": call.has_token_ids,
                "logprobs": _logprobs_summary(call.response_logprobs),
                "policy_version": policy if isinstance(policy, int) and not isinstance(policy, bool) else None,
                "failed": call.failed,
                "error": _error_of(span) if span is not None else None,
            }
        )
    return out


# ----------------------------------------------------------------------------- resources
def resources_view(bundle: Resources) -> dict[str, Any]:
    """A resources version: its names and kinds, and its prompt templates in full
    (model endpoints are named only: their keys stay out of the page)."""
    return {
        "version": bundle.version,
        "created_at": bundle.created_at,
        "names": sorted(bundle.resources),
        "kinds": {name: r.resource_type for name, r in sorted(bundle.resources.items())},
        "metadata": bundle.metadata,
        "prompt_templates": {
            name: r.template for name, r in sorted(bundle.resources.items()) if isinstance(r, PromptTemplate)
        },
    }


def _diffable_text(bundle: Resources | None, name: str) -> str | None:
    resource = bundle.resources.get(name) if bundle is not None else None
    if isinstance(resource, PromptTemplate):
        return resource.template
    if isinstance(resource, JsonResource):
        return orjson.dumps(resource.value, default=str, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
    return None


def _lines(text: str | None) -> list[str]:
    if not text:
        return []
    lines = text.splitlines(keepends=True)
    if not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return lines


def resource_diffs(new: Resources, old: Resources | None) -> dict[str, dict[str, Any]]:
    """Per prompt template and JSON resource of either version: the text before (in
    ``old``), after (in ``new``), whether it changed, and a unified diff."""
    names = sorted(set(new.resources) | set(old.resources if old is not None else ()))
    old_label = f"v{old.version}" if old is not None else "none"
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        before, after = _diffable_text(old, name), _diffable_text(new, name)
        if before is None and after is None:
            continue  # a model endpoint (or absent from both)
        unified = "".join(
            difflib.unified_diff(
                _lines(before), _lines(after), fromfile=f"{old_label}/{name}", tofile=f"v{new.version}/{name}"
            )
        )
        out[name] = {"before": before, "after": after, "changed": before != after, "unified": unified}
    return out


# ----------------------------------------------------------------------------- workers
def worker_view(worker: Worker, now: float) -> dict[str, Any]:
    """A worker with its heartbeat age, whether it is alive, and its kind (the
    ``kind`` it put in its metadata: ``runner``, ``controller``...; else ``unknown``)."""
    age = max(0.0, now - worker.last_heartbeat_time)
    kind = worker.metadata.get("kind")
    return {
        "worker_id": worker.worker_id,
        "status": worker.status.value,
        "last_heartbeat_time": worker.last_heartbeat_time,
        "heartbeat_age": age,
        "alive": worker.status != WorkerStatus.OFFLINE and age <= WORKER_ALIVE_SECONDS,
        "current_rollout_id": worker.current_rollout_id,
        "current_attempt_id": worker.current_attempt_id,
        "kind": kind if isinstance(kind, str) and kind else "unknown",
        "created_at": worker.created_at,
        "metadata": worker.metadata,
    }


# ----------------------------------------------------------------------------- training metrics
class RunTally:
    """What the runs list shows of one training run — step range, record count, last
    write time, metric names — kept up to date from the records read since last time.

    Feed it the records after :meth:`resume_after` (by step ascending): the last step
    seen is read again each time, so metrics merged into it later (an eval logged after
    the train numbers of the same step) are not missed.
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.first_step: int | None = None
        self.last_step: int | None = None
        self.n_records = 0
        self.last_time: float | None = None
        self.keys: set[str] = set()

    def resume_after(self) -> int | None:
        """The ``after_step`` to read from next."""
        return None if self.last_step is None else self.last_step - 1

    def add(self, records: Iterable[MetricRecord]) -> None:
        for rec in records:
            if self.last_step is None or rec.step > self.last_step:
                self.n_records += 1
                self.last_step = rec.step
            if self.first_step is None or rec.step < self.first_step:
                self.first_step = rec.step
            self.keys.update(rec.values)
            self.last_time = rec.timestamp if self.last_time is None else max(self.last_time, rec.timestamp)

    def view(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "n_records": self.n_records,
            "last_time": self.last_time,
            "keys": sorted(self.keys),
        }


def run_summary(run_id: str, records: Sequence[MetricRecord]) -> dict[str, Any]:
    """One training run (all its records, by step): step range, record count, last write
    time and metric names."""
    tally = RunTally(run_id)
    tally.add(records)
    return tally.view()


def metric_series(records: Sequence[MetricRecord], keys: Sequence[str] | None) -> dict[str, list[list[Any]]]:
    """``{key: [[step, value], ...]}`` for ``keys`` (every key logged when None). A
    step that did not log a key has no point; a logged non-finite value is null."""
    wanted = list(dict.fromkeys(keys)) if keys else sorted({k for r in records for k in r.values})
    series: dict[str, list[list[Any]]] = {k: [] for k in wanted}
    for rec in records:
        for k in wanted:
            if k in rec.values:
                series[k].append([rec.step, rec.values[k]])
    return series
