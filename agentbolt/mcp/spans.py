"""A tool call as a span: OpenTelemetry's GenAI ``execute_tool`` span, with MCP's names.

``execute_tool <tool>`` with ``gen_ai.operation.name = execute_tool``, ``gen_ai.tool.name``,
``gen_ai.tool.call.arguments`` / ``.result`` (JSON), ``mcp.method.name = tools/call`` and
the server's name and transport; an error status when the call raised, and
``agentbolt.mcp.is_error`` when the tool reported failure. The dashboard's waterfall shows
it as a tool span between the model calls around it. Outside a rollout nothing is recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from agentbolt import semconv
from agentbolt.tracing.context import current_context
from agentbolt.tracing.emitters import to_json

__all__ = ["ToolSpan", "tool_span"]


class ToolSpan:
    """The open span of one tool call (a no-op outside a rollout)."""

    def __init__(self, span: trace.Span | None) -> None:
        self._span = span

    def result(self, value: Any, *, is_error: bool) -> None:
        if self._span is not None:
            self._span.set_attribute(semconv.GEN_AI_TOOL_CALL_RESULT, to_json(value))
            self._span.set_attribute(semconv.MCP_IS_ERROR, is_error)
            if is_error:
                self._span.set_status(Status(StatusCode.ERROR, "the tool reported an error"))


@contextmanager
def tool_span(name: str, arguments: Any, *, server: str, transport: str, call_id: str | None = None,
              description: str | None = None) -> Iterator[ToolSpan]:
    """Record the block as the call of tool ``name`` with ``arguments``."""
    ctx = current_context()
    if ctx is None:
        yield ToolSpan(None)
        return
    attrs: dict[str, Any] = {semconv.GEN_AI_OPERATION: semconv.EXECUTE_TOOL, semconv.GEN_AI_TOOL_NAME: name,
                             semconv.GEN_AI_TOOL_CALL_ARGUMENTS: to_json(arguments), semconv.MCP_METHOD: "tools/call",
                             semconv.MCP_SERVER: server, semconv.MCP_TRANSPORT: transport}
    if call_id:
        attrs[semconv.GEN_AI_TOOL_CALL_ID] = call_id
    if description:
        attrs[semconv.GEN_AI_TOOL_DESCRIPTION] = description[:1000]
    with ctx.tracer.otel_tracer.start_as_current_span(f"{semconv.EXECUTE_TOOL} {name}", attributes=attrs,
                                                      record_exception=True, set_status_on_exception=True) as span:
        yield ToolSpan(span)
