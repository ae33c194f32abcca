"""A tiny deterministic OpenAI-compatible server, so the example runs anywhere.

It stands in for a model server (vLLM, SGLang...) and answers ``POST
/v1/chat/completions`` with ``echo: <the last user message>``; when that message holds
integer arithmetic such as ``17 + 25`` it adds `` => 42``, so some answers are right
and some are not. Like vLLM, the answer carries token ids — top-level
``prompt_token_ids`` and ``choices[0].token_ids`` (one token per UTF-8 byte) — unless
the request says ``"return_token_ids": false``, and logprobs when ``logprobs`` is true.
No streaming. Run it on its own with ``python echo_server.py --port 8000``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

__all__ = ["answer", "app", "serve_echo"]

_ARITHMETIC = re.compile(r"(-?\d+)\s*([+*-])\s*(-?\d+)")


def answer(messages: list[dict[str, Any]]) -> str:
    """The reply to a chat: an echo of the last user message, plus a computed result."""
    said = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
    reply = f"echo: {said}"
    found = _ARITHMETIC.search(said)
    if found:
        a, op, b = int(found[1]), found[2], int(found[3])
        reply += f" => {a + b if op == '+' else a - b if op == '-' else a * b}"
    return reply


def _render(messages: list[dict[str, Any]]) -> str:
    return "".join(f"<|{m.get('role', 'user')}|>{m.get('content') or ''}\n" for m in messages) + "<|assistant|>"


def _completion(body: dict[str, Any]) -> dict[str, Any]:
    messages = body.get("messages") or []
    text = answer(messages)
    prompt_ids = list(_render(messages).encode())
    ids = list(text.encode())
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": "stop",
        "logprobs": None,
    }
    if body.get("logprobs"):
        choice["logprobs"] = {
            "content": [
                {"token": bytes([t]).decode("latin-1"), "logprob": -0.01 * ((t + i) % 20 + 1), "bytes": [t], "top_logprobs": []}
                for i, t in enumerate(ids)
            ]
        }
    out: dict[str, Any] = {
        "id": "chatcmpl-echo-" + hashlib.sha1(text.encode()).hexdigest()[:12],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "echo"),
        "choices": [choice],
        "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(ids), "total_tokens": len(prompt_ids) + len(ids)},
    }
    if body.get("return_token_ids", True) is not False:
        out["prompt_token_ids"] = prompt_ids
        choice["token_ids"] = ids
    return out


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The ASGI app: ``POST /v1/chat/completions`` and ``GET /v1/models``."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    status, payload = 404, {"error": {"message": f"no route {scope['path']}; this echo server only has /v1/chat/completions"}}
    if scope["method"] == "POST" and scope["path"] == "/v1/chat/completions":
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            request = None
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            status, payload = 400, {"error": {"message": "send a JSON object with a `messages` list"}}
        elif request.get("stream"):
            status, payload = 400, {"error": {"message": "this echo server does not stream"}}
        else:
            status, payload = 200, _completion(request)
    elif scope["method"] == "GET" and scope["path"] == "/v1/models":
        status, payload = 200, {"object": "list", "data": [{"id": "echo", "object": "model", "owned_by": "example"}]}
    data = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": data})


@contextmanager
def serve_echo(port: int = 0) -> Iterator[str]:
    """Serve the echo model on 127.0.0.1 in a background thread; yields its base URL
    (``http://127.0.0.1:PORT/v1``)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="echo-model", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the echo server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    print(f"echo model at http://127.0.0.1:{args.port}/v1")
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
