"""Tool-call parsers by name (vLLM's ``--tool-call-parser`` names), and the default one
for a model, read from its chat template."""

from __future__ import annotations

from agentbolt.engines.tools.base import ToolParser
from agentbolt.engines.tools.hermes import HermesParser
from agentbolt.engines.tools.llama3_json import Llama3JsonParser
from agentbolt.engines.tools.xlam import XLAMParser

__all__ = ["PARSERS", "default_parser_name", "get_parser", "template_renders_tools"]

PARSERS: dict[str, type[ToolParser]] = {p.name: p for p in (HermesParser, Llama3JsonParser, XLAMParser)}


def get_parser(name: str) -> ToolParser:
    """The parser called ``name``; a ValueError lists the known names."""
    try:
        return PARSERS[name]()
    except KeyError:
        raise ValueError(f"unknown tool-call parser {name!r}: choose one of {sorted(PARSERS)}") from None


def template_renders_tools(template: str | None) -> bool:
    """Whether a chat template reads ``tools`` (else the gateway describes them itself)."""
    return template is not None and "tools" in template


def default_parser_name(template: str | None) -> str:
    """The parser a chat template's model writes calls for: ``<tool_call>`` tags →
    ``hermes``, Llama 3's ``<|python_tag|>`` / ``"parameters"`` → ``llama3_json``,
    SmolLM's (no tool support; trained on xLAM-style data) → ``xlam``; else ``hermes``,
    the most common format, which the gateway then explains in the system prompt."""
    text = template or ""
    if "<tool_call>" in text:
        return "hermes"
    if "<|python_tag|>" in text or ('"parameters"' in text and "<|eot_id|>" in text):
        return "llama3_json"
    if "SmolLM" in text:
        return "xlam"
    return "hermes"
