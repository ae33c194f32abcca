"""``xlam``: a JSON list of calls, in ``<tool_call>`` tags or bare — the format of
Salesforce's xLAM / APIGen function-calling data, which SmolLM2 was trained on (its
model card's function-calling prompt asks for exactly this)::

    <tool_call>[{"name": "calculate", "arguments": {"expression": "3 * 4 + 2"}}]</tool_call>

SmolLM2-135M-Instruct writes it when its prompt shows it (a worked example in earlier
turns); its chat template has no tool support, so the gateway describes the tools in the
system prompt and writes earlier calls into the assistant turns in this format. A tag may
hold one object instead of a list; several tags are read in order; an empty list is no
call (the answer is then text).
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

__all__ = ["XLAMParser"]

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)


def _calls_of(body: str) -> list[ParsedCall] | None:
    """The calls in one JSON list (or object); None when it is not that."""
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        return None
    items = value if isinstance(value, list) else [value]
    calls = [json_call(item) for item in items]
    if any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


class XLAMParser(ToolParser):
    name = "xlam"

    def parse(self, text: str) -> ParsedOutput:
        stripped = text.strip()
        if stripped.startswith("["):
            calls = _calls_of(stripped)
            return ParsedOutput(None, calls) if calls else ParsedOutput(text)
        start = text.find(_OPEN)
        if start < 0:
            return ParsedOutput(text)
        found: list[ParsedCall] = []
        for match in _CALL.finditer(text, start):
            calls = _calls_of(match.group(1).strip())
            if calls is None:
                return ParsedOutput(text)
            found += calls
        if not found or _CALL.sub("", text[start:]).strip():
            return ParsedOutput(text)
        return ParsedOutput(text[:start] if text[:start].strip() else None, found)

    def call_start(self, text: str) -> int:
        body = text.lstrip()
        if not body or body.startswith("["):
            return len(text) - len(body)
        return partial_marker_at(text, _OPEN)

    def format_calls(self, calls: Sequence[dict[str, Any]]) -> str:
        listed = [{"name": call_name(c), "arguments": call_arguments(c)} for c in calls]
        return f"{_OPEN}{json.dumps(listed, ensure_ascii=False)}{_CLOSE}"

    def forced_prefix(self, name: str | None) -> str:
        if name is None:
            return _OPEN + '[{"name": "'
        return f'{_OPEN}[{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": '
