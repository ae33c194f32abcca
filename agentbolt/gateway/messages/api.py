"""``POST …/v1/messages`` and ``…/v1/messages/count_tokens``: Anthropic's Messages API
answered through the gateway's chat path.

The request becomes a chat request (:mod:`.translate`) and goes through
:meth:`Gateway.complete` / :meth:`Gateway.open_chunks` like any chat call: forced
sampling, token ids and logprobs, token-exact history across turns, the same tool-call
parser, one span whose request is the chat request (``agentbolt.llm.api`` =
``messages``; tools left out are under ``agentbolt.llm.dropped_tools``). The answer goes
back as a Message object or as Messages events (:mod:`.events`). Errors are
:class:`EngineError` with Anthropic-shaped bodies (:mod:`.errors`).
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agentbolt.engines.engine import EngineError
from agentbolt.gateway.messages.errors import anthropic_error, as_anthropic
from agentbolt.gateway.messages.events import MessagesStream
from agentbolt.gateway.messages.translate import (
    chat_request,
    content_blocks,
    message_object,
    new_message_id,
    stop_of,
    usage_of,
)
from agentbolt.semconv import LLM_API, LLM_DROPPED_TOOLS, LLM_MESSAGE_ID

if TYPE_CHECKING:
    from agentbolt.engines.token_chat import TokenChat
    from agentbolt.gateway.origin import CallOrigin

__all__ = ["MessagesGateway", "anthropic_model", "anthropic_models", "count_tokens", "create_message"]


class MessagesGateway(Protocol):
    """The gateway as the Messages API uses it: its chat path and its chat templating
    (None when the engine templates chats itself). :class:`~agentbolt.gateway.Gateway` is one."""

    token_chat: TokenChat | None

    async def complete(self, kind: Literal["chat", "completions"], body: dict[str, Any], rollout_id: str,
                       attempt_id: str, origin: CallOrigin | None = None,
                       attributes: dict[str, Any] | None = None) -> dict[str, Any]: ...

    async def open_chunks(
        self, kind: Literal["chat", "completions"], body: dict[str, Any], rollout_id: str, attempt_id: str,
        origin: CallOrigin | None = None, attributes: dict[str, Any] | None = None, *, hide_usage: bool = False,
    ) -> AsyncIterator[dict[str, Any]]: ...


def _decoder(gateway: MessagesGateway) -> Callable[[list[int]], str] | None:
    chat = gateway.token_chat
    if chat is None:
        return None
    tokenizer = chat.template.tokenizer
    return lambda ids: str(tokenizer.decode(ids))


async def create_message(gateway: MessagesGateway, body: dict[str, Any], rollout_id: str, attempt_id: str,
                         origin: CallOrigin | None = None) -> dict[str, Any] | AsyncIterator[bytes]:
    """Answer one Messages call: a Message object, or SSE bytes when ``body["stream"]``.
    Raises EngineError (Anthropic error body) or the gateway's usual errors."""
    chat, dropped = chat_request(body)
    message_id = new_message_id()
    attributes: dict[str, Any] = {LLM_API: "messages", LLM_MESSAGE_ID: message_id}
    if dropped:
        attributes[LLM_DROPPED_TOOLS] = dropped
    decode = _decoder(gateway)
    try:
        if body.get("stream"):
            chunks = await gateway.open_chunks("chat", {**chat, "stream": True}, rollout_id, attempt_id, origin,
                                               attributes)
            return MessagesStream(body, message_id, decode).events(chunks)
        answer = await gateway.complete("chat", chat, rollout_id, attempt_id, origin, attributes)
    except EngineError as exc:
        raise as_anthropic(exc) from exc
    choice = (answer.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    sampled = choice.get("token_ids")
    matched = choice.get("stop_reason") if isinstance(choice.get("stop_reason"), str) else None

    def sampled_text() -> str | None:
        return decode(sampled) if decode is not None and isinstance(sampled, list) and sampled else None

    reason, sequence = stop_of(choice.get("finish_reason"), body.get("stop_sequences") or (), matched, sampled_text)
    return message_object(body, message_id, content=content_blocks(message), stop_reason=reason,
                          stop_sequence=sequence, usage=usage_of(answer.get("usage")))


def count_tokens(gateway: MessagesGateway, body: dict[str, Any]) -> dict[str, Any]:
    """``{"input_tokens": N}``: the prompt's length as the gateway would send it to the
    engine (the chat template's rendering, tools included; no history reuse, which only
    ever keeps the same tokens). 501 when the engine templates chats itself."""
    chat = gateway.token_chat
    if chat is None:
        raise anthropic_error(501, "this gateway's engine renders chats itself, so the gateway cannot count the "
                                   "prompt's tokens: serve a model the gateway has the tokenizer of "
                                   "(the transformers engine, or vLLM with tokenizer=...)")
    request, _ = chat_request({**body, "max_tokens": body.get("max_tokens") or 1})
    try:
        template = chat.template
        ids = template.prompt_ids(request, template.tool_mode(request))
    except EngineError as exc:
        raise as_anthropic(exc) from exc
    return {"input_tokens": len(ids)}


def anthropic_model(model: dict[str, Any]) -> dict[str, Any]:
    """One OpenAI model object in Anthropic's shape."""
    created = model.get("created")
    when = datetime.datetime.fromtimestamp(created if isinstance(created, int | float) else 0, tz=datetime.UTC)
    return {"type": "model", "id": model.get("id"), "display_name": model.get("id"),
            "created_at": when.isoformat().replace("+00:00", "Z")}


def anthropic_models(models: dict[str, Any]) -> dict[str, Any]:
    """``GET /v1/models`` in Anthropic's shape (asked with an ``anthropic-version`` header)."""
    data = [anthropic_model(m) for m in models.get("data") or ()]
    return {"data": data, "has_more": False, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None}
