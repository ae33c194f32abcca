"""Responses API items ↔ Chat Completions messages.

Input: a string (one user message) or a list of items — messages (``role`` + text or
``input_text``/``output_text`` parts), ``function_call`` / ``custom_tool_call`` (an
earlier call of the model) and ``function_call_output`` / ``custom_tool_call_output``
(its result). Consecutive assistant text and function calls
become one assistant message with ``tool_calls``, as the chat answer was, so the gateway
recognises an earlier answer (token-exact history). ``developer`` is ``system`` to a chat
template. Reasoning items carry nothing a chat template renders and are skipped.

Output: the chat answer's text becomes a ``message`` item, each tool call a
``function_call`` item whose ``call_id`` is the chat tool call's id. Tool names are
mapped through the request's :class:`~.tools.ToolSet` (namespaced functions).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from agentbolt.gateway.chat_template import bad_request, text_of
from agentbolt.gateway.responses.tools import CUSTOM_INPUT, ToolSet

__all__ = ["custom_input", "function_call_item", "input_messages", "new_id", "output_items"]

_SKIPPED = frozenset({"reasoning", "item_reference"})


def new_id(prefix: str) -> str:
    """An id in the Responses API's style (``resp_…``, ``msg_…``, ``fc_…``)."""
    return f"{prefix}_{uuid.uuid4().hex}"


def input_messages(items: Any, tools: ToolSet | None = None) -> list[dict[str, Any]]:
    """Chat messages for a request's ``input``. Raises a 400 for what cannot be rendered.
    ``tools``: the request's tools, to give an earlier call of a namespaced function the
    name the prompt shows it under."""
    tools = tools or ToolSet()
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise bad_request("'input' must be a string or a list of input items", "input")
    out: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict):
            raise bad_request("each input item must be an object", "input")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role", "user")
            role = "system" if role == "developer" else role
            text = text_of(item.get("content"))
            if role == "assistant" and out and _open_assistant(out[-1]):
                out[-1]["content"] = (out[-1]["content"] or "") + text
            else:
                out.append({"role": role, "content": text})
        elif kind == "function_call":
            name = tools.prompt_name(item.get("namespace"), str(item.get("name")))
            call = {"id": item.get("call_id") or item.get("id"), "type": "function",
                    "function": {"name": name, "arguments": item.get("arguments") or "{}"}}
            if out and _open_assistant(out[-1]):
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "custom_tool_call":  # an earlier call of a custom tool: its input is the one argument
            name = tools.prompt_name(item.get("namespace"), str(item.get("name")))
            arguments = json.dumps({CUSTOM_INPUT: str(item.get("input") or "")}, ensure_ascii=False)
            call = {"id": item.get("call_id") or item.get("id"), "type": "function",
                    "function": {"name": name, "arguments": arguments}}
            if out and _open_assistant(out[-1]):
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            text = (
                output
                if isinstance(output, str)
                else text_of(output)
                if isinstance(output, list)
                else json.dumps(output)
            )
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
        elif kind not in _SKIPPED:
            raise bad_request(f"input items of type {kind!r} are not supported by this gateway: send messages, "
                              "function_call and function_call_output items", "input")
    return out


def _open_assistant(message: dict[str, Any]) -> bool:
    """An assistant message that later text or calls of the same turn extend."""
    return message.get("role") == "assistant"


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
