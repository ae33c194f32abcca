"""MCP servers as an agent's tools (the official ``mcp`` package: ``pip install 'agentbolt[mcp]'``).

* :func:`connect` — an MCP server's tools (:class:`MCPTools`), stdio or streamable HTTP;
  inside a rollout every call is an ``execute_tool`` span;
* :class:`StdioServer` — started per connection (so per rollout), :class:`HttpServer` — a URL;
* :func:`serve_http` — start a streamable-HTTP server for a block (per rollout).

See docs/tasks-and-rewards.md.
"""

from agentbolt.mcp.process import serve_http
from agentbolt.mcp.servers import HttpServer, ServerSpec, StdioServer, Transport
from agentbolt.mcp.tools import MCPToolError, MCPTools, ToolResult, ToolSpec, UnknownToolError, connect

__all__ = ["connect", "MCPTools", "ToolSpec", "ToolResult", "MCPToolError", "UnknownToolError", "StdioServer",
           "HttpServer", "ServerSpec", "Transport", "serve_http"]
