"""Span names and attribute keys written by agentbolt's tracer and emitters.

Rewards and attribution keys live in :mod:`agentbolt.semconv` (the store reads them);
these are the rest. ``docs/semantic-conventions.md`` describes each with its type and an
example.
"""

from __future__ import annotations

__all__ = [
    "ROLLOUT_SPAN",
    "MESSAGE_SPAN",
    "OBJECT_SPAN",
    "EXCEPTION_SPAN",
    "ANNOTATION_SPAN",
    "OPERATION_SPAN",
    "AGENT_NAME",
    "ROLLOUT_MODE",
    "ATTEMPT_SEQUENCE",
    "RESOURCES_VERSION",
    "MESSAGE_ROLE",
    "MESSAGE_CONTENT",
    "OBJECT_NAME",
    "OBJECT_TYPE",
    "OBJECT_JSON",
    "ANNOTATION_PREFIX",
    "OPERATION_NAME",
    "OPERATION_INPUT",
    "OPERATION_OUTPUT",
    "EXCEPTION_TYPE",
    "EXCEPTION_MESSAGE",
    "EXCEPTION_STACKTRACE",
    "EXCEPTION_EVENT",
    "LLM_REQUEST",
    "LLM_RESPONSE",
    "LLM_PROMPT_TOKEN_IDS",
    "LLM_RESPONSE_TOKEN_IDS",
    "LLM_RESPONSE_LOGPROBS",
    "LLM_TOKEN_IDS_SOURCE",
    "LLM_WRAPPER",
    "LLM_WRAPPED_SPAN_IDS",
    "AGENT_HEADER",
    "TRACEPARENT_HEADER",
]

# --- span names ------------------------------------------------------------------------
ROLLOUT_SPAN = "agentbolt.rollout"
"""Root span of one attempt; every other span of the attempt descends from it."""
MESSAGE_SPAN = "agentbolt.message"
OBJECT_SPAN = "agentbolt.object"
EXCEPTION_SPAN = "agentbolt.exception"
ANNOTATION_SPAN = "agentbolt.annotation"
OPERATION_SPAN = "agentbolt.operation"

# --- attributes ------------------------------------------------------------------------
AGENT_NAME = "agentbolt.agent.name"
"""Set by ``agentbolt.agent(name)`` on every span started inside (inherited by children)."""
ROLLOUT_MODE = "agentbolt.rollout.mode"
ATTEMPT_SEQUENCE = "agentbolt.attempt.sequence_id"
RESOURCES_VERSION = "agentbolt.resources.version"

MESSAGE_ROLE = "agentbolt.message.role"
MESSAGE_CONTENT = "agentbolt.message.content"

OBJECT_NAME = "agentbolt.object.name"
OBJECT_TYPE = "agentbolt.object.type"
OBJECT_JSON = "agentbolt.object.json"

ANNOTATION_PREFIX = "agentbolt.annotation."

OPERATION_NAME = "agentbolt.operation.name"
OPERATION_INPUT = "agentbolt.operation.input"
OPERATION_OUTPUT = "agentbolt.operation.output"

# OpenTelemetry's exception conventions (attributes of the "exception" event, and of
# agentbolt's exception span itself)
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_STACKTRACE = "exception.stacktrace"
EXCEPTION_EVENT = "exception"

# --- model calls (besides gen_ai.*) ----------------------------------------------------
LLM_REQUEST = "agentbolt.llm.request"
LLM_RESPONSE = "agentbolt.llm.response"
LLM_PROMPT_TOKEN_IDS = "agentbolt.llm.prompt_token_ids"
LLM_RESPONSE_TOKEN_IDS = "agentbolt.llm.response_token_ids"
LLM_RESPONSE_LOGPROBS = "agentbolt.llm.response_logprobs"
LLM_TOKEN_IDS_SOURCE = "agentbolt.llm.token_ids_source"
LLM_POLICY_VERSION = "agentbolt.llm.policy_version"
"""Version of the weights that produced the response (written by the gateway)."""
LLM_WRAPPER = "agentbolt.llm.wrapper"
"""True on a framework's model-call span (e.g. LangChain's) that wraps a client call
recorded by its own span: the wrapped call is the model call, this one is not."""
LLM_WRAPPED_SPAN_IDS = "agentbolt.llm.wrapped_span_ids"

# --- HTTP headers of model calls to the gateway ---------------------------------------
AGENT_HEADER = "x-agentbolt-agent"
"""Names the agent making a model call (percent-encoded); recorded as :data:`AGENT_NAME`
on the gateway's span (:mod:`agentbolt.gateway.origin`, :mod:`agentbolt.tracing.propagation`)."""
TRACEPARENT_HEADER = "traceparent"
"""W3C Trace Context: the caller's span becomes the parent of the gateway's span."""
