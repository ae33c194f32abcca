"""Tool calls in model text: parsers chosen by name, and streaming with held-back calls.

Engines that take token ids leave templating and tool-call parsing to agentbolt (see
:mod:`agentbolt.engines.token_chat`); these parsers turn the model's text into OpenAI
``tool_calls``. Unreadable output stays text, never an error or a guess.
"""

from agentbolt.engines.tools.base import (
    ParsedCall,
    ParsedOutput,
    ToolParser,
    new_call_id,
    tool_functions,
)
from agentbolt.engines.tools.registry import (
    PARSERS,
    default_parser_name,
    get_parser,
    template_renders_tools,
)
from agentbolt.engines.tools.stream import ToolCallStream, call_deltas

__all__ = [
    "PARSERS",
    "ParsedCall",
    "ParsedOutput",
    "ToolCallStream",
    "ToolParser",
    "call_deltas",
    "default_parser_name",
    "get_parser",
    "new_call_id",
    "template_renders_tools",
    "tool_functions",
]
