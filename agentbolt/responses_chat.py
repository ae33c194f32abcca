"""OpenAI Responses API items as Chat Completions messages: the one translation.

Both who read a Responses call as a chat call use it: the gateway, which answers a
Responses request through its chat path (:mod:`agentbolt.gateway.responses`), and the
span attributes of a recorded Responses call (:mod:`agentbolt.call_attributes`), which
add the chat-shaped ``messages`` and ``choices`` adapters read. So a conversation reads
the same whether the gateway answered it or a client's call to another server was traced.

Input (a request's ``instructions`` + ``input``):

* a string is one user message; ``instructions`` (non-empty) a system message first;
* ``message`` items (also without a ``type``): their role — ``developer`` is ``system``,
  the role a chat template renders — and their text (a string, or the text of its
  ``input_text`` / ``output_text`` / ``text`` parts, joined);
* ``function_call`` items (an earlier call of the model) become tool calls with the
  item's ``call_id`` (its ``id`` without one); ``custom_tool_call`` items a call whose
  arguments are ``{"input": <its input>}`` (how the gateway shows a custom tool:
  :data:`CUSTOM_INPUT`). Assistant text and the calls after it — one turn, which the
  Responses API splits into items — make one assistant message, as the chat answer was;
* ``function_call_output`` / ``custom_tool_call_output`` items are ``tool`` messages: the
  output as is when a string, the text of its parts when a list, else its JSON;
* ``reasoning`` and ``item_reference`` items carry nothing a chat template renders and
  are skipped.

Anything else (hosted tools' items, image or file parts) has no chat form: ``strict``
translation (the gateway, which must render the prompt) raises
:class:`UnsupportedItemError`; the lenient one (a recorder, which must never fail) skips it.

Output (a Response's ``output``): :func:`output_message` — its message items' text and its
calls, as one assistant message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["CUSTOM_INPUT", "UnsupportedItemError", "input_messages", "instruction_messages", "output_message",
           "tool_call"]

CUSTOM_INPUT = "input"
"""The one argument of a custom tool's function: its free-form input."""

_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
_SKIPPED = frozenset({"reasoning", "item_reference"})
_CALLS = frozenset({"function_call", "custom_tool_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})


class UnsupportedItemError(ValueError):
    """An input item or content part with no chat form (raised by strict translation)."""


def instruction_messages(instructions: Any) -> list[dict[str, Any]]:
    """The system message of a request's ``instructions`` (none when empty or absent)."""
    return [{"role": "system", "content": instructions}] if isinstance(instructions, str) and instructions else []


def input_messages(items: Any, *, prompt_name: Callable[[str | None, str], str] | None = None,
                   strict: bool = False) -> list[dict[str, Any]]:
    """Chat messages for a request's ``input``. ``prompt_name(namespace, name)``: the name
    the prompt shows a called function under (the gateway's namespaced tools); by default
    its own name."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list):
        _refuse("'input' must be a string or a list of input items", strict)
        return []
    out: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict):
            _refuse("each input item must be an object", strict)
            continue
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role", "user")
            role = "system" if role == "developer" else role
            text = _text(item.get("content"), strict)
            if role == "assistant" and out and out[-1].get("role") == "assistant":
                out[-1]["content"] = (out[-1]["content"] or "") + text
            else:
                out.append({"role": role, "content": text})
        elif kind in _CALLS:
            call = _call(item, prompt_name)
            if out and out[-1].get("role") == "assistant":
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind in _OUTPUTS:
            output = _output(item.get("output"), strict)
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": output})
        elif kind not in _SKIPPED:
            _refuse(f"input items of type {kind!r} are not supported by this gateway: send messages, "
                    "function_call and function_call_output items", strict)
    return out


def output_message(output: Any) -> dict[str, Any]:
    """The assistant message of a Response's ``output``: its message items' text (``None``
    without any) and its function and custom tool calls."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in output if isinstance(output, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            texts.append(_text(item.get("content"), strict=False))
        elif item.get("type") in _CALLS:
            calls.append(_call(item, None))
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message


def tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """A chat-completions tool call."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _call(item: Mapping[str, Any], prompt_name: Callable[[str | None, str], str] | None) -> dict[str, Any]:
    name = str(item.get("name"))
    if prompt_name is not None:
        name = prompt_name(item.get("namespace"), name)
    if item.get("type") == "custom_tool_call":  # a custom tool's input is its function's one argument
        arguments = json.dumps({CUSTOM_INPUT: str(item.get("input") or "")}, ensure_ascii=False)
    else:
        arguments = item.get("arguments") or "{}"
    return tool_call(item.get("call_id") or item.get("id"), name, arguments)


def _output(output: Any, strict: bool) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return _text(output, strict)
    return json.dumps(output)


def _text(content: Any, strict: bool) -> str:
    """A message's text: a string as is; its text parts joined (others refused or skipped)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    parts = []
    for part in content:
        if isinstance(part, dict) and part.get("type") in _TEXT_PARTS:
            parts.append(str(part.get("text", "")))
        elif isinstance(part, dict):
            _refuse(f"only text content parts can be rendered for this model, got {part.get('type')!r}", strict)
        else:
            parts.append(str(part))
    return "".join(parts)


def _refuse(message: str, strict: bool) -> None:
    """Raise for what has no chat form when ``strict``; else it is skipped."""
    if strict:
        raise UnsupportedItemError(message)
