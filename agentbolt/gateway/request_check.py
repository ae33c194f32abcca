"""The shape of a model call's body, checked before any engine sees it.

A body that is JSON but not a request (``"messages": "hi"``, ``"max_tokens": "lots"``)
is the caller's mistake: it gets a ``400`` naming the field, in OpenAI's error shape,
instead of whatever the engine does with it (a 500, a dropped connection the gateway
could only report as a ``502`` about the engine). Only the shape is checked — types of
the fields OpenAI's API defines, and that the call has something to complete — not the
values an engine may refuse on its own terms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

__all__ = ["MalformedRequestError", "check_request"]


class MalformedRequestError(ValueError):
    """The body is not a well-formed request; ``param`` names the field."""

    def __init__(self, message: str, param: str | None) -> None:
        super().__init__(message)
        self.param = param


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_str_or_strs(v: Any) -> bool:
    return isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))


_Check = tuple[Callable[[Any], bool], str]
_COMMON: dict[str, _Check] = {
    "model": (lambda v: isinstance(v, str), "a string"),
    "max_tokens": (lambda v: _is_int(v) and v >= 0, "a non-negative integer"),
    "max_completion_tokens": (lambda v: _is_int(v) and v >= 0, "a non-negative integer"),
    "n": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "temperature": (_is_number, "a number"),
    "top_p": (_is_number, "a number"),
    "presence_penalty": (_is_number, "a number"),
    "frequency_penalty": (_is_number, "a number"),
    "seed": (_is_int, "an integer"),
    "stream": (lambda v: isinstance(v, bool), "true or false"),
    "stop": (lambda v: _is_str_or_strs(v), "a string or a list of strings"),
    "stream_options": (lambda v: isinstance(v, dict), "an object"),
}
_CHAT: dict[str, _Check] = {
    "logprobs": (lambda v: isinstance(v, bool), "true or false"),
    "top_logprobs": (lambda v: _is_int(v) and v >= 0, "a non-negative integer"),
    "tools": (lambda v: isinstance(v, list) and all(isinstance(t, dict) for t in v), "a list of objects"),
    "tool_choice": (lambda v: isinstance(v, (str, dict)), "a string or an object"),
    "response_format": (lambda v: isinstance(v, dict), "an object"),
}
_COMPLETIONS: dict[str, _Check] = {
    "logprobs": (lambda v: _is_int(v) and v >= 0, "a non-negative integer"),
    "echo": (lambda v: isinstance(v, bool), "true or false"),
}


def check_request(kind: Literal["chat", "completions"], body: dict[str, Any]) -> None:
    """:class:`MalformedRequestError` unless ``body`` is shaped like a ``kind`` request."""
    for name, (ok, what) in {**_COMMON, **(_CHAT if kind == "chat" else _COMPLETIONS)}.items():
        if name in body and body[name] is not None and not ok(body[name]):
            raise MalformedRequestError(f"'{name}' must be {what}, got {_preview(body[name])}", name)
    if kind == "chat":
        _check_messages(body.get("messages"))
    else:
        prompt = body.get("prompt")
        ids = isinstance(prompt, list) and (all(_is_int(x) for x in prompt) or all(
            isinstance(p, list) and all(_is_int(x) for x in p) for p in prompt))
        if not (_is_str_or_strs(prompt) or ids):
            raise MalformedRequestError(
                f"'prompt' must be a string, a list of strings or a list of token ids, got {_preview(prompt)}",
                "prompt",
            )


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise MalformedRequestError(f"'messages' must be a non-empty list of messages, got {_preview(messages)}",
                                    "messages")
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise MalformedRequestError(f"'{where}' must be an object with a role, got {_preview(message)}", where)
        if not isinstance(message.get("role"), str):
            raise MalformedRequestError(f"'{where}.role' must be a string, got {_preview(message.get('role'))}",
                                        f"{where}.role")
        content = message.get("content")
        if content is not None and not isinstance(content, str) and not (
            isinstance(content, list) and all(isinstance(part, dict) for part in content)
        ):
            raise MalformedRequestError(
                f"'{where}.content' must be a string, a list of content parts or null, got {_preview(content)}",
                f"{where}.content",
            )


def _preview(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
