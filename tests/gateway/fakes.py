"""A scriptable in-process engine for gateway tests.

It answers in vLLM's format (prompt ids top-level, ``choices[0].token_ids``, chat
logprobs) with deterministic content: one "token" per word of a fixed reply, id = 100 +
position. It records the bodies and replicas it was called with, can fail the next
calls with given statuses, hold calls until released, and answer with a tool call.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from agentbolt.engines.engine import Engine, EngineError

REPLY = "the answer is four"


class FakeEngine(Engine):
    name = "fake"

    def __init__(
        self,
        *,
        token_ids: bool = True,
        replicas: int = 1,
        policy_version: int | None = 1,
        delay: float = 0.0,
        reply: str = REPLY,
    ) -> None:
        self.returns_token_ids = token_ids
        self._replicas = replicas
        self._version = policy_version
        self.delay = delay
        self.reply = reply
        self.calls: list[tuple[dict[str, Any], int]] = []
        self.fail_next: list[int] = []  # statuses to fail the next calls with (0 = hang)
        self.gate: threading.Event | None = None  # when set up, calls wait for it (settable from any thread)
        self.stream_gate: threading.Event | None = None  # streams wait for it after their first chunk
        self.tool_call: dict[str, Any] | None = None  # {"name": ..., "arguments": "..."}
        self.started = 0

    @property
    def n_replicas(self) -> int:
        return self._replicas

    @property
    def policy_version(self) -> int | None:
        return self._version

    def bump(self) -> None:
        self._version = (self._version or 0) + 1

    async def start(self) -> None:
        self.started += 1

    # --------------------------------------------------------------- helpers
    async def _enter(self, body: dict[str, Any], replica: int) -> None:
        self.calls.append((body, replica))
        if self.fail_next:
            status = self.fail_next.pop(0)
            if status == 0:
                await asyncio.sleep(3600)
            raise EngineError(status, f"fake engine failure {status}")
        if self.gate is not None:
            await asyncio.to_thread(self.gate.wait, 30)
        if self.delay:
            await asyncio.sleep(self.delay)

    def _prompt_ids(self, body: dict[str, Any]) -> list[int]:
        text = str(body.get("messages") or body.get("prompt"))
        return [ord(ch) % 50 for ch in text[:12]]

    def _tokens(self) -> list[str]:
        words = self.reply.split(" ")
        return [w if i == 0 else " " + w for i, w in enumerate(words)]

    def _usage(self, body: dict[str, Any]) -> dict[str, int]:
        p, c = len(self._prompt_ids(body)), len(self._tokens())
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    # --------------------------------------------------------------- API
    async def chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        await self._enter(body, replica)
        tokens = self._tokens()
        message: dict[str, Any] = {"role": "assistant", "content": "".join(tokens)}
        finish = "stop"
        if self.tool_call is not None:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": dict(self.tool_call)}],
            }
            finish = "tool_calls"
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    {"token": t, "logprob": -0.5 - i, "bytes": None, "top_logprobs": []} for i, t in enumerate(tokens)
                ]
            }
        out: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "choices": [choice],
            "usage": self._usage(body),
        }
        if self.returns_token_ids and body.get("return_token_ids"):
            out["prompt_token_ids"] = self._prompt_ids(body)
            choice["token_ids"] = [100 + i for i in range(len(tokens))]
        return out

    async def stream_chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        await self._enter(body, replica)
        ids = self.returns_token_ids and body.get("return_token_ids")
        base = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": body.get("model", "fake-model"),
        }
        first: dict[str, Any] = {
            **base,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
        }
        if ids:
            first["prompt_token_ids"] = self._prompt_ids(body)
        yield first
        if self.stream_gate is not None:
            await asyncio.to_thread(self.stream_gate.wait, 30)
        tokens = self._tokens()
        for i, t in enumerate(tokens):
            choice: dict[str, Any] = {
                "index": 0,
                "delta": {"content": t},
                "finish_reason": "stop" if i == len(tokens) - 1 else None,
            }
            if body.get("logprobs"):
                choice["logprobs"] = {"content": [{"token": t, "logprob": -0.5 - i, "bytes": None, "top_logprobs": []}]}
            if ids:
                choice["token_ids"] = [100 + i]
            yield {**base, "choices": [choice]}
            await asyncio.sleep(0)
        if (body.get("stream_options") or {}).get("include_usage"):
            yield {**base, "choices": [], "usage": self._usage(body)}

    async def completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        await self._enter(body, replica)
        tokens = self._tokens()
        choice: dict[str, Any] = {"index": 0, "text": "".join(tokens), "finish_reason": "length", "logprobs": None}
        if body.get("logprobs") is not None:
            choice["logprobs"] = {
                "tokens": tokens,
                "token_logprobs": [-0.25] * len(tokens),
                "top_logprobs": None,
                "text_offset": list(range(len(tokens))),
            }
        out: dict[str, Any] = {
            "id": "cmpl-fake",
            "object": "text_completion",
            "created": 1,
            "model": body.get("model", "fake-model"),
            "choices": [choice],
            "usage": self._usage(body),
        }
        if self.returns_token_ids and body.get("return_token_ids"):
            out["choices"][0]["prompt_token_ids"] = self._prompt_ids(body)
            choice["token_ids"] = [100 + i for i in range(len(tokens))]
        return out

    async def stream_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        full = await self.completions(body, replica=replica)
        for i, t in enumerate(self._tokens()):
            choice: dict[str, Any] = {"index": 0, "text": t, "finish_reason": None, "logprobs": None}
            if "token_ids" in full["choices"][0]:
                choice["token_ids"] = [100 + i]
            yield {
                "id": "cmpl-fake",
                "object": "text_completion",
                "created": 1,
                "model": full["model"],
                "choices": [choice],
            }

    async def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "agentbolt"}]}
