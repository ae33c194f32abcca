"""A streamed chat answer as Responses API server-sent events.

``response.created`` and ``response.in_progress``; for text, ``response.output_item.added``
(a message), ``response.content_part.added``, ``response.output_text.delta``…,
``response.output_text.done``, ``response.content_part.done``,
``response.output_item.done``; for each tool call, ``response.output_item.added`` (a
function call), ``response.function_call_arguments.delta``…,
``response.function_call_arguments.done``, ``response.output_item.done`` (for a custom
tool: a ``custom_tool_call`` item, ``response.custom_tool_call_input.delta`` and
``.done`` with its whole input); then
``response.completed`` (``response.incomplete`` when cut at max tokens) with the whole
Response. An engine error mid-stream ends it with ``error`` and ``response.failed``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson

from agentbolt.engines.sse import close_stream
from agentbolt.gateway.responses.items import custom_input, function_call_item, new_id
from agentbolt.gateway.responses.tools import ToolSet
from agentbolt.gateway.responses.translate import response_object

__all__ = ["ResponsesStream"]


class ResponsesStream:
    """Translate one call's chat chunks; ``on_done`` gets the assistant message and the
    final Response object at the end."""

    def __init__(self, body: dict[str, Any], response_id: str,
                 on_done: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
                 tools: ToolSet | None = None) -> None:
        self.body = body
        self.tools = tools or ToolSet()
        self._prompt_names: dict[int, str] = {}  # chat tool-call index -> the name the prompt shows
        self._arguments: dict[int, str] = {}  # chat tool-call index -> its arguments so far (JSON text)
        self.response_id = response_id
        self.on_done = on_done
        self._seq = 0
        self._items: list[dict[str, Any]] = []
        self._text: dict[str, Any] | None = None  # the open message item
        self._calls: dict[int, dict[str, Any]] = {}  # chat tool-call index -> its function_call item
        self._model: str | None = None

    def _event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"

    def _response(self, status: str, **kw: Any) -> dict[str, Any]:
        return response_object(self.body, self.response_id, model=self._model, output=list(self._items),
                               status=status, **kw)

    async def events(self, chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
        yield self._event("response.created", response=self._response("in_progress"))
        yield self._event("response.in_progress", response=self._response("in_progress"))
        finish, usage = None, None
        try:
            async for chunk in chunks:
                if "error" in chunk and "choices" not in chunk:
                    error = chunk["error"] if isinstance(chunk["error"], dict) else {"message": str(chunk["error"])}
                    yield self._event("error", code=str(error.get("code") or "server_error"),
                                      message=str(error.get("message")), param=error.get("param"))
                    failed = {"code": "server_error", "message": str(error.get("message"))}
                    yield self._event("response.failed", response=self._response("failed", error=failed))
                    return
                self._model = self._model or chunk.get("model")
                usage = chunk.get("usage") or usage
                for c in chunk.get("choices") or ():
                    delta = c.get("delta") or {}
                    for event in self._content(delta.get("content")):
                        yield event
                    for call in delta.get("tool_calls") or ():
                        for event in self._tool_call(call):
                            yield event
                    finish = c.get("finish_reason") or finish
            for event in self._close_text():
                yield event
            for key, item in self._calls.items():
                index = self._items.index(item)
                if item["type"] == "custom_tool_call":  # its input is known once its arguments are whole
                    item["input"] = custom_input(self._arguments[key])
                    yield self._event("response.custom_tool_call_input.delta", item_id=item["id"],
                                      output_index=index, delta=item["input"])
                    yield self._event("response.custom_tool_call_input.done", item_id=item["id"],
                                      output_index=index, input=item["input"])
                else:
                    yield self._event("response.function_call_arguments.done", item_id=item["id"],
                                      output_index=index, name=item["name"], arguments=item["arguments"])
                item["status"] = "completed"
                yield self._event("response.output_item.done", output_index=index, item=item)
            final = self._response("completed", finish_reason=finish, usage=usage)
            kind = "response.completed" if final["status"] == "completed" else "response.incomplete"
            if self.on_done is not None:
                self.on_done(self._message(), final)
            yield self._event(kind, response=final)
        finally:
            await close_stream(chunks)

    def _content(self, text: str | None) -> list[bytes]:
        if not text:
            return []
        out = []
        if self._text is None:
            self._text = {"type": "message", "id": new_id("msg"), "status": "in_progress", "role": "assistant",
                          "content": []}
            self._items.append(self._text)
            index = len(self._items) - 1
            out.append(self._event("response.output_item.added", output_index=index, item=self._text))
            out.append(self._event("response.content_part.added", item_id=self._text["id"], output_index=index,
                                   content_index=0, part=_text_part("")))
            self._text["content"].append(_text_part(""))
        self._text["content"][0]["text"] += text
        out.append(self._event("response.output_text.delta", item_id=self._text["id"],
                               output_index=self._items.index(self._text), content_index=0, delta=text, logprobs=[]))
        return out

    def _close_text(self) -> list[bytes]:
        item = self._text
        if item is None or item["status"] == "completed":
            return []
        index, part = self._items.index(item), item["content"][0]
        item["status"] = "completed"
        return [
            self._event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                        text=part["text"], logprobs=[]),
            self._event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                        part=part),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    def _tool_call(self, call: dict[str, Any]) -> list[bytes]:
        out: list[bytes] = []
        fn = call.get("function") or {}
        index = int(call.get("index", len(self._calls)))
        item = self._calls.get(index)
        if item is None:
            out += self._close_text()
            self._prompt_names[index] = fn.get("name") or ""
            self._arguments[index] = ""
            prefix = "ctc" if self._prompt_names[index] in self.tools.custom else "fc"
            item = function_call_item(new_id(prefix), call.get("id") or new_id("call"), self._prompt_names[index], "",
                                      "in_progress", self.tools)
            self._calls[index] = item
            self._items.append(item)
            out.append(self._event("response.output_item.added", output_index=len(self._items) - 1,
                                   item={**item}))
        elif fn.get("name"):
            self._prompt_names[index] += fn["name"]
            namespace, item["name"] = self.tools.origin(self._prompt_names[index])
            if namespace is not None:
                item["namespace"] = namespace
        if fn.get("arguments"):
            self._arguments[index] += fn["arguments"]
            if item["type"] == "function_call":
                item["arguments"] = self._arguments[index]
                out.append(self._event("response.function_call_arguments.delta", item_id=item["id"],
                                       output_index=self._items.index(item), delta=fn["arguments"]))
        return out

    def _message(self) -> dict[str, Any]:
        """The assistant message of the whole answer (chat shape)."""
        text = self._text["content"][0]["text"] if self._text is not None else None
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if self._calls:
            message["tool_calls"] = [
                {"id": c["call_id"], "type": "function",
                 "function": {"name": self._prompt_names[i], "arguments": self._arguments[i]}}
                for i, c in self._calls.items()
            ]
        return message


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
