"""The attempt's responses, kept so ``previous_response_id`` can rebuild the history.

Each answered Responses call stores its conversation — the chat messages it was
answered on (without ``instructions``, which OpenAI does not carry over) plus the
assistant's answer — under its response id. A later call naming it as
``previous_response_id`` starts from that conversation, so the chat request the gateway
sends and records holds the whole conversation (and keeps token-exact history).

The conversation is also on the call's span (its request and response), so when this
process does not have it — another server process answered the earlier call, or the
server restarted — it is read back from the store. The Response object sent back is kept
too, for ``GET …/v1/responses/{id}`` (:mod:`.stored`); a deleted id is remembered so it
is neither retrieved nor continued again.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import orjson

from agentbolt.gateway.responses.items import answer_message
from agentbolt.semconv import LLM_API as API
from agentbolt.semconv import LLM_CONVERSATION_START as CONVERSATION_START
from agentbolt.semconv import LLM_PREVIOUS_RESPONSE_ID as PREVIOUS_RESPONSE_ID
from agentbolt.semconv import LLM_REQUEST, LLM_RESPONSE
from agentbolt.semconv import LLM_RESPONSE_API_ID as RESPONSE_ID
from agentbolt.store.base import Store
from agentbolt.types import Span

__all__ = ["API", "CONVERSATION_START", "PREVIOUS_RESPONSE_ID", "RESPONSE_ID", "ResponseLog", "span_of"]
# the span attributes of a translated Responses call (described in agentbolt.semconv)


class ResponseLog:
    """Conversations (and the Response objects answered) by (rollout, attempt, response
    id); the oldest are dropped past ``limit``. A deleted response stays deleted for this
    process: it is neither retrieved nor continued, although its span stays in the trace."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._items: OrderedDict[tuple[str, str, str], list[dict[str, Any]]] = OrderedDict()
        self._objects: OrderedDict[tuple[str, str, str], dict[str, Any]] = OrderedDict()
        self._deleted: OrderedDict[tuple[str, str, str], None] = OrderedDict()

    def remember(self, key: tuple[str, str, str], messages: list[dict[str, Any]], answer: dict[str, Any],
                 response: dict[str, Any] | None = None) -> None:
        """Keep the conversation that ``answer`` ended, and the Response object sent back."""
        if len(self._items) >= self.limit:
            self._items.popitem(last=False)
        self._items[key] = [*messages, answer_message(answer)]
        if response is not None:
            if len(self._objects) >= self.limit:
                self._objects.popitem(last=False)
            self._objects[key] = response

    def known(self, key: tuple[str, str, str]) -> bool:
        return key in self._items

    def deleted(self, key: tuple[str, str, str]) -> bool:
        return key in self._deleted

    def forget(self, key: tuple[str, str, str]) -> None:
        """Delete response ``key``: later retrievals and continuations of it are 404s."""
        self._items.pop(key, None)
        self._objects.pop(key, None)
        if len(self._deleted) >= self.limit:
            self._deleted.popitem(last=False)
        self._deleted[key] = None

    def response(self, key: tuple[str, str, str]) -> dict[str, Any] | None:
        """The Response object answered as ``key`` by this process, if it still has it."""
        found = self._objects.get(key)
        return None if found is None or key in self._deleted else dict(found)

    async def conversation(self, key: tuple[str, str, str], store: Store) -> list[dict[str, Any]] | None:
        """The conversation that ended with response ``key[2]``, or None if unknown."""
        if key in self._deleted:
            return None
        found = self._items.get(key)
        if found is not None:
            return [dict(m) for m in found]
        span = await span_of(key, store)
        if span is None:
            return None
        request = orjson.loads(span.attributes.get(LLM_REQUEST) or "{}")
        response = orjson.loads(span.attributes.get(LLM_RESPONSE) or "{}")
        choices = response.get("choices") or []
        if not choices:
            return None  # the call failed: there is no answer to continue from
        messages = list(request.get("messages") or [])
        start = span.attributes.get(CONVERSATION_START)
        messages = messages[start if isinstance(start, int) else 0:]
        return [*messages, answer_message(choices[0].get("message") or {})]


async def span_of(key: tuple[str, str, str], store: Store) -> Span | None:
    """The span of the call answered as response ``key[2]`` in attempt ``key[:2]``."""
    rollout_id, attempt_id, response_id = key
    for span in await store.get_spans(rollout_id, attempt_id):
        if span.attributes.get(RESPONSE_ID) == response_id:
            return span
    return None
