"""Normalise model-call spans to the OpenTelemetry GenAI conventions plus ``agentbolt.llm.*``.

Instrumentations describe a model call in their own words. OpenInference, which
agentbolt uses, puts the client's raw request and response JSON in ``input.value`` /
``output.value`` (openai, litellm) or flattens messages into ``llm.input_messages.*`` /
``llm.output_messages.*`` (LangChain). This module reads either and writes one shape
that adapters rely on (see ``docs/semantic-conventions.md``):

* name ``chat {model}`` or ``text_completion {model}``, kind ``client``;
* ``gen_ai.operation.name``, ``gen_ai.system``, ``gen_ai.provider.name``,
  ``gen_ai.request.*``, ``gen_ai.response.*``, ``gen_ai.usage.*``;
* ``agentbolt.llm.request`` / ``agentbolt.llm.response`` (JSON, chat-completions shaped),
  ``agentbolt.llm.prompt_token_ids``, ``agentbolt.llm.response_token_ids``,
  ``agentbolt.llm.response_logprobs`` and ``agentbolt.llm.token_ids_source``.

Token ids are only ever copied from the response (vLLM's ``prompt_token_ids`` and
``choices[i].token_ids``); nothing is retokenized. Without them the source is ``"none"``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from agentbolt.tracing.names import (
    LLM_PROMPT_TOKEN_IDS,
    LLM_REQUEST,
    LLM_RESPONSE,
    LLM_RESPONSE_LOGPROBS,
    LLM_RESPONSE_TOKEN_IDS,
    LLM_TOKEN_IDS_SOURCE,
)

__all__ = ["ModelCall", "normalise_model_call", "without_payload", "is_llm_span", "CHAT", "TEXT_COMPLETION"]

CHAT = "chat"
TEXT_COMPLETION = "text_completion"

_OI_KIND = "openinference.span.kind"
_SCOPE = "otel.scope.name"
_OPENAI_SCOPE = "openinference.instrumentation.openai"
_SECRET_KEYS = frozenset({"api_key", "azure_ad_token", "aws_secret_access_key", "headers", "extra_headers"})
_REPLACED_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "llm.prompts.", "llm.choices.", "llm.tools.")
_REPLACED_KEYS = ("input.value", "input.mime_type", "output.value", "output.mime_type")


@dataclass
class ModelCall:
    """A model-call span after normalisation.

    ``raw`` tells whether it came from the client's own request/response JSON (the
    innermost, most exact record of a call) or from a framework's description of it.
    """

    name: str
    attributes: dict[str, Any]
    raw: bool


def is_llm_span(attributes: Mapping[str, Any]) -> bool:
    """Whether an instrumentation marked this span as a model call."""
    if attributes.get(_OI_KIND) == "LLM":
        return True
    return attributes.get("gen_ai.operation.name") in (CHAT, TEXT_COMPLETION)


def normalise_model_call(attributes: Mapping[str, Any]) -> ModelCall | None:
    """The normalised form of a model-call span, or None if the span is not one."""
    if not is_llm_span(attributes):
        return None
    if attributes.get(_OI_KIND) != "LLM":
        # already in GenAI form (e.g. an OpenTelemetry GenAI instrumentation): keep it
        out = dict(attributes)
        out.setdefault(LLM_TOKEN_IDS_SOURCE, "none")
        op = str(out["gen_ai.operation.name"])
        model = out.get("gen_ai.request.model") or out.get("gen_ai.response.model")
        return ModelCall(name=f"{op} {model}" if model else op, attributes=out, raw=False)
    params = _loads(attributes.get("llm.invocation_parameters"))
    params = params if isinstance(params, dict) else {}
    response_json = attributes.get("output.value")
    response = _loads(response_json)
    raw_request = _trusted_request(attributes, params, response) or _raw_request(attributes, params)
    if raw_request is not None and (response is None or (isinstance(response, dict) and _is_raw_response(response))):
        # the client's own JSON; no response when the call failed
        request, request_json = raw_request
        return _normalise(
            attributes,
            params,
            request,
            response or {},
            raw=True,
            request_json=request_json,
            response_json=response_json,
        )
    return _normalise(
        attributes, params, _flattened_request(attributes, params), _flattened_response(attributes), raw=False
    )


def without_payload(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes less the instrumentation's copies of the request and response
    (``input.value``, ``llm.input_messages.*``...), which the normalised
    ``agentbolt.llm.request`` / ``agentbolt.llm.response`` replace."""
    return {k: v for k, v in attributes.items() if not (k in _REPLACED_KEYS or k.startswith(_REPLACED_PREFIXES))}


# ----------------------------------------------------------------------------- building
def _normalise(
    attributes: Mapping[str, Any],
    params: dict[str, Any],
    request: dict[str, Any],
    response: dict[str, Any],
    *,
    raw: bool,
    request_json: Any = None,
    response_json: Any = None,
) -> ModelCall:
    """Build the normalised attributes. ``request_json`` / ``response_json`` are the
    original JSON texts, reused as they are when nothing had to change (saves a dump)."""
    if "input" in request and "messages" not in request:
        request = {**request, "messages": _responses_messages(request)}
        request_json = None
    if "output" in response and "choices" not in response:
        response = {**response, "choices": _responses_choices(response)}
        response_json = None
    op = TEXT_COMPLETION if _is_completion(request, response) else CHAT
    req_model = request.get("model") or params.get("model") or attributes.get("llm.model_name")
    resp_model = response.get("model") or attributes.get("llm.model_name") or req_model
    system = str(attributes.get("llm.system") or attributes.get("llm.provider") or "openai")

    out = without_payload(attributes)
    if _SECRET_KEYS & params.keys():
        out["llm.invocation_parameters"] = _dumps({k: v for k, v in params.items() if k not in _SECRET_KEYS})
    out["gen_ai.operation.name"] = op
    out["gen_ai.system"] = system
    out["gen_ai.provider.name"] = str(attributes.get("llm.provider") or system)
    if req_model:
        out["gen_ai.request.model"] = str(req_model)
    if resp_model:
        out["gen_ai.response.model"] = str(resp_model)
    for key, names in (
        ("temperature", ("temperature",)),
        ("top_p", ("top_p",)),
        ("max_tokens", ("max_tokens", "max_completion_tokens", "max_output_tokens")),
    ):
        value = next((src[n] for src in (request, params) for n in names if _is_number(src.get(n))), None)
        if value is not None:
            out[f"gen_ai.request.{key}"] = value
    if response.get("id"):
        out["gen_ai.response.id"] = str(response["id"])
    choices = [c for c in response.get("choices") or [] if isinstance(c, dict)]
    finish = [str(c["finish_reason"]) for c in choices if c.get("finish_reason")]
    if finish:
        out["gen_ai.response.finish_reasons"] = finish
    inp, outp = _usage(response, attributes)
    if inp is not None:
        out["gen_ai.usage.input_tokens"] = inp
    if outp is not None:
        out["gen_ai.usage.output_tokens"] = outp

    out[LLM_REQUEST] = request_json if isinstance(request_json, str) else _dumps(request)
    out[LLM_RESPONSE] = response_json if isinstance(response_json, str) and response else _dumps(response)
    prompt_ids = _int_list(response.get("prompt_token_ids"))
    first = choices[0] if choices else {}
    if prompt_ids is None:
        prompt_ids = _int_list(first.get("prompt_token_ids"))
    response_ids = _int_list(first.get("token_ids"))
    if prompt_ids is not None:
        out[LLM_PROMPT_TOKEN_IDS] = prompt_ids
    if response_ids is not None:
        out[LLM_RESPONSE_TOKEN_IDS] = response_ids
    logprobs = _logprobs(first.get("logprobs"))
    if logprobs is not None:
        out[LLM_RESPONSE_LOGPROBS] = logprobs
    out[LLM_TOKEN_IDS_SOURCE] = "engine" if response_ids is not None else "none"
    name = f"{op} {req_model or resp_model}" if (req_model or resp_model) else op
    return ModelCall(name=name, attributes=out, raw=raw)


def _is_completion(request: Mapping[str, Any], response: Mapping[str, Any]) -> bool:
    if response.get("object") == "text_completion":
        return True
    return "prompt" in request and "messages" not in request and "input" not in request


def _usage(response: Mapping[str, Any], attributes: Mapping[str, Any]) -> tuple[int | None, int | None]:
    usage = response.get("usage")
    inp = outp = None
    if isinstance(usage, dict):
        inp = usage.get("prompt_tokens", usage.get("input_tokens"))
        outp = usage.get("completion_tokens", usage.get("output_tokens"))
    if not isinstance(inp, int):
        inp = attributes.get("llm.token_count.prompt")
    if not isinstance(outp, int):
        outp = attributes.get("llm.token_count.completion")
    return (inp if isinstance(inp, int) else None, outp if isinstance(outp, int) else None)


def _logprobs(value: Any) -> list[float] | None:
    """Chosen-token logprobs: chat ``content[j].logprob`` or completions ``token_logprobs``."""
    if not isinstance(value, dict):
        return None
    content = value.get("content")
    try:
        if isinstance(content, list):
            out = [c["logprob"] for c in content]
        elif isinstance(value.get("token_logprobs"), list):
            out = list(value["token_logprobs"])
        else:
            return None
    except (KeyError, TypeError):
        return None
    if not set(map(type, out)) <= {float, int} or not math.isfinite(sum(out)):
        return None  # a missing or non-finite logprob: keep none rather than wrong ones
    return [float(x) for x in out]


# ----------------------------------------------------------------------------- raw JSON
def _raw_request(attributes: Mapping[str, Any], params: Mapping[str, Any]) -> tuple[dict[str, Any], str | None] | None:
    """The client's request (and its JSON text when usable as is), or None if
    ``input.value`` is not an OpenAI request."""
    text = attributes.get("input.value")
    req = _loads(text)
    if not isinstance(req, dict) or not ({"messages", "prompt", "input"} & req.keys()):
        return None
    messages = req.get("messages")
    if messages is not None and not (isinstance(messages, list) and all(isinstance(m, dict) for m in messages)):
        return None  # not OpenAI's shape (LangChain nests lists of its own message objects)
    if "model" in req and not (_SECRET_KEYS & req.keys()):
        return req, text
    # litellm keeps only the messages in input.value; the rest is in the parameters
    merged = {k: v for k, v in params.items() if k not in ("messages", "prompt", "input") and k not in _SECRET_KEYS}
    merged.update((k, v) for k, v in req.items() if k not in _SECRET_KEYS)
    return merged, None


def _trusted_request(
    attributes: Mapping[str, Any], params: Mapping[str, Any], response: Any
) -> tuple[dict[str, Any], str] | None:
    """The openai client's chat/completions request without parsing it again: its
    parameters are in ``llm.invocation_parameters``, its JSON text is kept as it is
    (prompts are the largest part of a span: this saves a parse)."""
    text = attributes.get("input.value")
    if (
        attributes.get(_SCOPE) != _OPENAI_SCOPE
        or not isinstance(text, str)
        or not text.startswith("{")
        or "model" not in params
        or not isinstance(response, dict)
        or response.get("object") not in ("chat.completion", "text_completion")
    ):
        return None
    return dict(params), text


def _is_raw_response(response: Mapping[str, Any]) -> bool:
    return "choices" in response or response.get("object") in ("chat.completion", "text_completion", "response")


def _responses_messages(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Chat messages equivalent to a Responses API request's ``instructions`` + ``input``."""
    messages: list[dict[str, Any]] = []
    if isinstance(request.get("instructions"), str):
        messages.append({"role": "system", "content": request["instructions"]})
    items = request.get("input")
    if isinstance(items, str):
        return [*messages, {"role": "user", "content": items}]
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": item.get("role", "user"), "content": _text_of(item.get("content"))})
        elif kind == "function_call":
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [_tool_call(item.get("call_id"), item.get("name"), item.get("arguments"))],
                }
            )
        elif kind == "function_call_output":
            messages.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": _text_of(item.get("output"))}
            )
    return messages


def _responses_choices(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A chat-completions ``choices`` list equivalent to a Responses API ``output``."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in response.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            texts.append(_text_of(item.get("content")))
        elif item.get("type") == "function_call":
            calls.append(_tool_call(item.get("call_id"), item.get("name"), item.get("arguments")))
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    finish = "tool_calls" if calls else ("stop" if response.get("status") == "completed" else None)
    return [{"index": 0, "message": message, "finish_reason": finish}]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return "" if content is None else str(content)


def _tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# ----------------------------------------------------------------------------- flattened
def _flattened_request(attributes: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    request: dict[str, Any] = {k: v for k, v in params.items() if k not in _SECRET_KEYS}
    if attributes.get("llm.model_name") and "model" not in request:
        request["model"] = attributes["llm.model_name"]
    messages = [_message(m.get("message", {})) for m in _unflatten(attributes, "llm.input_messages.")]
    prompts = _flattened_prompts(attributes)
    if messages or not prompts:
        request["messages"] = messages
    else:
        request["prompt"] = prompts[0] if len(prompts) == 1 else prompts
    tools = []
    for t in _unflatten(attributes, "llm.tools."):
        schema = _loads(t.get("tool", {}).get("json_schema"))
        if isinstance(schema, dict):
            tools.append(schema)
    if tools:
        request["tools"] = tools
    return request


def _flattened_prompts(attributes: Mapping[str, Any]) -> list[str]:
    value = attributes.get("llm.prompts")
    if isinstance(value, list):
        return [str(p) for p in value]
    return [
        str(p.get("prompt", {}).get("text", p)) if isinstance(p, dict) else str(p)
        for p in _unflatten(attributes, "llm.prompts.")
    ]


def _flattened_response(attributes: Mapping[str, Any]) -> dict[str, Any]:
    choices = []
    for i, m in enumerate(_unflatten(attributes, "llm.output_messages.")):
        message = _message(m.get("message", {}))
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        choices.append({"index": i, "message": message, "finish_reason": finish})
    response: dict[str, Any] = {"choices": choices}
    if attributes.get("llm.model_name"):
        response["model"] = attributes["llm.model_name"]
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
            _tool_call(c.get("id"), c.get("function", {}).get("name"), c.get("function", {}).get("arguments"))
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


def _dumps(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()


def _int_list(value: Any) -> list[int] | None:
    if not isinstance(value, list) or not set(map(type, value)) <= {int}:
        return None
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
