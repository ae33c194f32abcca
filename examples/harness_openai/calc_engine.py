"""A deterministic stand-in model for ``--smoke`` runs: it does arithmetic.

It is an agentbolt :class:`~agentbolt.engines.Engine`, so the gateway treats it like a
real one: token ids (one per byte) and chosen-token logprobs come with every answer.

* "what is 3 + 4?" → "The answer is 7."
* with ``tools`` in the request → a call of the first tool with the two numbers
  (``{"a": 3, "b": 4}``); after the tool's result → "The answer is <result>."
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from agentbolt.engines import Engine

__all__ = ["CalcEngine"]

_SUM = re.compile(r"(-?\d+)\s*([+*-])\s*(-?\d+)")
_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _logprobs(text: str) -> dict[str, Any]:
    return {"content": [{"token": ch, "logprob": -0.1, "bytes": list(ch.encode()), "top_logprobs": []} for ch in text]}


class CalcEngine(Engine):
    name = "calc"
    returns_token_ids = True

    def _answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> tuple[str | None, dict[str, Any] | None]:
        last = messages[-1] if messages else {}
        if last.get("role") == "tool":
            return f"The answer is {_text(last.get('content')).strip()}.", None
        question = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        match = _SUM.search(question)
        if match is None:
            return "I don't know.", None
        a, op, b = int(match.group(1)), match.group(2), int(match.group(3))
        if tools:
            fn = tools[0]["function"]
            names = list((fn.get("parameters") or {}).get("properties", {}))[:2] or ["a", "b"]
            call = {"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
                    "function": {"name": fn["name"], "arguments": json.dumps(dict(zip(names, (a, b))))}}
            return None, call
        return f"The answer is {_OPS[op](a, b)}.", None

    async def chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        messages = body.get("messages", [])
        text, call = self._answer(messages, body.get("tools"))
        out = text if text is not None else json.dumps(call)
        prompt = "".join(f"<|{m.get('role')}|>{_text(m.get('content'))}\n" for m in messages) + "<|assistant|>"
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if call is not None:
            message["tool_calls"] = [call]
        prompt_ids, ids = list(prompt.encode()), list(out.encode())
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or "calc",
            "prompt_token_ids": prompt_ids,
            "choices": [{
                "index": 0, "message": message, "token_ids": ids, "logprobs": _logprobs(out),
                "finish_reason": "tool_calls" if call is not None else "stop",
            }],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(ids), "total_tokens": len(prompt_ids) + len(ids)},
        }

    async def stream_chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        full = await self.chat_completions(body, replica=replica)
        choice = full["choices"][0]
        delta = {k: v for k, v in choice["message"].items() if v is not None}
        if "tool_calls" in delta:
            delta["tool_calls"] = [{"index": 0, **c} for c in delta["tool_calls"]]
        yield {"id": full["id"], "object": "chat.completion.chunk", "created": full["created"], "model": full["model"],
               "prompt_token_ids": full["prompt_token_ids"],
               "choices": [{"index": 0, "delta": delta, "token_ids": choice["token_ids"], "logprobs": choice["logprobs"],
                            "finish_reason": choice["finish_reason"]}]}

    async def completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        prompt = str(body.get("prompt", ""))
        text, _ = self._answer([{"role": "user", "content": prompt}], None)
        assert text is not None
        return {"id": f"cmpl-{uuid.uuid4().hex[:12]}", "object": "text_completion", "created": int(time.time()),
                "model": body.get("model") or "calc", "prompt_token_ids": list(prompt.encode()),
                "choices": [{"index": 0, "text": text, "token_ids": list(text.encode()), "finish_reason": "stop",
                             "logprobs": {"tokens": list(text), "token_logprobs": [-0.1] * len(text)}}]}

    async def stream_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        yield await self.completions(body, replica=replica)

    async def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "calc", "object": "model", "owned_by": "agentbolt-example"}]}
