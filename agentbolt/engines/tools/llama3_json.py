"""``llama3_json``: Llama 3.x's JSON calls — the whole answer is one or more JSON objects
``{"name": ..., "parameters": {...}}`` (or ``"arguments"``), separated by ``;``, maybe
after ``<|python_tag|>``.

::

    {"name": "get_weather", "parameters": {"city": "Paris"}}

An answer that does not start with ``{`` (or the tag) is content; one that does but
does not read as calls all the way to its end is content too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentbolt.engines.tools.base import (
    ParsedCall,
    ParsedOutput,
    ToolParser,
    call_arguments,
    call_name,
    json_call,
)

__all__ = ["Llama3JsonParser"]

_TAG = "<|python_tag|>"
_DECODER = json.JSONDecoder()


class Llama3JsonParser(ToolParser):
    name = "llama3_json"

    def parse(self, text: str) -> ParsedOutput:
        body = text.strip()
        if body.startswith(_TAG):
            body = body[len(_TAG):].lstrip()
        if not body.startswith("{"):
            return ParsedOutput(text)
        calls: list[ParsedCall] = []
        pos = 0
        while pos < len(body):
            try:
                obj, end = _DECODER.raw_decode(body, pos)
            except json.JSONDecodeError:
                return ParsedOutput(text)
            call = json_call(obj, ("parameters", "arguments"))
            if call is None:
                return ParsedOutput(text)
            calls.append(call)
            pos = end
            while pos < len(body) and body[pos] in " \t\r\n;":
                pos += 1
        return ParsedOutput(None, calls)

    def call_start(self, text: str) -> int:
        body = text.lstrip()
        if not body:
            return 0  # nothing but whitespace yet: a call may still come
        lead = len(text) - len(body)
        if body.startswith(("{", _TAG)) or _TAG.startswith(body):
            return lead
        return len(text)

    def format_calls(self, calls: Sequence[dict[str, Any]]) -> str:
        return "; ".join(
            json.dumps({"name": call_name(c), "parameters": call_arguments(c)}, ensure_ascii=False) for c in calls
        )

    def forced_prefix(self, name: str | None) -> str:
        if name is None:
            return '{"name": "'
        return f'{{"name": {json.dumps(name, ensure_ascii=False)}, "parameters": '
