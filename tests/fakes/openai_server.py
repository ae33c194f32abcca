"""A tiny OpenAI-compatible server for tests: real HTTP on 127.0.0.1, deterministic answers.

::

    with serve_fake_openai() as base_url:          # "http://127.0.0.1:PORT/v1"
        client = openai.OpenAI(base_url=base_url, api_key="test")
        client.chat.completions.create(model="fake-model", messages=[...])
        base_url.requests                          # every request body it got

What it answers, always the same for the same request:

* ``POST /v1/chat/completions`` — ``"echo: <last user message>"``; if the request has
  ``tools`` and the last user message says "use the calculator", a call of the first
  tool with its first parameter set to the rest of the message; after a ``tool``
  message, ``"The tool returned <content>."``. ``stream: true`` sends SSE chunks (and a
  usage chunk with ``stream_options.include_usage``).
* ``POST /v1/completions`` — ``"echo: <prompt>"``, streaming too.
* ``POST /v1/responses`` — the Responses API, minimal (no streaming).
* ``GET /v1/models`` — one model, ``fake-model``.

Like vLLM, answers carry token ids — top-level ``prompt_token_ids`` and
``choices[i].token_ids`` — unless the request sets ``return_token_ids: false``, and
logprobs in OpenAI's format when asked (``logprobs: true`` for chat, ``logprobs: N``
for completions). The tokenizer is trivial: one token per UTF-8 byte (:func:`tokenize`);
a chat prompt is rendered by :func:`render_chat`. ``max_tokens`` truncates the answer
(``finish_reason: "length"``). No artificial latency.
"""

from __future__ import annotations

import codecs
import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

__all__ = [
    "FakeOpenAI",
    "RecordedRequest",
    "serve_fake_openai",
    "create_app",
    "tokenize",
    "render_chat",
    "chat_reply",
    "completion_reply",
    "token_logprob",
    "MODEL",
]

MODEL = "fake-model"
CHUNK_TOKENS = 4
"""Tokens per streamed chunk."""


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    body: Any


class FakeOpenAI(str):
    """The server's base URL (ending in ``/v1``) that also knows what the server got."""

    requests: list[RecordedRequest]

    def __new__(cls, url: str, requests: list[RecordedRequest]) -> FakeOpenAI:
        obj = super().__new__(cls, url)
        obj.requests = requests
        return obj

    def bodies(self, path: str) -> list[Any]:
        """The JSON bodies of the requests made to ``path`` (e.g. ``"/v1/chat/completions"``)."""
        return [r.body for r in list(self.requests) if r.path == path]


# ----------------------------------------------------------------------------- tokenizer
def tokenize(text: str) -> list[int]:
    """One token per UTF-8 byte: deterministic, reversible, no vocabulary to ship."""
    return list(text.encode("utf-8"))


def detokenize(ids: list[int]) -> str:
    return bytes(ids).decode("utf-8", "replace")


def token_logprob(token_id: int, position: int) -> float:
    """The (made-up, deterministic) logprob of the token at ``position`` of an answer."""
    return -round(0.01 * ((token_id + position) % 50 + 1), 4)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def render_chat(messages: list[dict[str, Any]]) -> str:
    """The prompt text of a chat: ``<|role|>content`` lines, then ``<|assistant|>``."""
    lines = []
    for m in messages:
        body = _text(m.get("content"))
        if m.get("tool_calls"):
            body += orjson.dumps(m["tool_calls"]).decode()
        lines.append(f"<|{m.get('role', 'user')}|>{body}\n")
    return "".join(lines) + "<|assistant|>"


# ----------------------------------------------------------------------------- answers
@dataclass
class _Answer:
    text: str | None
    tool_call: dict[str, Any] | None
    token_ids: list[int]
    finish_reason: str


def _last(messages: list[dict[str, Any]], role: str) -> dict[str, Any] | None:
    return next((m for m in reversed(messages) if m.get("role") == role), None)


def chat_reply(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> tuple[str | None, dict[str, Any] | None]:
    """``(text, tool_call)`` the server answers to a chat (one of the two is None)."""
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return f"The tool returned {_text(last.get('content'))}.", None
    user = _last(messages, "user")
    said = _text(user.get("content")) if user else ""
    marker = "use the calculator"
    if tools and marker in said.lower():
        fn = tools[0].get("function", tools[0])
        params = (fn.get("parameters") or {}).get("properties") or {}
        arg = next(iter(params), "input")
        rest = said[said.lower().index(marker) + len(marker) :].strip(" :,")
        call_id = "call_" + hashlib.sha1(said.encode()).hexdigest()[:12]
        arguments = orjson.dumps({arg: rest}).decode()
        return None, {"id": call_id, "type": "function", "function": {"name": fn.get("name"), "arguments": arguments}}
    return f"echo: {said}", None


def completion_reply(prompt: str) -> str:
    return f"echo: {prompt}"


def _limit(ids: list[int], body: dict[str, Any]) -> tuple[list[int], bool]:
    limit = body.get("max_completion_tokens") or body.get("max_tokens") or body.get("max_output_tokens")
    if isinstance(limit, int) and 0 < limit < len(ids):
        return ids[:limit], True
    return ids, False


def _chat_answer(body: dict[str, Any]) -> _Answer:
    messages = body.get("messages") or []
    text, call = chat_reply(messages, body.get("tools") if body.get("tool_choice") != "none" else None)
    if call is not None:
        ids = tokenize(
            orjson.dumps({"name": call["function"]["name"], "arguments": call["function"]["arguments"]}).decode()
        )
        return _Answer(None, call, ids, "tool_calls")
    ids, cut = _limit(tokenize(text or ""), body)
    return _Answer(detokenize(ids), None, ids, "length" if cut else "stop")


def _wants_ids(body: dict[str, Any]) -> bool:
    return body.get("return_token_ids", True) is not False


def _chat_logprobs(ids: list[int], offset: int, top: int) -> dict[str, Any]:
    content = []
    for i, tid in enumerate(ids, start=offset):
        tok = bytes([tid]).decode("latin-1")
        lp = token_logprob(tid, i)
        content.append(
            {
                "token": tok,
                "logprob": lp,
                "bytes": [tid],
                "top_logprobs": [{"token": tok, "logprob": lp, "bytes": [tid]}][:top],
            }
        )
    return {"content": content, "refusal": None}


def _completion_logprobs(ids: list[int], offset: int, text_offset: int) -> dict[str, Any]:
    tokens = [bytes([t]).decode("latin-1") for t in ids]
    lps = [token_logprob(t, i) for i, t in enumerate(ids, start=offset)]
    return {
        "tokens": tokens,
        "token_logprobs": lps,
        "top_logprobs": [{tok: lp} for tok, lp in zip(tokens, lps, strict=True)],
        "text_offset": [text_offset + i for i in range(len(ids))],
    }


def _usage(prompt_ids: list[int], ids: list[int]) -> dict[str, int]:
    return {"prompt_tokens": len(prompt_ids), "completion_tokens": len(ids), "total_tokens": len(prompt_ids) + len(ids)}


def _id(prefix: str, body: Any) -> str:
    return f"{prefix}-{hashlib.sha1(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]}"


# ----------------------------------------------------------------------------- chat
def _chat(body: dict[str, Any]) -> dict[str, Any]:
    prompt_ids = tokenize(render_chat(body.get("messages") or []))
    ans = _chat_answer(body)
    message: dict[str, Any] = {"role": "assistant", "content": ans.text}
    if ans.tool_call:
        message["tool_calls"] = [ans.tool_call]
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": ans.finish_reason, "logprobs": None}
    if body.get("logprobs"):
        choice["logprobs"] = _chat_logprobs(ans.token_ids, 0, int(body.get("top_logprobs") or 0))
    out: dict[str, Any] = {
        "id": _id("chatcmpl", body),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", MODEL),
        "choices": [choice],
        "usage": _usage(prompt_ids, ans.token_ids),
    }
    if _wants_ids(body):
        out["prompt_token_ids"] = prompt_ids
        choice["token_ids"] = ans.token_ids
    return out


def _chat_stream(body: dict[str, Any]) -> Iterator[bytes]:
    prompt_ids = tokenize(render_chat(body.get("messages") or []))
    ans = _chat_answer(body)
    base = {
        "id": _id("chatcmpl", body),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", MODEL),
    }
    ids_on = _wants_ids(body)
    first: dict[str, Any] = {
        **base,
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
    }
    if ids_on:
        first["prompt_token_ids"] = prompt_ids
    yield _sse(first)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    for pos in range(0, len(ans.token_ids), CHUNK_TOKENS):
        piece = ans.token_ids[pos : pos + CHUNK_TOKENS]
        text = decoder.decode(bytes(piece))
        if ans.tool_call is not None:
            call = ans.tool_call
            args = call["function"]["arguments"]
            # the tool call goes out whole in the first chunk, token ids spread over chunks
            tc: dict[str, Any] = {"index": 0, "function": {"arguments": args if pos == 0 else ""}}
            if pos == 0:
                tc.update(id=call["id"], type="function")
                tc["function"]["name"] = call["function"]["name"]
            delta: dict[str, Any] = {"tool_calls": [tc]}
        else:
            delta = {"content": text}
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
        if body.get("logprobs"):
            choice["logprobs"] = _chat_logprobs(piece, pos, int(body.get("top_logprobs") or 0))
        if ids_on:
            choice["token_ids"] = piece
        yield _sse({**base, "choices": [choice]})
    yield _sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": ans.finish_reason}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        yield _sse({**base, "choices": [], "usage": _usage(prompt_ids, ans.token_ids)})
    yield b"data: [DONE]\n\n"


# ----------------------------------------------------------------------------- completions
def _prompt_text(body: dict[str, Any]) -> str:
    prompt = body.get("prompt", "")
    if isinstance(prompt, list):
        if prompt and all(isinstance(p, int) for p in prompt):
            return detokenize(prompt)
        prompt = prompt[0] if prompt else ""
    return str(prompt)


def _completion(body: dict[str, Any]) -> dict[str, Any]:
    prompt = _prompt_text(body)
    prompt_ids = tokenize(prompt)
    ids, cut = _limit(tokenize(completion_reply(prompt)), body)
    choice: dict[str, Any] = {
        "index": 0,
        "text": detokenize(ids),
        "finish_reason": "length" if cut else "stop",
        "logprobs": None,
    }
    if body.get("logprobs") is not None and body.get("logprobs") is not False:
        choice["logprobs"] = _completion_logprobs(ids, 0, 0)
    out: dict[str, Any] = {
        "id": _id("cmpl", body),
        "object": "text_completion",
        "created": int(time.time()),
        "model": body.get("model", MODEL),
        "choices": [choice],
        "usage": _usage(prompt_ids, ids),
    }
    if _wants_ids(body):
        out["prompt_token_ids"] = prompt_ids
        choice["token_ids"] = ids
    return out


def _completion_stream(body: dict[str, Any]) -> Iterator[bytes]:
    prompt = _prompt_text(body)
    prompt_ids = tokenize(prompt)
    ids, cut = _limit(tokenize(completion_reply(prompt)), body)
    base = {
        "id": _id("cmpl", body),
        "object": "text_completion",
        "created": int(time.time()),
        "model": body.get("model", MODEL),
    }
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    for pos in range(0, len(ids), CHUNK_TOKENS):
        piece = ids[pos : pos + CHUNK_TOKENS]
        choice: dict[str, Any] = {
            "index": 0,
            "text": decoder.decode(bytes(piece)),
            "finish_reason": None,
            "logprobs": None,
        }
        if body.get("logprobs") is not None and body.get("logprobs") is not False:
            choice["logprobs"] = _completion_logprobs(piece, pos, pos)
        if _wants_ids(body):
            choice["token_ids"] = piece
        chunk: dict[str, Any] = {**base, "choices": [choice]}
        if pos == 0 and _wants_ids(body):
            chunk["prompt_token_ids"] = prompt_ids
        yield _sse(chunk)
    yield _sse(
        {**base, "choices": [{"index": 0, "text": "", "finish_reason": "length" if cut else "stop", "logprobs": None}]}
    )
    yield b"data: [DONE]\n\n"


# ----------------------------------------------------------------------------- responses
def _responses(body: dict[str, Any]) -> dict[str, Any]:
    items = body.get("input")
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    else:
        for item in items or []:
            if item.get("type", "message") == "message":
                messages.append({"role": item.get("role", "user"), "content": _text(item.get("content"))})
            elif item.get("type") == "function_call_output":
                messages.append({"role": "tool", "content": _text(item.get("output"))})
    tools = [{"function": t} for t in body.get("tools") or [] if t.get("type") == "function"]
    text, call = chat_reply(messages, tools)
    prompt_ids = tokenize(render_chat(messages))
    rid = _id("resp", body)
    if call is not None:
        output = [
            {
                "type": "function_call",
                "id": "fc_" + call["id"][5:],
                "call_id": call["id"],
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
                "status": "completed",
            }
        ]
        n_out = len(tokenize(call["function"]["arguments"]))
    else:
        output = [
            {
                "type": "message",
                "id": "msg_" + rid[5:],
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ]
        n_out = len(tokenize(text or ""))
    return {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "model": body.get("model", MODEL),
        "status": "completed",
        "output": output,
        "instructions": body.get("instructions"),
        "parallel_tool_calls": True,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "error": None,
        "incomplete_details": None,
        "metadata": {},
        "usage": {
            "input_tokens": len(prompt_ids),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": n_out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": len(prompt_ids) + n_out,
        },
    }


# ----------------------------------------------------------------------------- app
def _sse(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _json(obj: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(obj), status_code=status, media_type="application/json")


def _error(message: str, status: int = 400) -> Response:
    return _json({"error": {"message": message, "type": "invalid_request_error", "code": None}}, status)


def create_app(requests: list[RecordedRequest]) -> FastAPI:
    """The FastAPI app; every request it gets is appended to ``requests``."""
    app = FastAPI(title="fake OpenAI")
    lock = threading.Lock()

    async def body_of(request: Request) -> Any:
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            body = None
        with lock:
            requests.append(RecordedRequest(request.method, request.url.path, body))
        return body

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        body = await body_of(request)
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error("the body must be a JSON object with a `messages` list")
        if body.get("stream"):
            return StreamingResponse(_chat_stream(body), media_type="text/event-stream")
        return _json(_chat(body))

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        body = await body_of(request)
        if not isinstance(body, dict) or "prompt" not in body:
            return _error("the body must be a JSON object with a `prompt`")
        if body.get("stream"):
            return StreamingResponse(_completion_stream(body), media_type="text/event-stream")
        return _json(_completion(body))

    @app.post("/v1/responses")
    async def responses(request: Request) -> Response:
        body = await body_of(request)
        if not isinstance(body, dict) or "input" not in body:
            return _error("the body must be a JSON object with an `input`")
        if body.get("stream"):
            return _error("this fake server does not stream the Responses API")
        return _json(_responses(body))

    @app.get("/v1/models")
    async def models(request: Request) -> JSONResponse:
        await body_of(request)
        return JSONResponse(
            {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "agentbolt-tests"}]}
        )

    return app


@contextmanager
def serve_fake_openai(*, startup_timeout: float = 10.0) -> Iterator[FakeOpenAI]:
    """Run the fake server on a free port of 127.0.0.1 in a thread; yields its base URL."""
    requests: list[RecordedRequest] = []
    config = uvicorn.Config(
        create_app(requests), host="127.0.0.1", port=0, log_level="warning", lifespan="off", access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="fake-openai", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the fake OpenAI server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield FakeOpenAI(f"http://127.0.0.1:{port}/v1", requests)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
