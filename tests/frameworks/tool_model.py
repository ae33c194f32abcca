"""The model server of the tracer path: what an agent calls when it talks to a model
directly (no gateway). A real HTTP server on 127.0.0.1 that answers the matrix's
question the way the gateway path's scripted model does — a call of the ``add`` tool
with ``{"a": 2, "b": 3}``, then, once the conversation holds the tool's result, "The
answer is 5." — on both APIs the frameworks use:

* ``POST /v1/chat/completions`` (``stream`` too, tool calls as deltas), with token ids
  and logprobs like vLLM's server (``prompt_token_ids``, ``choices[0].token_ids``) when
  not streamed;
* ``POST /v1/responses`` (``stream`` too; with ``previous_response_id`` the input holds
  the ``function_call_output``, which is all the answer depends on).

It decides from the request alone (no state between calls), so concurrent rollouts
cannot disturb each other, and it counts the calls it answered: the calls a tracer
must have recorded, once each.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from agentbolt.server.testing import serve_app_in_thread

__all__ = ["ANSWER", "ARGUMENTS", "ToolModel", "serve_tool_model"]

ANSWER = "The answer is 5."
ARGUMENTS = json.dumps({"a": 2, "b": 3})


@dataclass
class ToolModel:
    """The server's base URL (with ``/v1``) and the calls it answered, by API."""

    url: str = ""
    calls: list[str] = field(default_factory=list)


def _answered(items: list[Any], result_type: str) -> bool:
    """Whether the conversation already holds a tool's result (the call's answer is final)."""
    return any(isinstance(i, dict) and (i.get("role") == "tool" or i.get("type") == result_type) for i in items)


def _ids(value: Any) -> list[int]:
    """Token ids as a vLLM server returns them (one per byte of the JSON: the tracer
    copies them, it never tokenizes)."""
    return list(json.dumps(value).encode())


def _chat(body: dict[str, Any], n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": ANSWER}
    finish = "stop"
    if not _answered(body.get("messages") or [], "function_call_output"):
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"call_{n}", "type": "function", "function": {"name": "add", "arguments": ARGUMENTS}}
            ],
        }
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1,
        "model": body.get("model", "policy"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish,
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
        delta["tool_calls"] = [{"index": 0, **call} for call in message["tool_calls"]]
    yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}
    if include_usage:
        yield {**base, "choices": [], "usage": answer["usage"]}


def _response(body: dict[str, Any], n: int) -> dict[str, Any]:
    items = body.get("input")
    if _answered(items if isinstance(items, list) else [], "function_call_output"):
        output: dict[str, Any] = {
            "type": "message",
            "id": f"msg_{n}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": ANSWER, "annotations": []}],
        }
    else:
        output = {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_{n}",
            "name": "add",
            "arguments": ARGUMENTS,
            "status": "completed",
        }
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": body.get("model", "policy"),
        "output": [output],
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


def _response_events(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    item = response["output"][0]
    started = {**response, "status": "in_progress", "output": []}
    yield {"type": "response.created", "response": started}
    yield {"type": "response.output_item.added", "output_index": 0, "item": item}
    if item["type"] == "message":
        yield {
            "type": "response.output_text.delta",
            "item_id": item["id"],
            "output_index": 0,
            "content_index": 0,
            "delta": ANSWER,
            "logprobs": [],
        }
        yield {
            "type": "response.output_text.done",
            "item_id": item["id"],
            "output_index": 0,
            "content_index": 0,
            "text": ANSWER,
            "logprobs": [],
        }
    else:
        yield {
            "type": "response.function_call_arguments.delta",
            "item_id": item["id"],
            "output_index": 0,
            "delta": ARGUMENTS,
        }
        yield {
            "type": "response.function_call_arguments.done",
            "item_id": item["id"],
            "output_index": 0,
            "arguments": ARGUMENTS,
            "name": item["name"],
        }
    yield {"type": "response.output_item.done", "output_index": 0, "item": item}
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


def tool_model_app(model: ToolModel) -> FastAPI:
    app = FastAPI(title="the framework matrix's tool model")
    counter = itertools.count(1)

    async def answer(request: Request, api: str) -> Any:
        body = await request.json()
        model.calls.append(api)
        if api == "chat":
            answer = _chat(body, next(counter))
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events, done = _chat_chunks(answer, usage), True
        else:
            answer = _response(body, next(counter))
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
def serve_tool_model() -> Iterator[ToolModel]:
    """Serve the tool model on a free port; yields it (``.url``, ``.calls``)."""
    model = ToolModel()
    with serve_app_in_thread(tool_model_app(model)) as url:
        model.url = f"{url}/v1"
        yield model
