"""The attributes of a model-call span, written once from the call's OpenAI request and response.

Both recorders of model calls write them here: the gateway from its call record (the
request it forwarded and the answer it got, as dicts: one JSON dump each, no parse) and
:mod:`agentbolt.tracing.genai` from a client library's span, once it has read the
request and response out of it. So a call looks the same whoever recorded it, and
adapters read one shape (``docs/semantic-conventions.md``):

* name ``chat {model}`` or ``text_completion {model}``;
* ``gen_ai.operation.name``, ``gen_ai.system``, ``gen_ai.provider.name``,
  ``gen_ai.request.*``, ``gen_ai.response.*``, ``gen_ai.usage.*``;
* ``agentbolt.llm.request`` / ``agentbolt.llm.response``: JSON, chat-completions shaped
  (a Responses API call gets ``messages`` / ``choices`` beside its own fields);
* ``agentbolt.llm.prompt_token_ids``, ``agentbolt.llm.response_token_ids``,
  ``agentbolt.llm.response_logprobs`` and ``agentbolt.llm.token_ids_source``.

Token ids are only ever copied from the response (vLLM's ``prompt_token_ids`` and
``choices[0].token_ids``); nothing is retokenized. Without them the source is ``"none"``.
They are stored once: the prompt's ids (top-level, or choice 0's) and choice 0's answer
ids are moved out of ``agentbolt.llm.response`` into their attributes, which is where
every reader takes them from. So are choice 0's chosen-token logprobs: its ``logprobs``
object (token strings, bytes, alternatives) leaves the response once its logprobs are in
``agentbolt.llm.response_logprobs`` — unless the request asked for alternatives (chat
``top_logprobs`` ≥ 1, completions ``logprobs`` ≥ 2), which only that object holds. Only
the record changes: what the client was sent keeps them all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

from agentbolt import semconv
from agentbolt.responses_chat import input_messages, instruction_messages, output_message

__all__ = ["SECRET_KEYS", "call_attributes", "dumps"]

SECRET_KEYS = frozenset({"api_key", "azure_ad_token", "aws_secret_access_key", "headers", "extra_headers"})
"""Request keys that are never recorded."""
_SAMPLING = (
    ("temperature", ("temperature",)),
    ("top_p", ("top_p",)),
    ("max_tokens", ("max_tokens", "max_completion_tokens", "max_output_tokens")),
)


def call_attributes(
    request: Mapping[str, Any],
    response: Mapping[str, Any] | None,
    *,
    system: str,
    provider: str | None = None,
    model: str | None = None,
    params: Mapping[str, Any] | None = None,
    usage: tuple[Any, Any] = (None, None),
    request_json: str | None = None,
    response_json: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """``(span name, attributes)`` of the call that sent ``request`` and got ``response``
    (None or ``{}`` when it failed).

    ``model``, ``params`` (the client's invocation parameters) and ``usage`` (prompt and
    completion token counts) fill in what the request and response do not say.
    ``request_json`` / ``response_json`` are their JSON texts when the caller has them:
    reused as they are when nothing had to change (saves a dump).
    """
    params = params or {}
    response = response or {}
    if SECRET_KEYS & request.keys():
        request = {k: v for k, v in request.items() if k not in SECRET_KEYS}
        request_json = None
    if "input" in request and "messages" not in request:  # the Responses API: read as chat too (responses_chat)
        messages = instruction_messages(request.get("instructions")) + input_messages(request["input"])
        request = {**request, "messages": messages}
        request_json = None
    if "output" in response and "choices" not in response:
        response = {**response, "choices": [_responses_choice(response)]}
        response_json = None
    op = semconv.TEXT_COMPLETION if _is_completion(request, response) else semconv.CHAT
    req_model = request.get("model") or params.get("model") or model
    resp_model = response.get("model") or model or req_model

    out: dict[str, Any] = {
        semconv.GEN_AI_OPERATION: op,
        semconv.GEN_AI_SYSTEM: system,
        semconv.GEN_AI_PROVIDER: provider or system,
    }
    if req_model:
        out[semconv.GEN_AI_REQUEST_MODEL] = str(req_model)
    if resp_model:
        out[semconv.GEN_AI_RESPONSE_MODEL] = str(resp_model)
    for key, names in _SAMPLING:
        value = next((src[n] for src in (request, params) for n in names if _is_number(src.get(n))), None)
        if value is not None:
            out[semconv.GEN_AI_REQUEST_PREFIX + key] = value
    if response.get("id"):
        out[semconv.GEN_AI_RESPONSE_ID] = str(response["id"])
    choices = [c for c in response.get("choices") or [] if isinstance(c, dict)]
    finish = [str(c["finish_reason"]) for c in choices if c.get("finish_reason")]
    if finish:
        out[semconv.GEN_AI_FINISH_REASONS] = finish
    inp, outp = _usage(response, usage)
    if inp is not None:
        out[semconv.GEN_AI_INPUT_TOKENS] = inp
    if outp is not None:
        out[semconv.GEN_AI_OUTPUT_TOKENS] = outp

    first = choices[0] if choices else {}
    top_ids = _int_list(response.get("prompt_token_ids"))
    choice_ids = _int_list(first.get("prompt_token_ids"))
    prompt_ids = top_ids if top_ids is not None else choice_ids
    response_ids = _int_list(first.get("token_ids"))
    logprobs = _logprobs(first.get("logprobs"))
    stored = _without_attributes(response, first, top=top_ids is not None,
                                 in_choice=choice_ids is not None and choice_ids == prompt_ids,
                                 answer=response_ids is not None,
                                 logprobs=logprobs is not None and not _asks_alternatives(request))
    if stored is not response:
        response_json = None
    out[semconv.LLM_REQUEST] = request_json if isinstance(request_json, str) else dumps(request)
    out[semconv.LLM_RESPONSE] = response_json if isinstance(response_json, str) and response else dumps(stored)
    if prompt_ids is not None:
        out[semconv.LLM_PROMPT_TOKEN_IDS] = prompt_ids
    if response_ids is not None:
        out[semconv.LLM_RESPONSE_TOKEN_IDS] = response_ids
    if logprobs is not None:
        out[semconv.LLM_RESPONSE_LOGPROBS] = logprobs
    out[semconv.LLM_TOKEN_IDS_SOURCE] = "engine" if response_ids is not None else "none"
    name = f"{op} {req_model or resp_model}" if (req_model or resp_model) else op
    return name, out


def dumps(value: Any) -> str:
    """JSON text of an attribute value (objects JSON cannot hold become strings)."""
    return orjson.dumps(value, default=str).decode()


# ----------------------------------------------------------------------------- stored once
def _without_attributes(
    response: Mapping[str, Any], first: Mapping[str, Any], *, top: bool, in_choice: bool, answer: bool,
    logprobs: bool,
) -> Mapping[str, Any]:
    """The response less what the span keeps as attributes (``response`` itself when there
    is nothing to drop): the prompt's top-level token ids (``top``), choice 0's prompt ids
    (``in_choice``), answer ids (``answer``) and ``logprobs`` object (``logprobs``)."""
    drop_choice = [k for k, keep in (("prompt_token_ids", in_choice), ("token_ids", answer), ("logprobs", logprobs))
                   if keep]
    if not top and not drop_choice:
        return response
    out = {k: v for k, v in response.items() if not (top and k == "prompt_token_ids")}
    if drop_choice:
        out["choices"] = [
            {k: v for k, v in c.items() if k not in drop_choice} if c is first else c for c in response["choices"]
        ]
    return out


def _asks_alternatives(request: Mapping[str, Any]) -> bool:
    """Whether the request asked for more than the chosen tokens' logprobs: chat
    ``top_logprobs`` ≥ 1, completions ``logprobs`` ≥ 2 (the gateway itself asks for 1)."""
    top, n = request.get("top_logprobs"), request.get("logprobs")
    return (type(top) is int and top >= 1) or (type(n) is int and n >= 2)


# ----------------------------------------------------------------------------- reading
def _is_completion(request: Mapping[str, Any], response: Mapping[str, Any]) -> bool:
    if response.get("object") == semconv.TEXT_COMPLETION:
        return True
    return "prompt" in request and "messages" not in request and "input" not in request


def _usage(response: Mapping[str, Any], fallback: tuple[Any, Any]) -> tuple[int | None, int | None]:
    usage = response.get("usage")
    inp = outp = None
    if isinstance(usage, dict):
        inp = usage.get("prompt_tokens", usage.get("input_tokens"))
        outp = usage.get("completion_tokens", usage.get("output_tokens"))
    if not isinstance(inp, int):
        inp = fallback[0]
    if not isinstance(outp, int):
        outp = fallback[1]
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


def _int_list(value: Any) -> list[int] | None:
    if not isinstance(value, list) or not set(map(type, value)) <= {int}:
        return None
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _responses_choice(response: Mapping[str, Any]) -> dict[str, Any]:
    """The chat choice of a Responses API answer: its output as one assistant message, and
    the finish reason its status says (``incomplete`` at the token limit: ``length``)."""
    message = output_message(response.get("output"))
    details = response.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    if message.get("tool_calls"):
        finish: str | None = "tool_calls"
    elif response.get("status") == "completed":
        finish = "stop"
    elif response.get("status") == "incomplete":
        finish = "length" if reason == "max_output_tokens" else "content_filter" if reason == "content_filter" else None
    else:
        finish = None
    return {"index": 0, "message": message, "finish_reason": finish}
