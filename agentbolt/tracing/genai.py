"""Normalise third-party model-call spans to the GenAI shape agentbolt reads.

Instrumentations describe a model call in their own words. OpenInference, which
agentbolt uses, puts the client's raw request and response JSON in ``input.value`` /
``output.value`` (openai, litellm) or flattens messages into ``llm.input_messages.*`` /
``llm.output_messages.*`` (LangChain). This module reads either back into an OpenAI
request and response and has :func:`agentbolt.call_attributes.call_attributes` write
the span's attributes, as the gateway does for the calls it proxies (the gateway needs
none of this: it has the request and response as they are).

A span already in GenAI form (an OpenTelemetry GenAI instrumentation) is kept as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from agentbolt import semconv
from agentbolt.call_attributes import SECRET_KEYS, call_attributes, dumps
from agentbolt.responses_chat import tool_call

__all__ = ["NormalisedCall", "normalise_model_call", "without_payload", "is_llm_span"]

_REPLACED_PREFIXES = (
    semconv.OI_INPUT_MESSAGES,
    semconv.OI_OUTPUT_MESSAGES,
    semconv.OI_PROMPTS + ".",
    semconv.OI_CHOICES,
    semconv.OI_TOOLS,
)
_REPLACED_KEYS = (semconv.OI_INPUT, semconv.OI_INPUT_MIME, semconv.OI_OUTPUT, semconv.OI_OUTPUT_MIME)
_RAW_OBJECTS = ("chat.completion", "text_completion")


@dataclass
class NormalisedCall:
    """A third-party model-call span after normalisation: its new name and attributes.

    ``raw`` tells whether it came from the client's own request/response JSON (the
    innermost, most exact record of a call) or from a framework's description of it.
    """

    name: str
    attributes: dict[str, Any]
    raw: bool


def is_llm_span(attributes: Mapping[str, Any]) -> bool:
    """Whether an instrumentation marked this span as a model call."""
    if attributes.get(semconv.OI_SPAN_KIND) == "LLM":
        return True
    return attributes.get(semconv.GEN_AI_OPERATION) in (semconv.CHAT, semconv.TEXT_COMPLETION)


def normalise_model_call(attributes: Mapping[str, Any]) -> NormalisedCall | None:
    """The normalised form of a model-call span, or None if the span is not one."""
    if not is_llm_span(attributes):
        return None
    if attributes.get(semconv.OI_SPAN_KIND) != "LLM":
        # already in GenAI form (e.g. an OpenTelemetry GenAI instrumentation): keep it
        out = dict(attributes)
        out.setdefault(semconv.LLM_TOKEN_IDS_SOURCE, "none")
        op = str(out[semconv.GEN_AI_OPERATION])
        model = out.get(semconv.GEN_AI_REQUEST_MODEL) or out.get(semconv.GEN_AI_RESPONSE_MODEL)
        return NormalisedCall(name=f"{op} {model}" if model else op, attributes=out, raw=False)
    params = _loads(attributes.get(semconv.OI_INVOCATION_PARAMETERS))
    params = params if isinstance(params, dict) else {}
    response_json = attributes.get(semconv.OI_OUTPUT)
    response = _loads(response_json)
    raw_request = _trusted_request(attributes, params, response) or _raw_request(attributes, params)
    if raw_request is not None and (response is None or (isinstance(response, dict) and _is_raw_response(response))):
        # the client's own JSON; no response when the call failed
        request, request_json = raw_request
        return _normalise(attributes, params, request, response or {}, raw=True,
                          request_json=request_json, response_json=response_json)
    return _normalise(
        attributes, params, _flattened_request(attributes, params), _flattened_response(attributes), raw=False
    )


def without_payload(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes less the instrumentation's copies of the request and response
    (``input.value``, ``llm.input_messages.*``...), which the normalised
    ``agentbolt.llm.request`` / ``agentbolt.llm.response`` replace."""
    return {k: v for k, v in attributes.items() if not (k in _REPLACED_KEYS or k.startswith(_REPLACED_PREFIXES))}


def _normalise(
    attributes: Mapping[str, Any],
    params: dict[str, Any],
    request: dict[str, Any],
    response: dict[str, Any],
    *,
    raw: bool,
    request_json: Any = None,
    response_json: Any = None,
) -> NormalisedCall:
    """The instrumentation's attributes less its payload, plus the GenAI ones."""
    system = str(attributes.get(semconv.OI_SYSTEM) or attributes.get(semconv.OI_PROVIDER) or "openai")
    model = attributes.get(semconv.OI_MODEL_NAME)
    name, call = call_attributes(
        request,
        response,
        system=system,
        provider=str(attributes.get(semconv.OI_PROVIDER) or system),
        model=str(model) if model else None,
        params=params,
        usage=(attributes.get(semconv.OI_PROMPT_TOKENS), attributes.get(semconv.OI_COMPLETION_TOKENS)),
        request_json=request_json if isinstance(request_json, str) else None,
        response_json=response_json if isinstance(response_json, str) else None,
    )
    out = without_payload(attributes)
    if SECRET_KEYS & params.keys():
        out[semconv.OI_INVOCATION_PARAMETERS] = dumps({k: v for k, v in params.items() if k not in SECRET_KEYS})
    out.update(call)
    return NormalisedCall(name=name, attributes=out, raw=raw)


# ----------------------------------------------------------------------------- raw JSON
def _raw_request(attributes: Mapping[str, Any], params: Mapping[str, Any]) -> tuple[dict[str, Any], str | None] | None:
    """The client's request (and its JSON text when usable as is), or None if
    ``input.value`` is not an OpenAI request."""
    text = attributes.get(semconv.OI_INPUT)
    req = _loads(text)
    if not isinstance(req, dict) or not ({"messages", "prompt", "input"} & req.keys()):
        return None
    messages = req.get("messages")
    if messages is not None and not (isinstance(messages, list) and all(isinstance(m, dict) for m in messages)):
        return None  # not OpenAI's shape (LangChain nests lists of its own message objects)
    if "model" in req and not (SECRET_KEYS & req.keys()):
        return req, text
    # litellm keeps only the messages in input.value; the rest is in the parameters
    merged = {k: v for k, v in params.items() if k not in ("messages", "prompt", "input") and k not in SECRET_KEYS}
    merged.update((k, v) for k, v in req.items() if k not in SECRET_KEYS)
    return merged, None


def _trusted_request(
    attributes: Mapping[str, Any], params: Mapping[str, Any], response: Any
) -> tuple[dict[str, Any], str] | None:
    """The openai client's chat/completions request without parsing it again: its
    parameters are in ``llm.invocation_parameters``, its JSON text is kept as it is
    (prompts are the largest part of a span: this saves a parse)."""
    text = attributes.get(semconv.OI_INPUT)
    if (
        attributes.get(semconv.SCOPE_NAME) != semconv.OI_OPENAI_SCOPE
        or not isinstance(text, str)
        or not text.startswith("{")
        or "model" not in params
        or not isinstance(response, dict)
        or response.get("object") not in _RAW_OBJECTS
    ):
        return None
    return dict(params), text


def _is_raw_response(response: Mapping[str, Any]) -> bool:
    return "choices" in response or response.get("object") in (*_RAW_OBJECTS, "response")


# ----------------------------------------------------------------------------- flattened
_CONNECTION_KEYS = frozenset({"api_base", "base_url"})
"""Client settings a framework lists among its call's parameters (DSPy's ``dspy.LM``):
where the request went, not part of it."""


def _flattened_request(attributes: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    # a parameter left unset (None, as DSPy lists them) is not sent
    request: dict[str, Any] = {
        k: v for k, v in params.items() if k not in SECRET_KEYS and k not in _CONNECTION_KEYS and v is not None
    }
    if attributes.get(semconv.OI_MODEL_NAME) and "model" not in request:
        request["model"] = attributes[semconv.OI_MODEL_NAME]
    messages = [_message(m.get("message", {})) for m in _unflatten(attributes, semconv.OI_INPUT_MESSAGES)]
    prompts = _flattened_prompts(attributes)
    if messages or not prompts:
        request["messages"] = messages
    else:
        request["prompt"] = prompts[0] if len(prompts) == 1 else prompts
    tools = []
    for t in _unflatten(attributes, semconv.OI_TOOLS):
        schema = _loads(t.get("tool", {}).get("json_schema"))
        if isinstance(schema, dict):
            tools.append(schema)
    if tools:
        request["tools"] = tools
    return request


def _flattened_prompts(attributes: Mapping[str, Any]) -> list[str]:
    value = attributes.get(semconv.OI_PROMPTS)
    if isinstance(value, list):
        return [str(p) for p in value]
    return [
        str(p.get("prompt", {}).get("text", p)) if isinstance(p, dict) else str(p)
        for p in _unflatten(attributes, semconv.OI_PROMPTS + ".")
    ]


def _flattened_response(attributes: Mapping[str, Any]) -> dict[str, Any]:
    choices = []
    for i, m in enumerate(_unflatten(attributes, semconv.OI_OUTPUT_MESSAGES)):
        message = _message(m.get("message", {}))
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        choices.append({"index": i, "message": message, "finish_reason": finish})
    response: dict[str, Any] = {"choices": choices}
    if attributes.get(semconv.OI_MODEL_NAME):
        response["model"] = attributes[semconv.OI_MODEL_NAME]
    return response


def _message(m: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI chat message from OpenInference's flattened ``message.*`` fields."""
    out: dict[str, Any] = {"role": m.get("role", "user")}
    content = m.get("content")
    if content is None and isinstance(m.get("contents"), list):
        content = "".join(
            str(c.get("message_content", {}).get("text", "")) for c in m["contents"] if isinstance(c, dict)
        )
    out["content"] = content
    if m.get("name"):
        out["name"] = m["name"]
    if m.get("tool_call_id"):
        out["tool_call_id"] = m["tool_call_id"]
    calls = [c.get("tool_call", {}) for c in m.get("tool_calls") or [] if isinstance(c, dict)]
    if calls:
        out["tool_calls"] = [
            tool_call(c.get("id"), c.get("function", {}).get("name"), c.get("function", {}).get("arguments"))
            for c in calls
        ]
    return out


def _unflatten(attributes: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.0.a.b = v`` style keys as a list of nested dicts (numbered levels become lists)."""
    root: dict[Any, Any] = {}
    for key, value in attributes.items():
        if not key.startswith(prefix):
            continue
        node = root
        parts = [int(p) if p.isdigit() else p for p in key[len(prefix) :].split(".")]
        for part in parts[:-1]:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = node[part] = {}
            node = nxt
        node[parts[-1]] = value
    listed = _listify(root)
    return [x for x in listed if isinstance(x, dict)] if isinstance(listed, list) else []


def _listify(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if node and all(isinstance(k, int) for k in node):
        return [_listify(node[k]) for k in sorted(node)]
    return {k: _listify(v) for k, v in node.items()}


# ----------------------------------------------------------------------------- values
def _loads(value: Any) -> Any:
    if not isinstance(value, str) or not value or value[0] not in "{[":
        return None
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
