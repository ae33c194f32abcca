"""``POST …/v1/responses``: a Responses API call answered through the gateway's chat path.

The request becomes a chat request (:mod:`.translate`) holding the whole conversation —
with ``previous_response_id``, the stored conversation of that response first
(:mod:`.log`) — and goes through :meth:`Gateway.complete` / :meth:`Gateway.open_chunks`
like any chat call: forced sampling, token ids and logprobs, token-exact history, one
span, whose request is the full chat request (tools the engine cannot run are left out
and named in ``agentbolt.llm.dropped_tools``: :mod:`.tools`). The answer comes back as a Response object
or as Responses events (:mod:`.events`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agentbolt.engines.engine import EngineError
from agentbolt.gateway.responses.events import ResponsesStream
from agentbolt.gateway.responses.items import new_id
from agentbolt.gateway.responses.log import (
    API,
    CONVERSATION_START,
    PREVIOUS_RESPONSE_ID,
    RESPONSE_ID,
    ResponseLog,
)
from agentbolt.gateway.responses.translate import chat_request, completed_response
from agentbolt.semconv import LLM_DROPPED_TOOLS

if TYPE_CHECKING:
    from agentbolt.gateway.origin import CallOrigin
    from agentbolt.store.base import Store

__all__ = ["ChatGateway", "create_response"]


class ChatGateway(Protocol):
    """The gateway as the Responses API uses it: its chat path and its response log.
    :class:`~agentbolt.gateway.Gateway` is one; it is named by this protocol rather than
    imported, because the gateway keeps this package's :class:`ResponseLog` (no loop)."""

    responses: ResponseLog

    @property
    def store(self) -> Store: ...

    async def flush(self) -> None: ...

    async def complete(self, kind: Literal["chat", "completions"], body: dict[str, Any], rollout_id: str,
                       attempt_id: str, origin: CallOrigin | None = None,
                       attributes: dict[str, Any] | None = None) -> dict[str, Any]: ...

    async def open_chunks(
        self, kind: Literal["chat", "completions"], body: dict[str, Any], rollout_id: str, attempt_id: str,
        origin: CallOrigin | None = None, attributes: dict[str, Any] | None = None, *, hide_usage: bool = False,
    ) -> AsyncIterator[dict[str, Any]]: ...


def _not_found(previous: str) -> EngineError:
    message = (f"Previous response with id {previous!r} not found: it must be a response of this same rollout "
               "attempt (responses are kept per attempt)")
    return EngineError(404, message, {"error": {"message": message, "type": "invalid_request_error",
                                                "param": "previous_response_id",
                                                "code": "previous_response_not_found"}})


async def create_response(gateway: ChatGateway, body: dict[str, Any], rollout_id: str, attempt_id: str,
                          origin: CallOrigin | None = None) -> dict[str, Any] | AsyncIterator[bytes]:
    """Answer one Responses call: a Response object, or SSE bytes when ``body["stream"]``.
    Raises EngineError (Responses/OpenAI error body) or the gateway's usual errors."""
    previous = body.get("previous_response_id")
    history: list[dict[str, Any]] = []
    if previous is not None:
        if not isinstance(previous, str):
            raise EngineError(400, "previous_response_id must be a string")
        if gateway.responses.deleted((rollout_id, attempt_id, previous)):
            raise _not_found(previous)
        if gateway.responses.known((rollout_id, attempt_id, previous)):
            found = await gateway.responses.conversation((rollout_id, attempt_id, previous), gateway.store)
        else:
            await gateway.flush()  # its span may still be on its way to the store
            found = await gateway.responses.conversation((rollout_id, attempt_id, previous), gateway.store)
        if found is None:
            raise _not_found(previous)
        history = found
    chat, tools = chat_request(body, history)
    response_id = new_id("resp")
    start = 1 if chat["messages"] and body.get("instructions") else 0
    attributes: dict[str, Any] = {API: "responses", RESPONSE_ID: response_id, CONVERSATION_START: start}
    if tools.dropped:
        attributes[LLM_DROPPED_TOOLS] = tools.dropped
    if previous is not None:
        attributes[PREVIOUS_RESPONSE_ID] = previous
    key = (rollout_id, attempt_id, response_id)
    conversation = chat["messages"][start:]

    def remember(message: dict[str, Any], response: dict[str, Any]) -> None:
        gateway.responses.remember(key, conversation, message, response)

    if body.get("stream"):
        chunks = await gateway.open_chunks("chat", {**chat, "stream": True}, rollout_id, attempt_id, origin,
                                           attributes)
        return ResponsesStream(body, response_id, remember, tools).events(chunks)
    answer = await gateway.complete("chat", chat, rollout_id, attempt_id, origin, attributes)
    response = completed_response(body, response_id, answer, tools)
    remember(((answer.get("choices") or [{}])[0]).get("message") or {}, response)
    return response
