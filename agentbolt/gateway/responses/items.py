"""Responses API items ↔ Chat Completions messages.

Input: a string (one user message) or a list of items — messages (``role`` + text or
``input_text``/``output_text`` parts), ``function_call`` (an earlier call of the model) and
``function_call_output`` (its result). Consecutive assistant text and function calls
become one assistant message with ``tool_calls``, as the chat answer was, so the gateway
recognises an earlier answer (token-exact history). ``developer`` is ``system`` to a chat
template. Reasoning items carry nothing a chat template renders and are skipped.

Output: the chat answer's text becomes a ``message`` item, each tool call a
``function_call`` item whose ``call_id`` is the chat tool call's id.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from agentbolt.gateway.chat_template import bad_request, text_of

__all__ = ["chat_tool_choice", "chat_tools", "input_messages", "new_id", "output_items"]

_SKIPPED = frozenset({"reasoning", "item_reference"})


def new_id(prefix: str) -> str:
    """An id in the Responses API's style (``resp_…``, ``msg_…``, ``fc_…``)."""
    return f"{prefix}_{uuid.uuid4().hex}"


def input_messages(items: Any) -> list[dict[str, Any]]:
    """Chat messages for a request's ``input``. Raises a 400 for what cannot be rendered."""
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
            call = {"id": item.get("call_id") or item.get("id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"}}
            if out and _open_assistant(out[-1]):
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
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


def chat_tools(tools: Any) -> list[dict[str, Any]] | None:
    """Chat ``tools`` for Responses function tools (flat: ``{"type": "function", "name", ...}``)."""
    if not tools:
        return None
    if not isinstance(tools, list):
        raise bad_request("'tools' must be a list", "tools")
    out = []
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
            raise bad_request(f"only function tools are supported by this gateway, got {kind!r}", "tools")
        fn = {k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None}
        out.append({"type": "function", "function": fn})
    return out


def chat_tool_choice(choice: Any) -> Any:
    """Chat ``tool_choice`` for a Responses one (``{"type": "function", "name"}`` → nested)."""
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    if isinstance(choice, dict):
        raise bad_request(f"tool_choice {choice!r} is not supported: use 'auto', 'none', 'required' or "
                          "{'type': 'function', 'name': ...}", "tool_choice")
    return choice


def output_items(message: dict[str, Any], ids: list[str]) -> list[dict[str, Any]]:
    """Output items for a chat answer's message; ``ids`` are the items' ids, made as needed."""
    items: list[dict[str, Any]] = []
    text = message.get("content")
    if text:
        items.append({"type": "message", "id": _id(ids, 0, "msg"), "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]})
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        items.append({"type": "function_call", "id": _id(ids, len(items), "fc"), "call_id": call.get("id"),
                      "name": fn.get("name"), "arguments": fn.get("arguments") or "", "status": "completed"})
    return items


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
