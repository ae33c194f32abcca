"""The model calls of an attempt as the dashboard shows them: prompts, responses, tokens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentbolt.adapters.calls import ModelCall, extract_model_calls
from agentbolt.semconv import (
    EXCEPTION_EVENT,
    EXCEPTION_MESSAGE,
    EXCEPTION_TYPE,
    GEN_AI_INPUT_TOKENS,
    GEN_AI_OUTPUT_TOKENS,
    LLM_POLICY_VERSION,
)
from agentbolt.server.dashboard.text import clip, duration, json_text
from agentbolt.types import Span, SpanStatus

__all__ = ["MESSAGE_CHARS", "RESPONSE_CHARS", "call_views", "span_error", "token_counts"]

MESSAGE_CHARS = 4000
"""Longest text of one prompt message (and of a completion prompt)."""
RESPONSE_CHARS = 8000
"""Longest response text of a model call."""


def token_counts(call: ModelCall) -> tuple[int | None, int | None]:
    """Prompt and completion token counts of ``call``: from its token ids, else its usage (None if unknown)."""
    given = call.response.get("usage")
    usage: dict[str, Any] = given if isinstance(given, dict) else {}
    prompt = len(call.prompt_token_ids) if call.prompt_token_ids is not None else None
    completion = len(call.response_token_ids) if call.response_token_ids is not None else None
    if prompt is None:
        prompt = _int(call.attributes.get(GEN_AI_INPUT_TOKENS), usage.get("prompt_tokens"))
    if completion is None:
        completion = _int(call.attributes.get(GEN_AI_OUTPUT_TOKENS), usage.get("completion_tokens"))
    return prompt, completion


def _int(*candidates: Any) -> int | None:
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def span_error(span: Span) -> str | None:
    """Why ``span`` failed (its status message or exception), or None when it did not."""
    if span.status != SpanStatus.ERROR:
        return None
    if span.status_message:
        return span.status_message
    for event in span.events:
        if event.name == EXCEPTION_EVENT:
            kind, message = event.attributes.get(EXCEPTION_TYPE), event.attributes.get(EXCEPTION_MESSAGE)
            return ": ".join(str(p) for p in (kind, message) if p) or "error"
    return "error"


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
    return json_text(content)


def _tool_calls_view(calls: Any) -> list[dict[str, Any]]:
    out = []
    for c in calls if isinstance(calls, list) else ():
        given = c.get("function") if isinstance(c, dict) else None
        fn: dict[str, Any] = given if isinstance(given, dict) else {}
        args = fn.get("arguments")
        out.append(
            {
                "name": fn.get("name"),
                "arguments": clip(args if isinstance(args, str) else json_text(args), MESSAGE_CHARS),
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
        prompt_tokens, completion_tokens = token_counts(call)
        prompt = call.prompt
        prompt_text = None
        if call.messages is None and prompt is not None:
            prompt_text = clip(prompt if isinstance(prompt, str) else json_text(prompt), MESSAGE_CHARS)
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
                "error": span_error(span) if span is not None else None,
            }
        )
    return out
