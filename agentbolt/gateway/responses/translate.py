"""A Responses API request as a chat request, and a chat answer as a Response object.

Fields the gateway can honour are translated (``instructions``, ``input``, ``tools`` —
function and namespace tools; hosted ones are dropped, see :mod:`.tools` —,
``tool_choice``, ``parallel_tool_calls``, ``max_output_tokens``, ``temperature``,
``top_p``, ``top_logprobs``, ``stream``); fields about OpenAI's own storage and features
(``store``, ``include``, ``reasoning``, ``truncation``, ``text``, ``metadata``) are
accepted and echoed, not acted on.
"""

from __future__ import annotations

import time
from typing import Any

from agentbolt.engines.chat_template import bad_request
from agentbolt.gateway.responses.items import output_items
from agentbolt.gateway.responses.tools import ToolSet, chat_tool_choice, tool_set
from agentbolt.responses_chat import UnsupportedItemError, input_messages, instruction_messages

__all__ = ["chat_request", "response_object", "usage_of"]

_SAMPLING = ("model", "temperature", "top_p", "top_logprobs", "user", "seed", "top_k", "stop")


def chat_request(body: dict[str, Any], history: list[dict[str, Any]]) -> tuple[dict[str, Any], ToolSet]:
    """The chat body for ``body``: ``instructions`` as the system message, then
    ``history`` (the conversation up to ``previous_response_id``), then ``input``; and
    the request's tools as the prompt has them (:mod:`.tools`)."""
    tools = tool_set(body.get("tools"))
    messages = instruction_messages(body.get("instructions")) + [dict(m) for m in history]
    try:  # strict: what has no chat form is the caller's 400, not a prompt silently short of it
        messages += input_messages(body.get("input", []), prompt_name=tools.prompt_name, strict=True)
    except UnsupportedItemError as exc:
        raise bad_request(str(exc), "input") from exc
    chat: dict[str, Any] = {k: body[k] for k in _SAMPLING if body.get(k) is not None}
    chat["messages"] = messages
    if tools.tools:
        chat["tools"] = tools.tools
        if body.get("tool_choice") is not None:
            chat["tool_choice"] = chat_tool_choice(body["tool_choice"], tools)
    if body.get("parallel_tool_calls") is not None:
        chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    if body.get("top_logprobs"):
        chat["logprobs"] = True
    return chat, tools


def usage_of(chat_usage: Any) -> dict[str, Any] | None:
    """Responses ``usage`` from chat ``usage``."""
    if not isinstance(chat_usage, dict):
        return None
    inp, out = int(chat_usage.get("prompt_tokens") or 0), int(chat_usage.get("completion_tokens") or 0)
    return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": inp + out}


def response_object(body: dict[str, Any], response_id: str, *, created_at: float | None = None,
                    model: str | None = None, output: list[dict[str, Any]] | None = None,
                    status: str = "completed", finish_reason: str | None = None, usage: Any = None,
                    error: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Response object (``status``: in_progress, completed, incomplete, failed) that echoes
    the request's settings; ``finish_reason`` ``length`` makes a completed one incomplete."""
    if status == "completed" and finish_reason == "length":
        status = "incomplete"
    return {
        "id": response_id, "object": "response", "created_at": created_at or time.time(), "status": status,
        "error": error,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
        "model": model or body.get("model") or "", "output": output or [],
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": body.get("reasoning"), "store": body.get("store", True),
        "temperature": body.get("temperature"), "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice") or "auto", "tools": body.get("tools") or [],
        "top_p": body.get("top_p"), "truncation": body.get("truncation") or "disabled",
        "usage": usage_of(usage), "user": body.get("user"), "metadata": body.get("metadata") or {},
    }


def completed_response(body: dict[str, Any], response_id: str, chat: dict[str, Any],
                       tools: ToolSet | None = None) -> dict[str, Any]:
    """The Response object for a non-streaming chat answer."""
    choice = (chat.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    return response_object(body, response_id, model=chat.get("model"), output=output_items(message, [], tools),
                           finish_reason=choice.get("finish_reason"), usage=chat.get("usage"))
