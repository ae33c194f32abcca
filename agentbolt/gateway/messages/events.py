"""A streamed chat answer as Anthropic Messages server-sent events.

``message_start`` (the Message with no content yet, ``input_tokens`` from the prompt's
token ids) and a ``ping``; for text, ``content_block_start`` (a ``text`` block),
``content_block_delta`` (``text_delta``)…, ``content_block_stop``; for each tool call,
``content_block_start`` (a ``tool_use`` block with empty ``input``),
``content_block_delta`` (``input_json_delta``)…, ``content_block_stop``; then
``message_delta`` (``stop_reason``, ``stop_sequence``, cumulative ``usage``) and
``message_stop``. An engine error mid-stream ends it with an ``error`` event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import orjson

from agentbolt.engines.sse import close_stream
from agentbolt.gateway.messages.errors import error_body
from agentbolt.gateway.messages.translate import message_object, stop_of, tool_use_id, usage_of

__all__ = ["MessagesStream"]


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **payload}) + b"\n\n"


class MessagesStream:
    """Translate one call's chat chunks. ``decode`` turns sampled token ids into text
    (to tell which stop sequence ended the answer); None when the engine has no tokenizer."""

    def __init__(self, body: dict[str, Any], message_id: str,
                 decode: Callable[[list[int]], str] | None = None) -> None:
        self.body = body
        self.message_id = message_id
        self.decode = decode
        self._index = -1  # the open content block
        self._open: str | None = None  # its kind: "text" / "tool_use"
        self._calls: dict[int, int] = {}  # chat tool-call index -> block index
        self._sampled: list[int] = []
        self._matched: str | None = None

    def _start_block(self, block: dict[str, Any]) -> list[bytes]:
        out = self._stop_block()
        self._index += 1
        self._open = block["type"]
        out.append(_event("content_block_start", {"index": self._index, "content_block": block}))
        return out

    def _stop_block(self) -> list[bytes]:
        if self._open is None:
            return []
        self._open = None
        return [_event("content_block_stop", {"index": self._index})]

    def _text(self, text: str | None) -> list[bytes]:
        if not text:
            return []
        out = [] if self._open == "text" else self._start_block({"type": "text", "text": ""})
        out.append(_event("content_block_delta", {"index": self._index,
                                                  "delta": {"type": "text_delta", "text": text}}))
        return out

    def _tool_call(self, call: dict[str, Any]) -> list[bytes]:
        fn = call.get("function") or {}
        key = int(call.get("index", len(self._calls)))
        out: list[bytes] = []
        if key not in self._calls:
            out += self._start_block({"type": "tool_use", "id": tool_use_id(call.get("id")),
                                      "name": fn.get("name") or "", "input": {}})
            self._calls[key] = self._index
        if fn.get("arguments"):
            out.append(_event("content_block_delta", {"index": self._calls[key],
                                                      "delta": {"type": "input_json_delta",
                                                                "partial_json": fn["arguments"]}}))
        return out

    def _start(self, input_tokens: int) -> list[bytes]:
        usage = {**usage_of(None), "input_tokens": input_tokens}
        start = message_object(self.body, self.message_id, content=[], stop_reason=None, stop_sequence=None,
                               usage=usage)
        return [_event("message_start", {"message": start}), _event("ping", {})]

    def _sampled_text(self) -> str | None:
        return self.decode(self._sampled) if self.decode is not None and self._sampled else None

    async def events(self, chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
        started = False
        finish: Any = None
        usage: Any = None
        input_tokens = 0
        try:
            async for chunk in chunks:
                if "error" in chunk and "choices" not in chunk:
                    error = chunk["error"] if isinstance(chunk["error"], dict) else {"message": str(chunk["error"])}
                    code = error.get("code")
                    status = code if isinstance(code, int) else 500
                    yield _event("error", {"error": error_body(status, str(error.get("message")))["error"]})
                    return
                if not started:
                    started = True
                    ids = chunk.get("prompt_token_ids")
                    input_tokens = len(ids) if isinstance(ids, list) else 0
                    for event in self._start(input_tokens):
                        yield event
                usage = chunk.get("usage") or usage
                for c in chunk.get("choices") or ():
                    if isinstance(c.get("token_ids"), list):
                        self._sampled += c["token_ids"]
                    if isinstance(c.get("stop_reason"), str):
                        self._matched = c["stop_reason"]
                    delta = c.get("delta") or {}
                    for event in self._text(delta.get("content")):
                        yield event
                    for call in delta.get("tool_calls") or ():
                        for event in self._tool_call(call):
                            yield event
                    finish = c.get("finish_reason") or finish
            if not started:
                for event in self._start(0):
                    yield event
            for event in self._stop_block():
                yield event
            stops: Sequence[str] = self.body.get("stop_sequences") or ()
            reason, sequence = stop_of(finish, stops, self._matched, self._sampled_text)
            final = usage_of(usage)
            if not final["input_tokens"]:
                final["input_tokens"] = input_tokens
            yield _event("message_delta", {"delta": {"stop_reason": reason, "stop_sequence": sequence},
                                           "usage": final})
            yield _event("message_stop", {})
        finally:
            await close_stream(chunks)
