"""Streaming with tool calls: send text as soon as it cannot be part of a call, hold
the rest, and at the end send either the held text or the calls as tool-call deltas.

A call's JSON is only known to be a call once it is complete (``{"name": ...`` may be
prose to a parser that wants the whole answer to be calls), so calls are sent whole at
the end — one delta per call, with its index, id, name and all its arguments — which
every OpenAI client reassembles like vLLM's finer-grained deltas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentbolt.engines.tools.base import ParsedOutput, ToolParser

__all__ = ["ToolCallStream", "call_deltas"]


@dataclass
class ToolCallStream:
    """Feed the model's text piece by piece; :meth:`feed` returns the content that can
    be sent now, :meth:`finish` the rest of the content and the calls.

    ``prefix`` is text the answer was forced to start with (it is part of the output
    the parser reads, but the agent never sees it as content).
    """

    parser: ToolParser | None
    prefix: str = ""
    _text: str = field(default="", init=False)
    _sent: int = field(default=0, init=False)

    def feed(self, piece: str) -> str:
        self._text += piece
        if self.parser is None:
            out, self._sent = self._text[self._sent:], len(self._text)
            return out
        if self.prefix:
            return ""  # a forced call: nothing is content until the end says otherwise
        safe = self.parser.call_start(self._text)
        if safe <= self._sent:
            return ""
        out, self._sent = self._text[self._sent:safe], safe
        return out

    def finish(self) -> tuple[str, ParsedOutput]:
        """``(content still to send, the whole parsed output)``."""
        if self.parser is None:
            return self._text[self._sent:], ParsedOutput(self._text)
        full = self.prefix + self._text
        parsed = self.parser.parse(full)
        if not parsed.calls:
            parsed = ParsedOutput(full)
            return full[self._sent:] if not self.prefix else full, parsed
        content = parsed.content or ""
        sent = self._text[: self._sent]
        rest = content[len(sent):] if content.startswith(sent) else ""
        return rest, parsed


def call_deltas(parsed: ParsedOutput) -> list[dict[str, Any]]:
    """The ``delta.tool_calls`` entries that send ``parsed.calls`` whole."""
    return [
        {"index": i, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for i, c in enumerate(parsed.calls)
    ]
