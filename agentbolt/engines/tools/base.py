"""What a tool-call parser is: model text in, ``content`` + ``tool_calls`` out.

A parser knows one way models write function calls (Hermes' ``<tool_call>`` tags,
Llama 3's bare JSON, ...). It never raises and never guesses: text it cannot read as
calls comes back whole as ``content`` with no calls. Besides parsing it can say where in
a stream a call might begin (so streamed text is held back from there), write calls the
way the model does (for chat templates that cannot render ``tool_calls`` themselves),
describe tools in a system prompt (for templates that ignore ``tools``), and give the
text that forces a call (``tool_choice`` ``required`` or a named function).
"""

from __future__ import annotations

import abc
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "ParsedCall",
    "ParsedOutput",
    "ToolParser",
    "call_arguments",
    "call_name",
    "json_call",
    "new_call_id",
    "partial_marker_at",
    "tool_functions",
]


def new_call_id() -> str:
    """An OpenAI-style tool-call id (``call_`` + 24 hex digits)."""
    return "call_" + uuid.uuid4().hex[:24]


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """One function call: its name and its arguments as a JSON object text."""

    name: str
    arguments: str
    id: str = field(default_factory=new_call_id)

    def as_openai(self) -> dict[str, Any]:
        """The ``message.tool_calls[i]`` entry."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True)
class ParsedOutput:
    """What the model said: ``content`` (None when only calls) and its ``calls``."""

    content: str | None
    calls: list[ParsedCall] = field(default_factory=list)


def tool_functions(tools: Sequence[Any] | None) -> list[dict[str, Any]]:
    """The ``function`` objects of OpenAI ``tools`` (``{"type": "function", "function": {...}}``)."""
    out = []
    for tool in tools or ():
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict):
            out.append(tool["function"])
    return out


def partial_marker_at(text: str, marker: str) -> int:
    """Where ``marker`` starts in ``text``, or where a prefix of it ends ``text`` (a
    marker still arriving in a stream); ``len(text)`` when neither."""
    found = text.find(marker)
    if found >= 0:
        return found
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:size]):
            return len(text) - size
    return len(text)


def json_call(obj: Any, argument_keys: Sequence[str] = ("arguments",)) -> ParsedCall | None:
    """A call from a decoded ``{"name": ..., "arguments": {...}}`` object, else None."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    args: Any = {}
    for key in argument_keys:
        if key in obj:
            args = obj[key]
            break
    if isinstance(args, str):  # some models write the arguments as a JSON string
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None
    if not isinstance(args, dict):
        return None
    return ParsedCall(name=obj["name"], arguments=json.dumps(args, ensure_ascii=False))


class ToolParser(abc.ABC):
    """One model family's way of writing function calls (see the module doc)."""

    #: the name used to choose it (vLLM's ``--tool-call-parser`` names)
    name: ClassVar[str]

    @abc.abstractmethod
    def parse(self, text: str) -> ParsedOutput:
        """The calls in ``text``; ``ParsedOutput(text, [])`` when it holds none (or
        anything unreadable)."""

    @abc.abstractmethod
    def call_start(self, text: str) -> int:
        """Index in a partial output from which a call may begin (``len(text)``: none
        can yet); streamed text before it can be sent as content at once."""

    @abc.abstractmethod
    def format_calls(self, calls: Sequence[dict[str, Any]]) -> str:
        """The text in which the model writes these OpenAI ``tool_calls``."""

    @abc.abstractmethod
    def forced_prefix(self, name: str | None) -> str:
        """The start of an answer that is a call (of function ``name`` when given): put
        after the generation prompt to force a call."""

    def describe_tools(self, tools: Sequence[dict[str, Any]]) -> str:
        """A system-prompt section offering ``tools`` (for templates that ignore them)."""
        listing = "\n".join(json.dumps(f, ensure_ascii=False) for f in tool_functions(tools))
        example = self.format_calls(
            [{"type": "function", "function": {"name": "<function name>", "arguments": '{"<argument>": "<value>"}'}}]
        )
        return (
            "You may call one or more functions to help with the user's request. The functions are:\n"
            f"<tools>\n{listing}\n</tools>\n"
            f"To call functions, answer with exactly:\n{example}"
        )


def call_arguments(call: dict[str, Any]) -> Any:
    """A ``tool_calls[i]`` entry's arguments as a JSON value (its text when not JSON)."""
    args = (call.get("function") or {}).get("arguments")
    if isinstance(args, str):
        try:
            return json.loads(args)
        except json.JSONDecodeError:
            return args
    return args if args is not None else {}


def call_name(call: dict[str, Any]) -> str:
    return str((call.get("function") or {}).get("name") or "")
