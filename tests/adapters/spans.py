"""Build the spans of one attempt by hand, shaped as the tracer stores them (see
docs/semantic-conventions.md), so adapter rules can be specified call by call."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentbolt import semconv
from agentbolt.types import Span, SpanStatus


@dataclass
class Attempt:
    """The spans of one attempt, built in time order (``t`` advances one second a span)."""

    rollout_id: str = "ro-1"
    attempt_id: str = "at-1"
    resources_version: int | None = None
    spans: list[Span] = field(default_factory=list)
    t: float = 1000.0
    root_id: str = "root000000000000"

    def __post_init__(self) -> None:
        attrs: dict[str, Any] = {"agentbolt.rollout.mode": "train", "agentbolt.attempt.sequence_id": 1}
        if self.resources_version is not None:
            attrs["agentbolt.resources.version"] = self.resources_version
        self.spans.append(self._span("agentbolt.rollout", self.root_id, None, attrs, duration=0.0))

    def _span(
        self, name: str, span_id: str, parent: str | None, attrs: dict[str, Any], *, duration: float = 0.5,
        status: SpanStatus = SpanStatus.UNSET,
    ) -> Span:
        start = self.t
        self.t += 1.0
        return Span(
            rollout_id=self.rollout_id,
            attempt_id=self.attempt_id,
            sequence_id=len(self.spans),
            trace_id="t" * 32,
            span_id=span_id,
            parent_id=parent,
            name=name,
            start_time=start,
            end_time=start + duration,
            status=status,
            attributes={"agentbolt.rollout_id": self.rollout_id, "agentbolt.attempt_id": self.attempt_id, **attrs},
        )

    def chat(
        self,
        span_id: str,
        messages: list[dict[str, Any]],
        answer: str | None = "ok",
        *,
        agent: str | None = None,
        parent: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        token_ids: bool = True,
        logprobs: bool = True,
        failed: bool = False,
        extra: dict[str, Any] | None = None,
    ) -> Span:
        request: dict[str, Any] = {"model": "m", "messages": messages}
        if tools:
            request["tools"] = tools
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "agentbolt.llm.request": json.dumps(request),
            "agentbolt.llm.token_ids_source": "none",
        }
        if not failed:
            message: dict[str, Any] = {"role": "assistant", "content": answer, "refusal": None}
            if tool_calls:
                message["tool_calls"] = tool_calls
            finish = "tool_calls" if tool_calls else "stop"
            response = {"model": "m-served", "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
            attrs["agentbolt.llm.response"] = json.dumps(response)
            attrs["gen_ai.response.model"] = "m-served"
            if token_ids:
                attrs["agentbolt.llm.prompt_token_ids"] = ids_of(json.dumps(messages))
                attrs["agentbolt.llm.response_token_ids"] = ids_of(answer or "")
                attrs["agentbolt.llm.token_ids_source"] = "engine"
                if logprobs:
                    attrs["agentbolt.llm.response_logprobs"] = [-0.5] * len(ids_of(answer or ""))
        if agent is not None:
            attrs["agentbolt.agent.name"] = agent
        attrs.update(extra or {})
        span = self._span(
            "chat m", span_id, parent or self.root_id, attrs, status=SpanStatus.ERROR if failed else SpanStatus.UNSET
        )
        self.spans.append(span)
        return span

    def completion(self, span_id: str, prompt: str, text: str) -> Span:
        attrs = {
            "gen_ai.operation.name": "text_completion",
            "agentbolt.llm.request": json.dumps({"model": "m", "prompt": prompt}),
            "agentbolt.llm.response": json.dumps({"choices": [{"index": 0, "text": text, "finish_reason": "length"}]}),
            "agentbolt.llm.prompt_token_ids": ids_of(prompt),
            "agentbolt.llm.response_token_ids": ids_of(text),
            "agentbolt.llm.token_ids_source": "engine",
        }
        span = self._span("text_completion m", span_id, self.root_id, attrs)
        self.spans.append(span)
        return span

    def wrapper(self, span_id: str, wraps: list[str], *, metadata: dict[str, Any] | None = None, parent: str | None = None) -> Span:
        """A framework's model-call span (LangChain's ChatOpenAI) around client calls."""
        attrs: dict[str, Any] = {
            "openinference.span.kind": "LLM",
            "agentbolt.llm.wrapper": True,
            "agentbolt.llm.wrapped_span_ids": wraps,
        }
        if metadata is not None:
            attrs["metadata"] = json.dumps(metadata)
        span = self._span("ChatOpenAI", span_id, parent or self.root_id, attrs)
        self.spans.append(span)
        return span

    def chain(self, span_id: str, name: str, attrs: dict[str, Any], parent: str | None = None) -> Span:
        span = self._span(name, span_id, parent or self.root_id, attrs)
        self.spans.append(span)
        return span

    def reward(self, value: float, **named: float) -> Span:
        rewards = {"reward": value, **named}
        span = self._span(
            semconv.REWARD_SPAN, f"rw{len(self.spans):014d}", self.root_id,
            semconv.reward_span_attributes(rewards, "reward"), duration=0.0,
        )
        self.spans.append(span)
        return span


def ids_of(text: str) -> list[int]:
    return list(text.encode())


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}
