"""``GET`` and ``DELETE …/v1/responses/{response_id}``: the attempt's stored responses.

A response is retrieved as the Response object that was sent back when this process
answered it; when it did not (another server process, a restart, or the in-memory log
dropped it) the object is rebuilt from the call's span: the output items and call ids,
usage, model, ``instructions``, ``previous_response_id``, tools and the sampling settings
the engine was called with (the output items get new ``msg_``/``fc_`` ids; tools come
back as the function tools the prompt had — namespaces flattened, dropped hosted tools
gone —; ``metadata`` and other settings the trace does not keep come back as defaults).

Deleting forgets the response in this process: retrieving or continuing it
(``previous_response_id``) then answers 404. The span stays: it is the rollout's trace
and training data, which a client of the model API cannot erase. Responses are scoped
like calls: only the attempt that made one sees it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from agentbolt.engines.engine import EngineError
from agentbolt.gateway.responses.items import output_items
from agentbolt.gateway.responses.log import CONVERSATION_START, PREVIOUS_RESPONSE_ID, span_of
from agentbolt.gateway.responses.translate import response_object
from agentbolt.semconv import LLM_REQUEST, LLM_RESPONSE

if TYPE_CHECKING:
    from agentbolt.gateway.responses.api import ChatGateway
    from agentbolt.types import Span

__all__ = ["delete_response", "response_not_found", "retrieve_response"]


def response_not_found(response_id: str) -> EngineError:
    """The API's 404 for an id this attempt has no (undeleted) response under."""
    message = (f"Response with id {response_id!r} not found: it must be a response of this same rollout attempt "
               "that was not deleted (responses are kept per attempt)")
    return EngineError(404, message, {"error": {"message": message, "type": "invalid_request_error",
                                                "param": "response_id", "code": "response_not_found"}})


def _rebuilt(span: Span, response_id: str) -> dict[str, Any] | None:
    """The Response object of a recorded call, from its chat request and answer."""
    request = orjson.loads(span.attributes.get(LLM_REQUEST) or "{}")
    answer = orjson.loads(span.attributes.get(LLM_RESPONSE) or "{}")
    choices = answer.get("choices") or []
    if not choices:
        return None  # the call failed: nothing was answered under this id
    messages = request.get("messages") or []
    body: dict[str, Any] = {"model": request.get("model"), "temperature": request.get("temperature"),
                            "top_p": request.get("top_p"), "max_output_tokens": request.get("max_tokens"),
                            "previous_response_id": span.attributes.get(PREVIOUS_RESPONSE_ID),
                            "parallel_tool_calls": request.get("parallel_tool_calls", True)}
    if span.attributes.get(CONVERSATION_START) == 1 and messages:
        body["instructions"] = messages[0].get("content")
    if request.get("tools"):
        body["tools"] = [{"type": "function", **(t.get("function") or {})} for t in request["tools"]]
    choice = request.get("tool_choice")
    if isinstance(choice, dict):
        choice = {"type": "function", "name": (choice.get("function") or {}).get("name")}
    body["tool_choice"] = choice
    first = choices[0]
    return response_object(body, response_id, created_at=span.start_time, model=answer.get("model"),
                           output=output_items(first.get("message") or {}, []),
                           finish_reason=first.get("finish_reason"), usage=answer.get("usage"))


async def retrieve_response(gateway: ChatGateway, rollout_id: str, attempt_id: str,
                            response_id: str) -> dict[str, Any]:
    """The Response object stored as ``response_id`` in the attempt; EngineError 404 if none."""
    key = (rollout_id, attempt_id, response_id)
    if gateway.responses.deleted(key):
        raise response_not_found(response_id)
    found = gateway.responses.response(key)
    if found is not None:
        return found
    await gateway.flush()  # its span may still be on its way to the store
    span = await span_of(key, gateway.store)
    rebuilt = None if span is None else _rebuilt(span, response_id)
    if rebuilt is None:
        raise response_not_found(response_id)
    return rebuilt


async def delete_response(gateway: ChatGateway, rollout_id: str, attempt_id: str,
                          response_id: str) -> dict[str, Any]:
    """Forget ``response_id`` (see the module doc); EngineError 404 if there is none."""
    await retrieve_response(gateway, rollout_id, attempt_id, response_id)
    gateway.responses.forget((rollout_id, attempt_id, response_id))
    return {"id": response_id, "object": "response.deleted", "deleted": True}
