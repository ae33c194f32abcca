"""An ASGI app answering exactly like vLLM's OpenAI server asked for token ids.

Recorded format (vLLM >= 0.10.2, ``"return_token_ids": true``):

* non-streaming chat: top-level ``prompt_token_ids``; ``choices[i].token_ids``;
  ``choices[i].logprobs.content[j]`` = ``{token, logprob, bytes, top_logprobs}``;
  ``choices[i].stop_reason``; ``prompt_logprobs: null``; ``kv_transfer_params: null``.
* streaming chat: the first chunk has ``prompt_token_ids`` and an empty-content delta;
  each content chunk has ``choices[i].token_ids`` with that chunk's new ids; a final
  ``usage`` chunk when ``stream_options.include_usage``.
* errors: ``{"error": {"message", "type", "param", "code"}}`` with the HTTP status;
  a call for a model that is neither the base model nor a loaded adapter is a 404.
* runtime LoRA (``--enable-lora``, ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``):
  ``POST /v1/load_lora_adapter {"lora_name", "lora_path"}`` answers 200 with a text
  message (400 for a name already loaded, 404 for a path without an adapter);
  ``POST /v1/unload_lora_adapter {"lora_name"}`` (404 for an unknown name). Loaded
  adapters are listed by ``/v1/models``.

Only what the gateway reads is modelled; the content is fixed. :class:`FakeVLLM` makes
one server (its own adapters and call log); the module's ``app`` / ``seen`` are a default one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route

BASE_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
PROMPT_IDS = [1, 9690, 198, 2683, 314, 216, 28, 1241, 2]
TOKENS = [("Four", 30124, -0.11), (".", 30, -0.02), ("", 2, -0.001)]


def _logprob(token: str, lp: float) -> dict[str, Any]:
    return {"token": token, "logprob": lp, "bytes": list(token.encode()), "top_logprobs": []}


def _error(status: int, message: str, type_: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": type_, "param": None, "code": status}}, status_code=status)


class FakeVLLM:
    """One fake vLLM server: ``seen`` chat bodies, ``lora_calls`` (route, body), ``adapters``."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.lora_calls: list[tuple[str, dict[str, Any]]] = []
        self.adapters: dict[str, str] = {}  # lora name -> path
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/models", self.models),
                Route("/v1/load_lora_adapter", self.load_lora, methods=["POST"]),
                Route("/v1/unload_lora_adapter", self.unload_lora, methods=["POST"]),
            ]
        )

    async def chat(self, request: Request) -> Any:
        body = await request.json()
        self.seen.append(body)
        if body.get("model") not in (BASE_MODEL, *self.adapters):
            return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        return await chat(body)

    async def models(self, request: Request) -> JSONResponse:
        data = [{"id": BASE_MODEL, "object": "model", "owned_by": "vllm", "max_model_len": 32768}]
        data += [{"id": n, "object": "model", "owned_by": "vllm", "root": p, "parent": BASE_MODEL}
                 for n, p in self.adapters.items()]
        return JSONResponse({"object": "list", "data": data})

    async def load_lora(self, request: Request) -> Any:
        body = await request.json()
        self.lora_calls.append(("load", body))
        name, path = body.get("lora_name"), body.get("lora_path")
        if not name or not path:
            return _error(400, "Both 'lora_name' and 'lora_path' must be provided.", "InvalidUserInput")
        if name in self.adapters:
            return _error(400, f"The lora adapter '{name}' has already been loaded.", "InvalidUserInput")
        if not (Path(path) / "adapter_config.json").is_file():
            return _error(404, f"No adapter found for {path}", "NotFoundError")
        self.adapters[name] = path
        return PlainTextResponse(f"Success: LoRA adapter '{name}' added successfully.")

    async def unload_lora(self, request: Request) -> Any:
        body = await request.json()
        self.lora_calls.append(("unload", body))
        name = body.get("lora_name")
        if name not in self.adapters:
            return _error(404, f"The lora adapter '{name}' cannot be found.", "NotFoundError")
        del self.adapters[name]
        return PlainTextResponse(f"Success: LoRA adapter '{name}' removed successfully.")


async def chat(body: dict[str, Any]) -> Any:
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


_default = FakeVLLM()
app = _default.app
seen = _default.seen
