"""The attempt's responses, kept so ``previous_response_id`` can rebuild the history.

Each answered Responses call stores its conversation — the chat messages it was
answered on (without ``instructions``, which OpenAI does not carry over) plus the
assistant's answer — under its response id. A later call naming it as
``previous_response_id`` starts from that conversation, so the chat request the gateway
sends and records holds the whole conversation (and keeps token-exact history).

The conversation is also on the call's span (its request and response), so when this
process does not have it — another server process answered the earlier call, or the
server restarted — it is read back from the store.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import orjson

from agentbolt.gateway.responses.items import answer_message
from agentbolt.store.base import Store
from agentbolt.tracing.names import LLM_REQUEST, LLM_RESPONSE

__all__ = ["API", "CONVERSATION_START", "PREVIOUS_RESPONSE_ID", "RESPONSE_ID", "ResponseLog"]

RESPONSE_ID = "agentbolt.llm.response_api_id"
"""Span attribute: the Responses API id of the call (``resp_…``)."""
PREVIOUS_RESPONSE_ID = "agentbolt.llm.previous_response_id"
"""Span attribute: the ``previous_response_id`` the call continued."""
CONVERSATION_START = "agentbolt.llm.conversation_start"
"""Span attribute: where the conversation starts in the recorded messages (1 after an
``instructions`` system message, which a later call does not inherit)."""
API = "agentbolt.llm.api"
"""Span attribute: the API the agent called when the gateway translated it (``responses``)."""


class ResponseLog:
    """Conversations by (rollout, attempt, response id); the oldest are dropped past ``limit``."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._items: OrderedDict[tuple[str, str, str], list[dict[str, Any]]] = OrderedDict()

    def remember(self, key: tuple[str, str, str], messages: list[dict[str, Any]], answer: dict[str, Any]) -> None:
        if len(self._items) >= self.limit:
            self._items.popitem(last=False)
        self._items[key] = [*messages, answer_message(answer)]

    def known(self, key: tuple[str, str, str]) -> bool:
        return key in self._items

    async def conversation(self, key: tuple[str, str, str], store: Store) -> list[dict[str, Any]] | None:
        """The conversation that ended with response ``key[2]``, or None if unknown."""
        found = self._items.get(key)
        if found is not None:
            return [dict(m) for m in found]
        rollout_id, attempt_id, response_id = key
        for span in await store.get_spans(rollout_id, attempt_id):
            if span.attributes.get(RESPONSE_ID) != response_id:
                continue
            request = orjson.loads(span.attributes.get(LLM_REQUEST) or "{}")
            response = orjson.loads(span.attributes.get(LLM_RESPONSE) or "{}")
            choices = response.get("choices") or []
            if not choices:
                return None  # the call failed: there is no answer to continue from
            messages = list(request.get("messages") or [])
            start = span.attributes.get(CONVERSATION_START)
            messages = messages[start if isinstance(start, int) else 0:]
            return [*messages, answer_message(choices[0].get("message") or {})]
        return None
