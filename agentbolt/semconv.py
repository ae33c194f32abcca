"""Span names, attribute keys and headers that agentbolt writes and reads: all of them.

Model calls follow the OpenTelemetry GenAI conventions (``gen_ai.*``); everything
agentbolt adds lives under ``agentbolt.*``; the names other instrumentations write and
agentbolt reads (OpenInference's ``llm.*``, ``input.value``...; Agent Lightning v0.3's
``agentlightning.*``) are here too, so no module spells a span attribute itself.
``docs/semantic-conventions.md`` describes each with its type and an example.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentbolt.types import Span

# --- span names ------------------------------------------------------------------------
ROLLOUT_SPAN = "agentbolt.rollout"
"""Root span of one attempt; every other span of the attempt descends from it."""
MESSAGE_SPAN = "agentbolt.message"
OBJECT_SPAN = "agentbolt.object"
EXCEPTION_SPAN = "agentbolt.exception"
ANNOTATION_SPAN = "agentbolt.annotation"
OPERATION_SPAN = "agentbolt.operation"

# --- the root span and the emitters' spans ---------------------------------------------
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

# OpenTelemetry's instrumentation scope and resource, as attributes
SCOPE_NAME = "otel.scope.name"
"""Which instrumentation made the span (kept as an attribute: :class:`Span` has no field)."""
SCOPE_VERSION = "otel.scope.version"
OTEL_PREFIX = "otel."
SERVICE_NAME = "service.name"
"""Resource attribute: the program that made the span."""

# --- rewards ---------------------------------------------------------------------------
REWARD_SPAN = "agentbolt.reward"
"""Name of a reward span. A rollout may hold many; the last primary one counts."""
REWARD_VALUE = "agentbolt.reward.value"
"""The primary reward value (float)."""
REWARD_PRIMARY = "agentbolt.reward.primary"
"""Name of the primary reward (``"reward"`` unless the emitter chose another)."""
REWARD_PREFIX = "agentbolt.rewards."
"""Each named reward: ``agentbolt.rewards.<name> = value``."""

# --- judges (agentbolt.rewards.judge) -------------------------------------------------
JUDGE_SPAN = "agentbolt.judge"
"""One call of an LLM judge about a rollout (a group judge's one call is recorded on every
rollout it scored). It is not a model call of the agent: it carries no
``agentbolt.llm.request``, so no adapter ever trains on it."""
JUDGE_KIND = "agentbolt.judge.kind"
"""``group`` (one call scores a GRPO group's rollouts against each other) or ``rubric``."""
JUDGE_NAME = "agentbolt.judge.name"
"""The reward name the judge writes (``judge`` unless chosen)."""
JUDGE_CLIENT = "agentbolt.judge.client"
"""Which endpoint answered, in words: ``openai <model> at <url>``, ``anthropic <model>``,
``engine <name>``, ``scripted``."""
JUDGE_MODEL = "agentbolt.judge.model"
JUDGE_REQUEST = "agentbolt.judge.request"
"""JSON: the messages sent to the judge."""
JUDGE_RESPONSE = "agentbolt.judge.response"
"""The judge's answer, as text."""
JUDGE_SCORE = "agentbolt.judge.score"
JUDGE_RATIONALE = "agentbolt.judge.rationale"
"""Why the judge gave this rollout its score (also on the reward span it wrote)."""
JUDGE_GROUP = "agentbolt.judge.group"
"""The ids of the rollouts judged in the same call (list of strings)."""
JUDGE_CALL_ID = "agentbolt.judge.call_id"
"""One id per judge call: the spans of one group call share it."""
JUDGE_ATTEMPTS = "agentbolt.judge.attempts"
"""How many calls it took (a malformed answer is asked again, up to the judge's ``retries``)."""

# --- tool calls (agentbolt.mcp) ---------------------------------------------------------
EXECUTE_TOOL = "execute_tool"
"""``gen_ai.operation.name`` of a tool call (OpenTelemetry GenAI); the span is named
``execute_tool <tool name>``."""
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
"""JSON: the arguments the tool was called with."""
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
"""JSON: what the tool returned (MCP: the text of its content blocks, its structured content)."""
GEN_AI_TOOL_DESCRIPTION = "gen_ai.tool.description"
MCP_METHOD = "mcp.method.name"
"""``tools/call`` (OpenTelemetry's MCP conventions)."""
MCP_SERVER = "agentbolt.mcp.server"
"""The MCP server's name, as it introduced itself."""
MCP_TRANSPORT = "agentbolt.mcp.transport"
"""``stdio`` or ``streamable-http``."""
MCP_IS_ERROR = "agentbolt.mcp.is_error"
"""True when the server answered the call with ``isError`` (the tool failed; the call did not)."""

# --- attribution -----------------------------------------------------------------------
ROLLOUT_ID = "agentbolt.rollout_id"
ATTEMPT_ID = "agentbolt.attempt_id"
SEQUENCE_ID = "agentbolt.sequence_id"


def reward_span_attributes(rewards: dict[str, float], primary: str) -> dict[str, Any]:
    """Attributes of a reward span carrying ``rewards`` with ``primary`` as the main one."""
    if primary not in rewards:
        raise ValueError(f"primary reward {primary!r} is not among the rewards {sorted(rewards)}")
    attrs: dict[str, Any] = {REWARD_PREFIX + name: float(v) for name, v in rewards.items()}
    attrs[REWARD_PRIMARY] = primary
    attrs[REWARD_VALUE] = float(rewards[primary])
    return attrs


# --- Agent Lightning v0.3's names (read, so v0.3 code keeps working) -----------------
AGL_REWARD_VALUE = "agentlightning.reward.0.value"
"""The primary reward as Agent Lightning v0.3's emitters write it (on any span): read too,
so spans from v0.3 code (``add_otel_span``, OTLP) count as rewards."""


AGL_MESSAGE_BODY = "agentlightning.message.body"
AGL_OBJECT_JSON = "agentlightning.object.json"
AGL_OBJECT_LITERAL = "agentlightning.object.literal"


def primary_reward(name: str, attributes: dict[str, Any]) -> float | None:
    """The primary reward a span carries, or None if it is not a (valid) reward span."""
    if name != REWARD_SPAN:
        value = attributes.get(AGL_REWARD_VALUE)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return float(value)
    value = attributes.get(REWARD_VALUE)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


# --- output ----------------------------------------------------------------------------
OUTPUT_SPAN = "agentbolt.output"
"""The agent's return value when it is not a reward (its answer, a dict...): one span per
attempt that returned something else than a number or None."""
OUTPUT_JSON = "agentbolt.output.json"
"""The output as JSON (objects JSON cannot hold are kept as their ``repr`` string)."""
OUTPUT_TYPE = "agentbolt.output.type"
"""The Python type of the output (``str``, ``dict``, ``myapp.Answer``)."""
ATTEMPT_OUTPUT = "output"
"""Key of the output in the metadata of the attempt that produced it (JSON values), so
tables of rollouts show it without reading spans."""


def output_of(spans: Iterable[Span]) -> tuple[bool, Any]:
    """``(found, value)``: the output recorded among ``spans`` (the last one), decoded."""
    import orjson

    for span in reversed(list(spans)):
        if span.name == OUTPUT_SPAN:
            raw = span.attributes.get(OUTPUT_JSON)
            if not isinstance(raw, str):
                return True, raw
            try:
                return True, orjson.loads(raw)
            except orjson.JSONDecodeError:
                return True, raw
    return False, None


# --- sandbox ---------------------------------------------------------------------------
SANDBOX_SPAN = "agentbolt.sandbox"
"""Something a harness sandbox blocked (a refused connection, a denied path or request, a
limit that stopped a process): one span per kind of event of an attempt."""
SANDBOX_KIND = "agentbolt.sandbox.kind"
"""``network.unreachable``, ``network.refused``, ``network.denied``, ``path.denied``,
``limit.processes``, ``limit.memory``, ``limit.cpu``, ``limit.wall_time``,
``limit.file_size``, ``limit.tmp_size`` or ``limit.output``."""
SANDBOX_DETAIL = "agentbolt.sandbox.detail"
"""What happened, in words (the first occurrence)."""
SANDBOX_COUNT = "agentbolt.sandbox.count"
"""How many times it happened in the attempt."""


def sandbox_event_counts(spans: Iterable[Span]) -> dict[str, int]:
    """``{kind: count}`` of the sandbox events among ``spans``."""
    counts: dict[str, int] = {}
    for span in spans:
        if span.name != SANDBOX_SPAN:
            continue
        attrs = span.attributes
        kind = str(attrs.get(SANDBOX_KIND, "unknown"))
        count = attrs.get(SANDBOX_COUNT, 1)
        counts[kind] = counts.get(kind, 0) + (int(count) if isinstance(count, (int, float)) else 1)
    return counts


# --- model calls: OpenTelemetry GenAI --------------------------------------------------
GEN_AI_OPERATION = "gen_ai.operation.name"
"""``chat`` or ``text_completion`` for a model call (``execute_tool``, ``invoke_agent``...
on other GenAI spans)."""
GEN_AI_SYSTEM = "gen_ai.system"
GEN_AI_PROVIDER = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_REQUEST_PREFIX = "gen_ai.request."
"""``gen_ai.request.temperature`` / ``.top_p`` / ``.max_tokens``."""
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
"""The agent of an OpenTelemetry GenAI agent span (a framework's name for it)."""
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
CHAT = "chat"
TEXT_COMPLETION = "text_completion"

# --- model calls: what agentbolt adds --------------------------------------------------
LLM_PREFIX = "agentbolt.llm."
"""Every attribute agentbolt adds to a model-call span starts with it."""
LLM_REQUEST = "agentbolt.llm.request"
"""JSON: the request, chat-completions shaped (a Responses API request gets ``messages``)."""
LLM_RESPONSE = "agentbolt.llm.response"
"""JSON: the response as received (streams: reassembled), less the token ids, which are
in the two attributes below (stored once)."""
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


def records_model_call(attributes: Mapping[str, Any]) -> bool:
    """Whether a span with these attributes is a model call: it has :data:`LLM_REQUEST`
    and is not a framework's wrapper of a client call (:data:`LLM_WRAPPER`)."""
    return LLM_REQUEST in attributes and not attributes.get(LLM_WRAPPER)


# written by the gateway only
GATEWAY_SCOPE = "agentbolt.gateway"
"""``otel.scope.name`` of the spans the gateway records."""
GATEWAY_SERVICE = "agentbolt-gateway"
"""``service.name`` of the gateway spans' resource."""
LLM_ENGINE = "agentbolt.llm.engine"
LLM_ENGINE_REPLICA = "agentbolt.llm.engine_replica"
LLM_LATENCY_MS = "agentbolt.llm.latency_ms"
LLM_STREAMED = "agentbolt.llm.streamed"
LLM_RETRIES = "agentbolt.llm.retries"
HTTP_STATUS = "http.response.status_code"
LLM_PROMPT_SOURCE = "agentbolt.llm.prompt_source"
"""How the gateway built a token-id prompt (:mod:`agentbolt.engines.token_chat`):
``token_exact`` (earlier prompt + sampled ids + new turns), ``rerendered`` (the fallback)
or ``fresh`` (nothing earlier to reuse)."""
LLM_RESPONSE_API_ID = "agentbolt.llm.response_api_id"
"""The Responses API id of the call (``resp_…``)."""
LLM_PREVIOUS_RESPONSE_ID = "agentbolt.llm.previous_response_id"
"""The ``previous_response_id`` the call continued."""
LLM_CONVERSATION_START = "agentbolt.llm.conversation_start"
"""Where the conversation starts in the recorded messages (1 after an ``instructions``
system message, which a later call does not inherit)."""
LLM_API = "agentbolt.llm.api"
"""The API the agent called when the gateway translated it (``responses``, ``messages``:
Anthropic's Messages API)."""
LLM_DROPPED_TOOLS = "agentbolt.llm.dropped_tools"
"""The tools of the request the engine cannot run and the gateway left out of the prompt
(hosted/server tools such as ``web_search``), as a list of their type (and name) strings."""
LLM_MESSAGE_ID = "agentbolt.llm.message_id"
"""The Anthropic Messages API id of the call's answer (``msg_…``)."""

# --- model calls: what other instrumentations write (read) -----------------------------
OI_SPAN_KIND = "openinference.span.kind"
"""OpenInference's span kind: ``LLM`` for a model call, ``TOOL``, ``AGENT``, ``CHAIN``..."""
OI_INPUT = "input.value"
OI_INPUT_MIME = "input.mime_type"
OI_OUTPUT = "output.value"
OI_OUTPUT_MIME = "output.mime_type"
OI_INVOCATION_PARAMETERS = "llm.invocation_parameters"
OI_MODEL_NAME = "llm.model_name"
OI_SYSTEM = "llm.system"
OI_PROVIDER = "llm.provider"
OI_PROMPT_TOKENS = "llm.token_count.prompt"
OI_COMPLETION_TOKENS = "llm.token_count.completion"
OI_INPUT_MESSAGES = "llm.input_messages."
OI_OUTPUT_MESSAGES = "llm.output_messages."
OI_PROMPTS = "llm.prompts"
OI_CHOICES = "llm.choices."
OI_TOOLS = "llm.tools."
OI_OPENAI_SCOPE = "openinference.instrumentation.openai"
OI_AGENT_NAME = "agent.name"
OI_GRAPH_NODE = "graph.node.name"
OI_GRAPH_NODE_ID = "graph.node.id"
"""The node of the agent graph a span belongs to: CrewAI's instrumentor writes the agent's
role here, AutoGen AgentChat's and the OpenAI Agents SDK's the agent's name."""
OI_SMOLAGENTS_SCOPE = "openinference.instrumentation.smolagents"
"""``otel.scope.name`` of smolagents' instrumentor, which names an agent only in the name of
its run span: ``<agent name>.run`` (the agent's class name when it has none)."""
OI_TOOL_NAME = "tool.name"
LANGCHAIN_METADATA = "metadata"
"""LangChain's run metadata (JSON); LangGraph puts the node that made a call in it."""

# --- HTTP headers of model calls to the gateway ---------------------------------------
AGENT_HEADER = "x-agentbolt-agent"
"""Names the agent making a model call (percent-encoded); recorded as :data:`AGENT_NAME`
on the gateway's span (:mod:`agentbolt.gateway.origin`, :mod:`agentbolt.tracing.propagation`)."""
TRACEPARENT_HEADER = "traceparent"
"""W3C Trace Context: the caller's span becomes the parent of the gateway's span."""
