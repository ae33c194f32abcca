"""The model server of the tracer path: what an agent calls when it talks to a model
directly (no gateway). A real HTTP server on 127.0.0.1 that answers with a framework's
scripted replies (:attr:`frameworks.registry.Framework.replies`, the same the gateway
path's scripted engine writes) on both APIs the frameworks use:

* ``POST /v1/chat/completions`` (``stream`` too, tool calls as deltas), with token ids
  and logprobs like vLLM's server (``prompt_token_ids``, ``choices[0].token_ids``) when
  not streamed;
* ``POST /v1/responses`` (``stream`` too, and ``previous_response_id``).

A reply's hermes ``<tool_call>`` blocks become API tool calls (what the gateway's parser
makes of them); any other reply is text. Which reply answers a call depends on the
conversation alone: the n-th once it holds n tool results — ``tool`` messages,
``function_call_output`` items, or a ReAct framework's results written as text (a line
``Observation:``, DSPy's ``[[ ## observation_N ## ]]`` fields) — counting, for a
Responses call that continues ``previous_response_id``, the results before it (carried
in the response id). No state between calls, so concurrent rollouts cannot disturb each
other; it counts the calls it answered: the calls a tracer must have recorded, once each.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from agentbolt.engines.tools.hermes import HermesParser
from agentbolt.server.testing import serve_app_in_thread

__all__ = ["ToolModel", "serve_tool_model"]

_TEXT_RESULT = re.compile(r"^Observation:|\[\[ ## observation_\d+ ## \]\]", re.MULTILINE)
_RESULTS_BEFORE = re.compile(r"^resp_\d+_(\d+)$")


@dataclass
class ToolModel:
    """The server's base URL (with ``/v1``) and the calls it answered, by API."""

    url: str = ""
    calls: list[str] = field(default_factory=list)


def _text(content: Any) -> str:
    """A message's text (a string, or the text of its parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(part.get("text")) for part in content if isinstance(part, dict))
    return ""


def _results(items: Sequence[Any]) -> int:
    """How many tool results a conversation (chat messages or Responses input items) holds."""
    count = 0
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("role") == "tool" or item.get("type") == "function_call_output":
            count += 1
        elif item.get("role") == "user":
            count += len(_TEXT_RESULT.findall(_text(item.get("content"))))
    return count


def _reply(replies: Sequence[str], results: int) -> tuple[str | None, list[dict[str, str]]]:
    """The reply once the conversation holds ``results`` tool results (the last one repeats):
    its text and its tool calls (name, arguments)."""
    parsed = HermesParser().parse(replies[min(results, len(replies) - 1)])
    return parsed.content, [{"name": c.name, "arguments": c.arguments} for c in parsed.calls]


def _ids(value: Any) -> list[int]:
    """Token ids as a vLLM server returns them (one per byte of the JSON: the tracer
    copies them, it never tokenizes)."""
    return list(json.dumps(value).encode())


def _chat(body: dict[str, Any], n: int, replies: Sequence[str]) -> dict[str, Any]:
    content, calls = _reply(replies, _results(body.get("messages") or []))
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{n}_{i}", "type": "function", "function": call} for i, call in enumerate(calls)
        ]
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1,
        "model": body.get("model", "policy"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
                "token_ids": _ids(message),
                "logprobs": {
                    "content": [
                        {"token": chr(t), "logprob": -0.5, "bytes": [t], "top_logprobs": []} for t in _ids(message)
                    ]
                },
            }
        ],
        "prompt_token_ids": _ids(body.get("messages")),
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _chat_chunks(answer: dict[str, Any], include_usage: bool) -> Iterator[dict[str, Any]]:
    base = {k: answer[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice = answer["choices"][0]
    message = choice["message"]
    delta: dict[str, Any] = {"role": "assistant", "content": message["content"]}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
    yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}
    if include_usage:
        yield {**base, "choices": [], "usage": answer["usage"]}


def _response(body: dict[str, Any], n: int, replies: Sequence[str]) -> dict[str, Any]:
    items = body.get("input")
    before = _RESULTS_BEFORE.match(str(body.get("previous_response_id")))
    results = (int(before.group(1)) if before else 0) + _results(items if isinstance(items, list) else [])
    content, calls = _reply(replies, results)
    output: list[dict[str, Any]] = [
        {
            "type": "function_call",
            "id": f"fc_{n}_{i}",
            "call_id": f"call_{n}_{i}",
            **call,
            "status": "completed",
        }
        for i, call in enumerate(calls)
    ]
    if content or not calls:
        text = {"type": "output_text", "text": content or "", "annotations": []}
        message = {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed", "content": [text]}
        output.insert(0, message)
    return {
        "id": f"resp_{n}_{results}",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": body.get("model", "policy"),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "instructions": body.get("instructions"),
        "previous_response_id": body.get("previous_response_id"),
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _item_events(index: int, item: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield {"type": "response.output_item.added", "output_index": index, "item": item}
    where = {"item_id": item["id"], "output_index": index}
    if item["type"] == "message":
        text = item["content"][0]["text"]
        where = {**where, "content_index": 0}
        yield {"type": "response.output_text.delta", **where, "delta": text, "logprobs": []}
        yield {"type": "response.output_text.done", **where, "text": text, "logprobs": []}
    else:
        yield {"type": "response.function_call_arguments.delta", **where, "delta": item["arguments"]}
        yield {
            "type": "response.function_call_arguments.done",
            **where,
            "arguments": item["arguments"],
            "name": item["name"],
        }
    yield {"type": "response.output_item.done", "output_index": index, "item": item}


def _response_events(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield {"type": "response.created", "response": {**response, "status": "in_progress", "output": []}}
    for index, item in enumerate(response["output"]):
        yield from _item_events(index, item)
    yield {"type": "response.completed", "response": response}


def _sse(events: Iterator[dict[str, Any]], *, done: bool) -> StreamingResponse:
    def lines() -> Iterator[bytes]:
        for i, event in enumerate(events):
            if "type" in event and "sequence_number" not in event:
                event = {**event, "sequence_number": i}
            yield f"data: {json.dumps(event)}\n\n".encode()
        if done:
            yield b"data: [DONE]\n\n"

    return StreamingResponse(lines(), media_type="text/event-stream")


def tool_model_app(model: ToolModel, replies: Sequence[str]) -> FastAPI:
    app = FastAPI(title="the framework matrix's tool model")
    counter = itertools.count(1)

    async def answer(request: Request, api: str) -> Any:
        body = await request.json()
        model.calls.append(api)
        if api == "chat":
            answer = _chat(body, next(counter), replies)
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events, done = _chat_chunks(answer, usage), True
        else:
            answer = _response(body, next(counter), replies)
            events, done = _response_events(answer), False
        return _sse(events, done=done) if body.get("stream") else JSONResponse(answer)

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        return await answer(request, "chat")

    @app.post("/v1/responses")
    async def responses(request: Request) -> Any:
        return await answer(request, "responses")

    @app.get("/v1/models")
    async def models() -> Any:
        return {"object": "list", "data": [{"id": "policy", "object": "model", "owned_by": "agentbolt"}]}

    return app


@contextmanager
def serve_tool_model(replies: Sequence[str]) -> Iterator[ToolModel]:
    """Serve the tool model with a framework's scripted replies on a free port; yields it
    (``.url``, ``.calls``)."""
    model = ToolModel()
    with serve_app_in_thread(tool_model_app(model, replies)) as url:
        model.url = f"{url}/v1"
        yield model
