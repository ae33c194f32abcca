"""Anthropic's Messages API at the gateway, translated to and from its chat path.

``POST /rollout/{rid}/attempt/{aid}/v1/messages`` (and ``POST /v1/messages`` with the
attempt in headers or the scoped token, sent as ``x-api-key`` or ``Authorization:
Bearer``): non-streaming and streaming, tools, ``tool_choice``, ``stop_sequences``;
``…/v1/messages/count_tokens``; ``GET …/v1/models`` in Anthropic's shape when the call
has an ``anthropic-version`` header. Recorded like a chat call. See ``docs/gateway.md``.
"""

from agentbolt.gateway.messages.api import anthropic_model, anthropic_models, count_tokens, create_message
from agentbolt.gateway.messages.errors import as_anthropic, error_body

__all__ = ["anthropic_model", "anthropic_models", "as_anthropic", "count_tokens", "create_message", "error_body"]
