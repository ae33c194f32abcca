"""An ASGI app answering exactly like vLLM's OpenAI server asked for token ids.

Recorded format (vLLM >= 0.10.2, ``"return_token_ids": true``):

* non-streaming chat: top-level ``prompt_token_ids``; ``choices[i].token_ids``;
  ``choices[i].logprobs.content[j]`` = ``{token, logprob, bytes, top_logprobs}``;
  ``choices[i].stop_reason``; ``prompt_logprobs: null``; ``kv_transfer_params: null``.
* streaming chat: the first chunk has ``prompt_token_ids`` and an empty-content delta;
  each content chunk has ``choices[i].token_ids`` with that chunk's new ids; a final
  ``usage`` chunk when ``stream_options.include_usage``.
* errors: ``{"error": {"message", "type", "param", "code"}}`` with the HTTP status.

Only what the gateway reads is modelled; the content is fixed.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

PROMPT_IDS = [1, 9690, 198, 2683, 314, 216, 28, 1241, 2]
TOKENS = [("Four", 30124, -0.11), (".", 30, -0.02), ("", 2, -0.001)]
seen: list[dict[str, Any]] = []


def _logprob(token: str, lp: float) -> dict[str, Any]:
    return {"token": token, "logprob": lp, "bytes": list(token.encode()), "top_logprobs": []}


async def chat(request: Request) -> Any:
    body = await request.json()
    seen.append(body)
    if body.get("max_tokens", 1) <= 0:
        return JSONResponse(
            {
                "error": {
                    "message": "max_tokens must be at least 1, got 0.",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                }
            },
            status_code=400,
        )
    want_ids = bool(body.get("return_token_ids"))
    want_lp = bool(body.get("logprobs"))
    if body.get("stream"):
        return StreamingResponse(_stream(body, want_ids, want_lp), media_type="text/event-stream")
    choice: dict[str, Any] = {
        "index": 0,
        "message": {
            "role": "assistant",
            "content": "Four.",
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
            "tool_calls": [],
            "reasoning_content": None,
        },
        "logprobs": {"content": [_logprob(t, lp) for t, _, lp in TOKENS]} if want_lp else None,
        "finish_reason": "stop",
        "stop_reason": None,
        "token_ids": [i for _, i, _ in TOKENS] if want_ids else None,
    }
    return JSONResponse(
        {
            "id": "chatcmpl-3b1c",
            "object": "chat.completion",
            "created": 1760000000,
            "model": body["model"],
            "choices": [choice],
            "service_tier": None,
            "system_fingerprint": None,
            "usage": {
                "prompt_tokens": len(PROMPT_IDS),
                "total_tokens": len(PROMPT_IDS) + 3,
                "completion_tokens": 3,
                "prompt_tokens_details": None,
            },
            "prompt_logprobs": None,
            "prompt_token_ids": PROMPT_IDS if want_ids else None,
            "kv_transfer_params": None,
        }
    )


async def _stream(body: dict[str, Any], want_ids: bool, want_lp: bool) -> Any:
    base = {"id": "chatcmpl-3b1c", "object": "chat.completion.chunk", "created": 1760000000, "model": body["model"]}
    first: dict[str, Any] = {
        **base,
        "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        ],
    }
    if want_ids:
        first["prompt_token_ids"] = PROMPT_IDS
    yield f"data: {json.dumps(first)}\n\n"
    for n, (t, i, lp) in enumerate(TOKENS):
        last = n == len(TOKENS) - 1
        choice: dict[str, Any] = {
            "index": 0,
            "delta": {"content": t},
            "logprobs": {"content": [_logprob(t, lp)]} if want_lp else None,
            "finish_reason": "stop" if last else None,
            "stop_reason": None,
        }
        if want_ids:
            choice["token_ids"] = [i]
        yield f"data: {json.dumps({**base, 'choices': [choice]})}\n\n"
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": len(PROMPT_IDS), "total_tokens": len(PROMPT_IDS) + 3, "completion_tokens": 3}
        yield f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"


async def models(request: Request) -> JSONResponse:
    return JSONResponse(
        {
            "object": "list",
            "data": [
                {"id": "Qwen/Qwen2.5-0.5B-Instruct", "object": "model", "owned_by": "vllm", "max_model_len": 32768}
            ],
        }
    )


app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/models", models)])
