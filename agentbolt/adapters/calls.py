"""Model calls, read back from the spans of rollout attempts.

Every adapter starts here: :func:`extract_model_calls` finds the model-call spans
among an attempt's spans and parses them into :class:`ModelCall` objects — request,
response, token ids, logprobs, agent name — in the order the calls started.

**What counts as a model call.** A span that carries ``agentbolt.llm.request`` (see
``docs/semantic-conventions.md``). A framework's span that wraps a client call
(LangChain's ``ChatOpenAI``, LiteLLM's ``completion``) is marked
``agentbolt.llm.wrapper = true``, carries no request and is not a call: the client's
span inside it is, so every call counts once.

**Where the agent name comes from**, first found wins:

1. ``agentbolt.agent.name`` on the call's span — set by ``with agentbolt.agent("planner"):``
   around the call (or around the whole graph: an explicit name wins over the
   framework's);
2. a name the framework put on a span around the call — on the framework's wrapper
   span first, then on the call's ancestors and the wrapper's, nearest first:
   ``agentbolt.agent.name``, ``gen_ai.agent.name`` (OpenTelemetry GenAI agent spans),
   ``agent.name``, ``graph.node.name`` or ``graph.node.id`` (OpenInference; CrewAI's
   instrumentor writes the agent's role as ``graph.node.id``), the ``<name>.run`` name of
   a smolagents agent's span (its instrumentor writes the name nowhere else), or ``langgraph_node`` in
   the span's LangChain ``metadata`` (LangGraph: the node that made the call);
3. otherwise None — such a call never matches an ``agent_match`` pattern.

A call recorded by the **gateway** has ``agentbolt.agent.name`` when the call named its
agent — the ``X-Agentbolt-Agent`` header, which agentbolt's tracer adds with the name
found as above, or a ``<model>#<agent>`` model name (:mod:`agentbolt.gateway.origin`);
its W3C ``traceparent`` makes the caller's span its parent, so rule 2 applies to it too.
When the agent's client was traced as well, the two spans of the call are merged
(:func:`_without_duplicates`) and the client's name fills in a missing one.

**Twins** — one call recorded by the client and by the gateway — are found by the span
tree first: a gateway span whose parent is a client's model-call span is that call (the
client sent ``traceparent`` from its span), whatever each recorded, which matters when the
gateway rebuilt the history (the Responses API's ``previous_response_id``: the client
recorded one new message, the gateway the whole conversation). Calls the tree does not
pair (a client that sends no ``traceparent``) are paired by content: identical token ids,
or identical messages and answer text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Any

import orjson

from agentbolt import semconv
from agentbolt.semconv import (
    AGENT_NAME,
    GATEWAY_SCOPE,
    LLM_PROMPT_TOKEN_IDS,
    LLM_REQUEST,
    LLM_RESPONSE,
    LLM_RESPONSE_LOGPROBS,
    LLM_RESPONSE_TOKEN_IDS,
    LLM_TOKEN_IDS_SOURCE,
    LLM_WRAPPED_SPAN_IDS,
    LLM_WRAPPER,
)
from agentbolt.types import Span, SpanStatus

__all__ = ["ModelCall", "extract_model_calls", "group_by_attempt", "is_model_call", "span_order"]

FRAMEWORK_AGENT_ATTRIBUTES = (
    semconv.GEN_AI_AGENT_NAME, semconv.OI_AGENT_NAME, semconv.OI_GRAPH_NODE, semconv.OI_GRAPH_NODE_ID
)
"""Attributes in which frameworks and their instrumentations name the agent (or graph
node) a span belongs to, first found on a span wins."""
_METADATA_AGENT_KEYS = ("langgraph_node",)
"""Keys of LangChain's ``metadata`` (a JSON attribute) that name the agent: LangGraph's node."""
_SMOLAGENTS_RUN = ".run"
"""The end of a smolagents agent's run span's name, ``<agent name>.run``."""
_MAX_DEPTH = 256


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call of a rollout attempt, as recorded in its span.

    ``messages`` is the chat request's messages (None for a text completion, whose
    prompt is in ``prompt``); ``response_message`` is the assistant's message of choice
    0 (role, content, tool_calls) and ``response_text`` its text (a completion's
    ``text``). Token ids and logprobs are the engine's, or None when it returned none
    (``token_ids_source == "none"``): agentbolt never retokenizes. ``failed`` calls
    raised (status ``error``) and have no response.
    """

    span_id: str
    rollout_id: str
    attempt_id: str
    agent_name: str | None
    operation: str
    """``chat`` or ``text_completion`` (``gen_ai.operation.name``)."""
    model: str | None
    """The model that answered (``gen_ai.response.model``), else the one requested."""
    request: dict[str, Any]
    response: dict[str, Any]
    messages: list[dict[str, Any]] | None
    prompt: Any
    tools: list[dict[str, Any]]
    response_message: dict[str, Any] | None
    response_text: str | None
    tool_calls: list[dict[str, Any]]
    finish_reason: str | None
    prompt_token_ids: list[int] | None
    response_token_ids: list[int] | None
    response_logprobs: list[float] | None
    token_ids_source: str
    start_time: float
    end_time: float | None
    sequence_id: int | None = None
    failed: bool = False
    attributes: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """All attributes of the span, for anything not parsed above."""

    @property
    def has_token_ids(self) -> bool:
        """Whether the engine returned both the prompt's and the response's token ids."""
        return self.prompt_token_ids is not None and self.response_token_ids is not None

    @property
    def finished_at(self) -> float:
        """When the call returned (its start, if the span has no end)."""
        return self.end_time if self.end_time is not None else self.start_time


def is_model_call(span: Span) -> bool:
    """Whether ``span`` is a model call: it has ``agentbolt.llm.request`` and is not a
    framework's wrapper of a client call."""
    return semconv.records_model_call(span.attributes)


def span_order(span: Span) -> tuple[float, int]:
    """Sort key: start time, then the store's sequence number."""
    return (span.start_time, span.sequence_id if span.sequence_id is not None else 0)


def group_by_attempt(spans: Iterable[Span]) -> list[list[Span]]:
    """The spans split by attempt, attempts in order of first appearance."""
    groups: dict[tuple[str, str], list[Span]] = {}
    for span in spans:
        groups.setdefault((span.rollout_id, span.attempt_id), []).append(span)
    return list(groups.values())


def extract_model_calls(spans: Iterable[Span]) -> list[ModelCall]:
    """The model calls among ``spans`` — of one attempt or many — ordered by start time
    (then by the store's sequence number)."""
    out: list[ModelCall] = []
    for group in group_by_attempt(spans):
        names = _AgentNames(group)
        parents = {s.span_id: s.parent_id for s in group}
        calls = [_parse(span, names.of(span)) for span in group if is_model_call(span)]
        out.extend(_without_duplicates(calls, parents))
    out.sort(key=lambda c: (c.start_time, c.sequence_id if c.sequence_id is not None else 0))
    return out


def _without_duplicates(calls: list[ModelCall], parents: Mapping[str, str | None]) -> list[ModelCall]:
    """One call seen twice — by the gateway and by the agent's own instrumented client —
    is kept once, as the gateway's span (it carries the policy version), enriched with
    what only its twin knows: the agent name (when the gateway got none), the token ids
    and logprobs (when the gateway has none), and any attribute the gateway's span lacks.
    A client span is a twin when a gateway span of the attempt is its child (``parents``:
    span id → parent id; of several children, the last that answered), else when a
    gateway span has the same token ids, or (without ids) the same messages and answer text."""
    gateway = [i for i, c in enumerate(calls) if _by_gateway(c)]
    if not gateway or len(gateway) == len(calls):
        return calls
    twins = _twins_by_tree(calls, gateway, parents)
    dropped = set(twins.values())
    free = [(set(_identities(calls[i])), i) for i in gateway if i not in twins]
    for i, c in enumerate(calls):
        if i in dropped or _by_gateway(c):
            continue
        mine = set(_identities(c))
        found = next((k for k, (keys, _) in enumerate(free) if keys & mine), None)
        if found is not None:
            twins[free.pop(found)[1]] = i
            dropped.add(i)
    return [_merged(c, calls[twins[i]]) if i in twins else c for i, c in enumerate(calls) if i not in dropped]


def _twins_by_tree(calls: list[ModelCall], gateway: list[int], parents: Mapping[str, str | None]) -> dict[int, int]:
    """``{gateway call: client call}`` for the gateway spans whose parent is a client's
    model-call span (the ``traceparent`` it sent)."""
    clients = {c.span_id: i for i, c in enumerate(calls) if not _by_gateway(c)}
    children: dict[int, list[int]] = {}
    for g in gateway:
        parent = parents.get(calls[g].span_id)
        if parent is not None and parent in clients:
            children.setdefault(clients[parent], []).append(g)
    twins: dict[int, int] = {}
    for client, tries in children.items():  # a client that retried sent each try from its span
        answered = [g for g in tries if not calls[g].failed]
        twins[(answered or tries)[-1]] = client
    return twins


def _by_gateway(call: ModelCall) -> bool:
    return call.attributes.get(semconv.SCOPE_NAME) == GATEWAY_SCOPE


def _merged(gateway: ModelCall, client: ModelCall) -> ModelCall:
    """The gateway's call, with the gaps filled from the client's twin."""
    has_ids = gateway.has_token_ids
    return replace(
        gateway,
        agent_name=gateway.agent_name or client.agent_name,
        prompt_token_ids=gateway.prompt_token_ids if has_ids else client.prompt_token_ids,
        response_token_ids=gateway.response_token_ids if has_ids else client.response_token_ids,
        response_logprobs=gateway.response_logprobs
        if gateway.response_logprobs is not None
        else client.response_logprobs,
        token_ids_source=gateway.token_ids_source if has_ids else client.token_ids_source,
        attributes={**client.attributes, **gateway.attributes},
    )


def _identities(call: ModelCall) -> list[Any]:
    keys: list[Any] = []
    if call.prompt_token_ids is not None and call.response_token_ids is not None:
        keys.append(("ids", tuple(call.prompt_token_ids), tuple(call.response_token_ids)))
    keys.append(("text", orjson.dumps(call.messages if call.messages is not None else call.prompt,
                                      option=orjson.OPT_SORT_KEYS), call.response_text))
    return keys


# ----------------------------------------------------------------------------- agent names
class _AgentNames:
    """Finds the agent name of a call within one attempt's spans (see module doc)."""

    def __init__(self, spans: Sequence[Span]) -> None:
        self._by_id = {s.span_id: s for s in spans}
        self._wrappers: dict[str, list[Span]] = {}
        for s in spans:
            wrapped = s.attributes.get(LLM_WRAPPED_SPAN_IDS) if s.attributes.get(LLM_WRAPPER) else None
            for sid in wrapped if isinstance(wrapped, list) else ():
                self._wrappers.setdefault(str(sid), []).append(s)

    def of(self, call: Span) -> str | None:
        own = call.attributes.get(AGENT_NAME)
        if isinstance(own, str) and own:
            return own
        wrappers = self._wrappers.get(call.span_id, [])
        around = chain(wrappers, self._ancestors(call), (a for w in wrappers for a in self._ancestors(w)))
        for span in around:
            name = _named_by(span)
            if name:
                return name
        return None

    def _ancestors(self, span: Span) -> Iterable[Span]:
        seen = 0
        parent = self._by_id.get(span.parent_id) if span.parent_id else None
        while parent is not None and seen < _MAX_DEPTH:
            yield parent
            seen += 1
            parent = self._by_id.get(parent.parent_id) if parent.parent_id else None


def _named_by(span: Span) -> str | None:
    attrs = span.attributes
    for key in (AGENT_NAME, *FRAMEWORK_AGENT_ATTRIBUTES):
        value = attrs.get(key)
        if isinstance(value, str) and value:
            return value
    if attrs.get(semconv.SCOPE_NAME) == semconv.OI_SMOLAGENTS_SCOPE and span.name.endswith(_SMOLAGENTS_RUN):
        return span.name.removesuffix(_SMOLAGENTS_RUN) or None
    metadata = _json(attrs.get(semconv.LANGCHAIN_METADATA))
    if isinstance(metadata, dict):
        for key in _METADATA_AGENT_KEYS:
            value = metadata.get(key)
            if isinstance(value, str) and value:
                return value
    return None


# ----------------------------------------------------------------------------- parsing
def _parse(span: Span, agent_name: str | None) -> ModelCall:
    attrs = span.attributes
    request = _json(attrs.get(LLM_REQUEST))
    request = request if isinstance(request, dict) else {}
    response = _json(attrs.get(LLM_RESPONSE))
    response = response if isinstance(response, dict) else {}
    guessed = semconv.TEXT_COMPLETION if "prompt" in request else semconv.CHAT
    operation = str(attrs.get(semconv.GEN_AI_OPERATION) or guessed)
    messages = request.get("messages")
    choice = _first_choice(response)
    message = choice.get("message") if isinstance(choice.get("message"), dict) else None
    if message is not None:
        text = (
            message.get("content") if isinstance(message.get("content"), str) else _text_parts(message.get("content"))
        )
        tool_calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    else:
        text = choice.get("text") if isinstance(choice.get("text"), str) else None
        tool_calls = []
    model = attrs.get(semconv.GEN_AI_RESPONSE_MODEL) or response.get("model") or attrs.get(semconv.GEN_AI_REQUEST_MODEL)
    model = model or request.get("model")
    return ModelCall(
        span_id=span.span_id,
        rollout_id=span.rollout_id,
        attempt_id=span.attempt_id,
        agent_name=agent_name,
        operation=operation,
        model=str(model) if model else None,
        request=request,
        response=response,
        messages=[m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else None,
        prompt=request.get("prompt"),
        tools=[t for t in request.get("tools") or [] if isinstance(t, dict)],
        response_message=message,
        response_text=text,
        tool_calls=tool_calls,
        finish_reason=choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None,
        prompt_token_ids=_ints(attrs.get(LLM_PROMPT_TOKEN_IDS)),
        response_token_ids=_ints(attrs.get(LLM_RESPONSE_TOKEN_IDS)),
        response_logprobs=_floats(attrs.get(LLM_RESPONSE_LOGPROBS)),
        token_ids_source=str(attrs.get(LLM_TOKEN_IDS_SOURCE) or "none"),
        start_time=span.start_time,
        end_time=span.end_time,
        sequence_id=span.sequence_id,
        failed=span.status == SpanStatus.ERROR,
        attributes=attrs,
    )


def _first_choice(response: Mapping[str, Any]) -> dict[str, Any]:
    choices = response.get("choices")
    if isinstance(choices, list):
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                return choice
    return {}


def _text_parts(content: Any) -> str | None:
    if isinstance(content, list):
        texts = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "".join(texts) if texts else None
    return None


def _json(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return value
    if not isinstance(value, str) or not value:
        return None
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return None


def _ints(value: Any) -> list[int] | None:
    if isinstance(value, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return list(value)
    return None


def _floats(value: Any) -> list[float] | None:
    if isinstance(value, (list, tuple)) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
        return [float(x) for x in value]
    return None
