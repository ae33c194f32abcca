"""Stream reassembly (the events' framing is :mod:`agentbolt.engines.sse`).

A streamed call reaches the agent chunk by chunk; the span needs the whole answer.
:class:`StreamAssembler` folds OpenAI chunks (chat and completions, vLLM token ids
included) back into the non-streaming response the same call would have returned.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["StreamAssembler"]


class StreamAssembler:
    """Accumulates chunks; :meth:`result` is the equivalent non-streaming response."""

    def __init__(self) -> None:
        self._top: dict[str, Any] = {}
        self._choices: dict[int, dict[str, Any]] = {}
        self._chat = True
        self.n_chunks = 0

    def add(self, chunk: dict[str, Any]) -> None:
        self.n_chunks += 1
        if chunk.get("object") == "text_completion":
            self._chat = False
        for key in ("id", "created", "model", "system_fingerprint"):
            if chunk.get(key) is not None and key not in self._top:
                self._top[key] = chunk[key]
        if chunk.get("usage"):
            self._top["usage"] = chunk["usage"]
        if chunk.get("policy_version") is not None:  # agentbolt's local engine says which weights answered
            self._top["policy_version"] = chunk["policy_version"]
        ids = chunk.get("prompt_token_ids")
        if isinstance(ids, list) and "prompt_token_ids" not in self._top:
            self._top["prompt_token_ids"] = ids
        for c in chunk.get("choices") or ():
            self._add_choice(c)

    def _add_choice(self, c: dict[str, Any]) -> None:
        index = int(c.get("index", 0))
        acc = self._choices.setdefault(index, {"index": index})
        if c.get("finish_reason") is not None:
            acc["finish_reason"] = c["finish_reason"]
        if c.get("stop_reason") is not None:
            acc["stop_reason"] = c["stop_reason"]
        if isinstance(c.get("token_ids"), list):
            acc.setdefault("token_ids", []).extend(c["token_ids"])
        if isinstance(c.get("prompt_token_ids"), list):
            acc.setdefault("prompt_token_ids", c["prompt_token_ids"])
        if isinstance(c.get("logprobs"), dict):
            _merge_logprobs(acc.setdefault("logprobs", {}), c["logprobs"])
        if "delta" in c:
            _merge_delta(acc.setdefault("message", {"role": "assistant", "content": None}), c["delta"] or {})
        elif "text" in c:
            acc["text"] = acc.get("text", "") + (c.get("text") or "")

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self._top.get("id"),
            "object": "chat.completion" if self._chat else "text_completion",
        }
        out.update((k, v) for k, v in self._top.items() if k != "id")
        choices = []
        for index in sorted(self._choices):
            c = dict(self._choices[index])
            c.setdefault("finish_reason", None)
            if self._chat:
                message = c.setdefault("message", {"role": "assistant", "content": None})
                if "tool_calls" in message:
                    message["tool_calls"] = [message["tool_calls"][k] for k in sorted(message["tool_calls"])]
            else:
                c.setdefault("text", "")
            c.setdefault("logprobs", None)
            choices.append(c)
        out["choices"] = choices
        return out


def _merge_delta(message: dict[str, Any], delta: dict[str, Any]) -> None:
    if delta.get("role"):
        message["role"] = delta["role"]
    for key in ("content", "reasoning_content", "refusal"):
        if delta.get(key) is not None:
            message[key] = (message.get(key) or "") + delta[key]
    for call in delta.get("tool_calls") or ():
        calls = message.setdefault("tool_calls", {})
        acc = calls.setdefault(
            int(call.get("index", len(calls))),
            {"id": None, "type": "function", "function": {"name": None, "arguments": ""}},
        )
        if call.get("id"):
            acc["id"] = call["id"]
        if call.get("type"):
            acc["type"] = call["type"]
        fn = call.get("function") or {}
        if fn.get("name"):
            acc["function"]["name"] = fn["name"]
        if fn.get("arguments"):
            acc["function"]["arguments"] += fn["arguments"]


def _extend(acc: dict[str, Any], key: str, items: Iterable[Any] | None) -> None:
    if items is not None:
        acc.setdefault(key, []).extend(items)


def _merge_logprobs(acc: dict[str, Any], part: dict[str, Any]) -> None:
    """Chat (``content``, ``refusal`` lists) and completions (parallel lists) logprobs."""
    for key in ("content", "refusal", "tokens", "token_logprobs", "top_logprobs", "text_offset"):
        if isinstance(part.get(key), list):
            _extend(acc, key, part[key])
