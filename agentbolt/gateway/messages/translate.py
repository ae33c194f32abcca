"""An Anthropic Messages request as a chat request, and a chat answer as a Message.

Request: ``system`` (a string or text blocks) becomes the system message (as does a
``system`` message among the ``messages``, which Claude Code sends); each message's
content (a string or blocks) becomes chat messages — ``text`` (and plain-text
``document``) blocks the text, an assistant's ``tool_use`` blocks its ``tool_calls``
(``input`` as JSON arguments), a user's ``tool_result`` blocks ``tool`` messages, and
``thinking`` blocks their text (the engine has no separate thinking channel; opaque
``redacted_thinking`` is skipped). ``tools`` with an ``input_schema`` become function
tools; server tools the engine cannot run (``web_search_…``, ``code_execution_…``) are
left out of the prompt and listed as dropped. ``tool_choice`` (``auto``, ``any``,
``tool``, ``none``; ``disable_parallel_tool_use``), ``stop_sequences``, ``max_tokens``,
``temperature``, ``top_p`` and ``top_k`` are translated; ``metadata``, ``thinking``,
``service_tier`` and cache controls are accepted and not acted on.

Answer: the chat answer's text becomes a ``text`` block and each tool call a
``tool_use`` block (``toolu_`` ids); ``finish_reason`` becomes ``stop_reason``
(``end_turn``, ``max_tokens``, ``tool_use``, ``stop_sequence``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from agentbolt.gateway.messages.errors import bad_request

__all__ = [
    "chat_request",
    "content_blocks",
    "message_object",
    "new_message_id",
    "stop_of",
    "tool_use_id",
    "usage_of",
]

_SAMPLING = {"model": "model", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k"}


def new_message_id() -> str:
    """An id in the Messages API's style (``msg_…``)."""
    return f"msg_{uuid.uuid4().hex[:24]}"


def tool_use_id(chat_id: str | None) -> str:
    """The ``tool_use`` id for a chat tool call id (``call_x`` → ``toolu_x``)."""
    if not chat_id:
        return f"toolu_{uuid.uuid4().hex[:24]}"
    if chat_id.startswith("toolu_"):
        return chat_id
    return "toolu_" + chat_id.removeprefix("call_")


def _block_text(block: dict[str, Any], where: str) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "thinking":
        return str(block.get("thinking", ""))
    if kind == "document" and isinstance(block.get("source"), dict) and block["source"].get("type") == "text":
        return str(block["source"].get("data", ""))
    raise bad_request(f"{where}: content blocks of type {kind!r} cannot be rendered for this model (it reads text): "
                      "send text, tool_use and tool_result blocks")


def _text(content: Any, where: str) -> str:
    """A content value (a string or blocks) as text; blocks joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_request(f"{where}: content must be a string or a list of content blocks")
    parts = []
    for block in content:
        if not isinstance(block, dict):
            raise bad_request(f"{where}: each content block must be an object")
        if block.get("type") == "redacted_thinking":
            continue
        parts.append(_block_text(block, where))
    return "\n".join(parts)


def _user_messages(content: Any, where: str) -> list[dict[str, Any]]:
    """A user turn: its ``tool_result`` blocks as tool messages, its text as user messages,
    in their order (consecutive text blocks make one message)."""
    if not isinstance(content, list):
        return [{"role": "user", "content": _text(content, where)}]
    out: list[dict[str, Any]] = []
    texts: list[str] = []

    def flush() -> None:
        if texts:
            out.append({"role": "user", "content": "\n".join(texts)})
            texts.clear()

    for block in content:
        if not isinstance(block, dict):
            raise bad_request(f"{where}: each content block must be an object")
        if block.get("type") == "tool_result":
            flush()
            out.append({"role": "tool", "tool_call_id": block.get("tool_use_id"),
                        "content": _text(block.get("content"), f"{where}.tool_result")})
        elif block.get("type") != "redacted_thinking":
            texts.append(_block_text(block, where))
    flush()
    return out


def _assistant_message(content: Any, where: str) -> dict[str, Any]:
    """An assistant turn: its text (and thinking) as content, its ``tool_use`` blocks as calls."""
    if not isinstance(content, list):
        return {"role": "assistant", "content": _text(content, where)}
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, dict):
            raise bad_request(f"{where}: each content block must be an object")
        if block.get("type") == "tool_use":
            if not isinstance(block.get("name"), str) or not block["name"]:
                raise bad_request(f"{where}: a tool_use block needs a 'name'")
            calls.append({"id": block.get("id"), "type": "function",
                          "function": {"name": block.get("name"),
                                       "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False)}})
        elif block.get("type") != "redacted_thinking":
            texts.append(_block_text(block, where))
    message: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _tools(tools: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Function tools for the prompt, and the tools dropped (``type`` or ``type:name``)."""
    if tools is None:
        return [], []
    if not isinstance(tools, list):
        raise bad_request("tools: must be a list of tool definitions")
    out, dropped = [], []
    for tool in tools:
        if not isinstance(tool, dict):
            raise bad_request("tools: each tool must be an object")
        kind = tool.get("type") or "custom"
        if kind != "custom" or not isinstance(tool.get("input_schema"), dict):
            dropped.append(f"{kind}:{tool['name']}" if tool.get("name") else str(kind))
            continue
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            raise bad_request("tools: each tool needs a 'name'")
        fn = {"name": tool["name"], "parameters": tool["input_schema"]}
        if tool.get("description"):
            fn["description"] = tool["description"]
        out.append({"type": "function", "function": fn})
    return out, dropped


def _tool_choice(choice: Any, chat: dict[str, Any]) -> None:
    if choice is None:
        return
    if not isinstance(choice, dict):
        raise bad_request("tool_choice: must be an object such as {'type': 'auto'}")
    kind = choice.get("type")
    if kind == "auto":
        chat["tool_choice"] = "auto"
    elif kind == "any":
        chat["tool_choice"] = "required"
    elif kind == "none":
        chat["tool_choice"] = "none"
    elif kind == "tool":
        chat["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    else:
        raise bad_request(f"tool_choice: type {kind!r} is not one of 'auto', 'any', 'tool', 'none'")
    if choice.get("disable_parallel_tool_use"):
        chat["parallel_tool_calls"] = False


def chat_request(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The chat body for a Messages request, and the tools it drops (see the module doc)."""
    messages: list[dict[str, Any]] = []
    system = _text(body.get("system"), "system")
    if system:
        messages.append({"role": "system", "content": system})
    given = body.get("messages")
    if not isinstance(given, list) or not given:
        raise bad_request("messages: must be a non-empty list of {'role', 'content'} objects")
    for i, m in enumerate(given):
        where = f"messages.{i}"
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant", "system"):
            raise bad_request(f"{where}: each message needs a role of 'user', 'assistant' or 'system'")
        if m["role"] == "system":  # mid-conversation system text (Claude Code sends some)
            messages.append({"role": "system", "content": _text(m.get("content"), where)})
        elif m["role"] == "user":
            messages += _user_messages(m.get("content"), where)
        else:
            messages.append(_assistant_message(m.get("content"), where))
    chat: dict[str, Any] = {out: body[key] for key, out in _SAMPLING.items() if body.get(key) is not None}
    chat["messages"] = messages
    tools, dropped = _tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
        _tool_choice(body.get("tool_choice"), chat)
    elif isinstance(body.get("tool_choice"), dict) and body["tool_choice"].get("type") in ("any", "tool"):
        raise bad_request("tool_choice: forcing a tool needs tools the model can call")
    max_tokens = body.get("max_tokens")
    if max_tokens is not None:
        if type(max_tokens) is not int or max_tokens < 1:
            raise bad_request(f"max_tokens: must be a positive integer, got {max_tokens!r}")
        chat["max_tokens"] = max_tokens
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise bad_request("stop_sequences: must be a list of strings")
        if stops:
            chat["stop"] = stops
    return chat, dropped


def usage_of(chat_usage: Any) -> dict[str, Any]:
    """Messages ``usage`` from chat ``usage`` (no prompt cache: its counts are 0)."""
    usage = chat_usage if isinstance(chat_usage, dict) else {}
    return {"input_tokens": int(usage.get("prompt_tokens") or 0), "output_tokens": int(usage.get("completion_tokens")
                                                                                      or 0),
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "service_tier": "standard"}


def stop_of(finish_reason: Any, stop_sequences: Sequence[str], matched: str | None,
            sampled_text: Callable[[], str | None]) -> tuple[str, str | None]:
    """``stop_reason`` and ``stop_sequence`` for a chat ``finish_reason``. A ``stop`` that
    ended on one of ``stop_sequences`` is ``stop_sequence``: the engine's ``matched``
    string (vLLM's ``stop_reason``), else the first of them in ``sampled_text()`` (the
    sampled tokens decoded: the model stops at the first one it writes)."""
    if finish_reason == "length":
        return "max_tokens", None
    if finish_reason == "tool_calls":
        return "tool_use", None
    if stop_sequences:
        if matched in stop_sequences:
            return "stop_sequence", matched
        text = sampled_text()
        if text:
            hits = [(text.find(s), s) for s in stop_sequences if s and s in text]
            if hits:
                return "stop_sequence", min(hits)[1]
    return "end_turn", None


def _tool_input(arguments: Any) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments.strip() else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def content_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of a chat answer's message."""
    blocks: list[dict[str, Any]] = []
    if message.get("content"):
        blocks.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        blocks.append({"type": "tool_use", "id": tool_use_id(call.get("id")), "name": fn.get("name") or "",
                       "input": _tool_input(fn.get("arguments"))})
    return blocks


def message_object(body: dict[str, Any], message_id: str, *, content: list[dict[str, Any]],
                   stop_reason: str | None, stop_sequence: str | None, usage: dict[str, Any]) -> dict[str, Any]:
    """A Message object answering ``body`` (its ``model`` echoed, as Anthropic does)."""
    return {"id": message_id, "type": "message", "role": "assistant", "model": body.get("model") or "",
            "content": content, "stop_reason": stop_reason, "stop_sequence": stop_sequence, "usage": usage}
