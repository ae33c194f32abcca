"""``connect``: an MCP server's tools for an agent, every call recorded as a span.

::

    async with agentbolt.mcp.connect(StdioServer("python", ["calc_server.py"])) as tools:
        tools.openai_tools()                       # the tools as Chat Completions `tools=`
        result = await tools.call("evaluate", {"expression": "41 * 23 - 15"})
        result.text                                # "928"

Inside a rollout each call is an ``execute_tool`` span (:mod:`agentbolt.mcp.spans`), so
the trajectory a judge or the dashboard sees holds what the tool really returned.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment

from agentbolt.mcp.servers import ServerSpec, StdioServer
from agentbolt.mcp.spans import tool_span

__all__ = ["MCPToolError", "MCPTools", "ToolResult", "ToolSpec", "UnknownToolError", "connect"]


class MCPToolError(RuntimeError):
    """The MCP server could not be reached or broke the protocol (not a tool's own error,
    which is a :class:`ToolResult` with ``is_error``)."""


class UnknownToolError(MCPToolError):
    """The agent asked for a tool the server does not have."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the server offers."""

    name: str
    description: str
    input_schema: dict[str, Any]

    def openai(self) -> dict[str, Any]:
        """As a Chat Completions function tool."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.input_schema}}


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returned: its text content blocks joined, its structured content, and
    whether it reported an error (a tool's failure is a result the agent may read)."""

    text: str
    structured: Any = None
    is_error: bool = False
    blocks: list[dict[str, Any]] = field(default_factory=list)


class MCPTools:
    """The tools of one connected MCP server (made by :func:`connect`)."""

    def __init__(self, client: Client, spec: ServerSpec, tools: list[ToolSpec], server_name: str) -> None:
        self._client = client
        self.spec = spec
        self.tools = tools
        self.server_name = server_name

    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    def openai_tools(self) -> list[dict[str, Any]]:
        return [t.openai() for t in self.tools]

    async def call(self, name: str, arguments: Mapping[str, Any] | None = None, *,
                   call_id: str | None = None) -> ToolResult:
        """Call tool ``name`` (recorded as a span inside a rollout)."""
        spec = next((t for t in self.tools if t.name == name), None)
        if spec is None:
            raise UnknownToolError(f"the MCP server {self.server_name!r} has no tool {name!r}; "
                                   f"it has {', '.join(self.names()) or 'none'}")
        args = dict(arguments or {})
        with tool_span(name, args, server=self.server_name, transport=self.spec.transport, call_id=call_id,
                       description=spec.description) as span:
            try:
                raw = await self._client.call_tool(name, args)
            except Exception as exc:  # noqa: BLE001 — the SDK raises its own and transport errors; name the server
                raise MCPToolError(f"calling {name!r} on the MCP server {self.server_name!r} failed: "
                                   f"{type(exc).__name__}: {exc}") from exc
            blocks = [b.model_dump(mode="json", exclude_none=True) for b in raw.content]
            text = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
            result = ToolResult(text, raw.structured_content, bool(raw.is_error), blocks)
            span.result({"text": text, **({"structured": result.structured} if result.structured is not None else {})},
                        is_error=result.is_error)
        return result

    async def call_openai(self, tool_call: Mapping[str, Any]) -> dict[str, Any]:
        """Run a Chat Completions ``tool_call`` (its ``function.arguments`` JSON) and
        return the ``{"role": "tool", ...}`` message that answers it. Arguments that are
        not a JSON object become an error result, as a model's mistake should."""
        function = tool_call.get("function") or {}
        call_id = str(tool_call.get("id", ""))
        try:
            arguments = orjson.loads(function.get("arguments") or "{}")
        except orjson.JSONDecodeError:
            arguments = None
        if not isinstance(arguments, dict):
            text = f"error: the arguments must be a JSON object, got {function.get('arguments')!r}"
            return {"role": "tool", "tool_call_id": call_id, "content": text}
        result = await self.call(str(function.get("name", "")), arguments, call_id=call_id)
        return {"role": "tool", "tool_call_id": call_id, "content": result.text}


@asynccontextmanager
async def connect(spec: ServerSpec, *, timeout: float = 60.0) -> AsyncIterator[MCPTools]:
    """Connect to ``spec`` (starting it, for a :class:`StdioServer`) and list its tools;
    the connection (and a started server) closes with the block."""
    target: StdioServerParameters | str
    if isinstance(spec, StdioServer):
        target = StdioServerParameters(command=spec.command, args=list(spec.args), cwd=spec.cwd,
                                       env={**get_default_environment(), **dict(spec.env)})
    else:
        target = spec.url
    try:
        client = Client(target, read_timeout_seconds=timeout)
        await client.__aenter__()
    except Exception as exc:  # noqa: BLE001 — whatever failed, the fix starts at the server's command or URL
        raise MCPToolError(f"could not connect to the MCP server {spec.label!r} ({type(exc).__name__}: {exc}): "
                           "does it start and speak MCP on its "
                           f"{'stdin/stdout' if spec.transport == 'stdio' else 'URL'}?") from exc
    try:
        listed = await client.list_tools()
        info = client.server_info
        tools = [ToolSpec(t.name, t.description or "", dict(t.input_schema or {})) for t in listed.tools]
        yield MCPTools(client, spec, tools, info.name if info is not None else spec.label)
    finally:
        await client.__aexit__(None, None, None)
