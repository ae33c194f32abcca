"""Chat answers as Responses API output items (the way in — input items as chat messages
— is :mod:`agentbolt.responses_chat`, shared with the span attributes of traced calls).

The chat answer's text becomes a ``message`` item, each tool call a ``function_call`` item
whose ``call_id`` is the chat tool call's id (a ``custom_tool_call`` for a custom tool).
Tool names are mapped through the request's :class:`~.tools.ToolSet` (namespaced
functions).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from agentbolt.gateway.responses.tools import ToolSet
from agentbolt.responses_chat import CUSTOM_INPUT

__all__ = ["answer_message", "custom_input", "function_call_item", "new_id", "output_items"]


def new_id(prefix: str) -> str:
    """An id in the Responses API's style (``resp_…``, ``msg_…``, ``fc_…``)."""
    return f"{prefix}_{uuid.uuid4().hex}"


def output_items(message: dict[str, Any], ids: list[str], tools: ToolSet | None = None) -> list[dict[str, Any]]:
    """Output items for a chat answer's message; ``ids`` are the items' ids, made as needed.
    ``tools`` maps a call's prompt name back to its function (and namespace)."""
    tools = tools or ToolSet()
    items: list[dict[str, Any]] = []
    text = message.get("content")
    if text:
        items.append({"type": "message", "id": _id(ids, 0, "msg"), "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]})
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        items.append(function_call_item(_id(ids, len(items), "fc"), call.get("id"), str(fn.get("name") or ""),
                                        fn.get("arguments") or "", "completed", tools))
    return items


def custom_input(arguments: str) -> str:
    """A custom tool call's input from its function arguments (the raw text if unreadable)."""
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
    if isinstance(value, dict) and isinstance(value.get(CUSTOM_INPUT), str):
        return str(value[CUSTOM_INPUT])
    return arguments


def function_call_item(item_id: str, call_id: Any, prompt_name: str, arguments: str, status: str,
                       tools: ToolSet) -> dict[str, Any]:
    """A ``function_call`` output item (a ``custom_tool_call`` for a custom tool); a
    namespaced function's carries its ``namespace``."""
    namespace, name = tools.origin(prompt_name)
    item: dict[str, Any]
    if prompt_name in tools.custom:
        item = {"type": "custom_tool_call", "id": item_id, "call_id": call_id, "name": name,
                "input": custom_input(arguments), "status": status}
    else:
        item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": arguments,
                "status": status}
    if namespace is not None:
        item["namespace"] = namespace
    return item


def _id(ids: list[str], i: int, prefix: str) -> str:
    while len(ids) <= i:
        ids.append("")
    if not ids[i]:
        ids[i] = new_id(prefix)
    return ids[i]


def answer_message(message: dict[str, Any]) -> dict[str, Any]:
    """The assistant message of a chat answer, as the conversation keeps it."""
    out: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    return out
