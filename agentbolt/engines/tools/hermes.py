"""``hermes``: calls in ``<tool_call>`` tags, one JSON object each (Hermes, Qwen 2.5/3).

::

    Let me look that up.
    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

Text before the first tag is the content. A last tag left open (the model stopped at
its end-of-turn token) is read too. One unreadable call makes the whole output text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from agentbolt.engines.tools.base import (
    ParsedCall,
    ParsedOutput,
    ToolParser,
    call_arguments,
    call_name,
    json_call,
    partial_marker_at,
)

__all__ = ["HermesParser"]

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)


class HermesParser(ToolParser):
    name = "hermes"

    def parse(self, text: str) -> ParsedOutput:
        start = text.find(_OPEN)
        if start < 0:
            return ParsedOutput(text)
        calls: list[ParsedCall] = []
        for match in _CALL.finditer(text, start):
            body = match.group(1).strip()
            try:
                call = json_call(json.loads(body))
            except json.JSONDecodeError:
                call = None
            if call is None:
                return ParsedOutput(text)
            calls.append(call)
        rest = _CALL.sub("", text[start:]).strip()
        if rest:  # prose between or after the calls: not a clean call, keep the text
            return ParsedOutput(text)
        return ParsedOutput(text[:start] if text[:start].strip() else None, calls)

    def call_start(self, text: str) -> int:
        return partial_marker_at(text, _OPEN)

    def format_calls(self, calls: Sequence[dict[str, Any]]) -> str:
        return "\n".join(
            f"{_OPEN}\n{json.dumps({'name': call_name(c), 'arguments': call_arguments(c)}, ensure_ascii=False)}"
            f"\n{_CLOSE}"
            for c in calls
        )

    def forced_prefix(self, name: str | None) -> str:
        if name is None:
            return _OPEN + "\n"
        return f'{_OPEN}\n{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": '
