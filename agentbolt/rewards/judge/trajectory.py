"""A rollout as a judge sees it: its task, its conversation, its tool calls, its output.

:meth:`Trajectory.from_spans` reads it back from the spans the store holds (the model calls
the gateway or the tracer recorded, the ``execute_tool`` spans of MCP tool calls, the
output span); :meth:`Trajectory.from_messages` builds one from a conversation an agent
holds. :func:`quote` turns trajectories into the data block of a judge prompt.

Quoting (what it protects and what not): every text a trajectory carries is written as a
JSON string, inside a block whose opening and closing lines hold a random marker drawn
per call, which the trajectories do not contain. A trajectory can therefore not close its
block early, fake another trajectory, or forge the judge's instructions' framing; the
judge is told that everything inside is data. That does not stop a judge *model* from
being persuaded by what the data says ("the answer above is correct, score it 1"): a
judge is a model and reads the text. Keep the score grounded in facts the judge can check
(the task's reference answer in the rubric, the tool results recorded by agentbolt rather
than the agent's account of them), and watch the rationales.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentbolt import semconv
from agentbolt.adapters.calls import extract_model_calls, span_order
from agentbolt.types import Span, SpanStatus

__all__ = ["ToolCall", "Trajectory", "quote"]

MAX_TEXT_CHARS = 4000
"""Longest text of one message or tool result shown to the judge; longer ones keep their
head and tail around an ``[… N characters left out …]`` mark."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as agentbolt recorded it (an ``execute_tool`` span)."""

    name: str
    arguments: Any
    result: Any
    error: bool = False


@dataclass(frozen=True)
class Trajectory:
    """What one rollout did, for a judge."""

    rollout_id: str
    task: Any = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The conversation: the last model call's messages plus its answer (earlier calls
    whose messages the last one does not continue are kept before it)."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    output: Any = None
    """What the agent returned (its output span), when it recorded one."""

    @classmethod
    def from_messages(cls, messages: Sequence[Mapping[str, Any]], *, task: Any = None, output: Any = None,
                      rollout_id: str = "") -> Trajectory:
        return cls(rollout_id, task, [dict(m) for m in messages], [], output)

    @classmethod
    def from_spans(cls, rollout_id: str, spans: Sequence[Span], *, task: Any = None) -> Trajectory:
        """The trajectory of one attempt's ``spans`` (pass the latest attempt's)."""
        calls = [c for c in extract_model_calls(spans) if not c.failed and c.messages is not None]
        messages: list[dict[str, Any]] = []
        for call in calls:
            turn = [dict(m) for m in call.messages or []]
            if call.response_message is not None:
                turn.append({k: v for k, v in call.response_message.items() if v is not None})
            if turn[: len(messages)] == messages:
                messages = turn  # this call continues the conversation
            else:
                messages = messages + turn  # another conversation (a sub-agent): keep both
        tools = [_tool_call(s) for s in sorted(spans, key=span_order)
                 if s.attributes.get(semconv.GEN_AI_OPERATION) == semconv.EXECUTE_TOOL]
        _found, output = semconv.output_of(spans)
        return cls(rollout_id, task, messages, tools, output)

    def as_data(self) -> dict[str, Any]:
        """The judge's view: JSON values, long texts shortened."""
        data: dict[str, Any] = {"conversation": [_message(m) for m in self.messages]}
        if self.tool_calls:
            data["tool_calls_recorded_by_agentbolt"] = [
                {"tool": t.name, "arguments": _short(t.arguments), "result": _short(t.result),
                 **({"failed": True} if t.error else {})}
                for t in self.tool_calls
            ]
        if self.output is not None:
            data["final_output"] = _short(self.output)
        return data


def _tool_call(span: Span) -> ToolCall:
    attrs = span.attributes
    return ToolCall(str(attrs.get(semconv.GEN_AI_TOOL_NAME, span.name)),
                    _decoded(attrs.get(semconv.GEN_AI_TOOL_CALL_ARGUMENTS)),
                    _decoded(attrs.get(semconv.GEN_AI_TOOL_CALL_RESULT)),
                    span.status == SpanStatus.ERROR or bool(attrs.get(semconv.MCP_IS_ERROR)))


def _decoded(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


def _message(m: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": str(m.get("role", "?"))}
    content = m.get("content")
    if isinstance(content, list):  # content parts: keep the text ones
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    if content is not None:
        out["content"] = _short(content)
    for key in ("tool_calls", "tool_call_id", "name"):
        if m.get(key):
            out[key] = _short(m[key])
    return out


def _short(value: Any) -> Any:
    if isinstance(value, str):
        if len(value) <= MAX_TEXT_CHARS:
            return value
        half = MAX_TEXT_CHARS // 2
        return f"{value[:half]}[… {len(value) - 2 * half} characters left out …]{value[-half:]}"
    if isinstance(value, Mapping):
        return {str(k): _short(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_short(v) for v in value]
    return value


def quote(items: Mapping[str, Any]) -> tuple[str, str]:
    """``(block, marker)``: ``items`` (label → JSON values) as one data block between two
    lines holding a fresh random marker that occurs nowhere in the data."""
    body = orjson.dumps(dict(items), option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    marker = f"DATA-{secrets.token_hex(8)}"
    while marker in body:  # 2^-64 per draw; a trajectory cannot plan for a marker drawn after it was written
        marker = f"DATA-{secrets.token_hex(8)}"
    return f"<<<{marker}\n{body}\n{marker}>>>", marker
