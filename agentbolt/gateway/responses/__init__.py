"""The OpenAI Responses API at the gateway, translated to and from its chat path.

``POST /rollout/{rid}/attempt/{aid}/v1/responses`` (and ``POST /v1/responses`` with the
attempt in headers or the scoped token): non-streaming and streaming, function tools,
``previous_response_id``; recorded like a chat call. ``GET`` / ``DELETE
…/v1/responses/{response_id}`` retrieve and delete the attempt's responses. See
``docs/gateway.md``.
"""

from agentbolt.gateway.responses.api import create_response
from agentbolt.gateway.responses.log import ResponseLog
from agentbolt.gateway.responses.stored import delete_response, retrieve_response

__all__ = ["ResponseLog", "create_response", "delete_response", "retrieve_response"]
