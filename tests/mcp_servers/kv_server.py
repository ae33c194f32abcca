"""A key-value MCP server for the tests (stdio, or streamable HTTP with --http --port N):
its state lives in the process, so a server started per rollout keeps rollouts apart."""

from __future__ import annotations

import argparse

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("kv", log_level="WARNING")
_data: dict[str, str] = {}


@server.tool(description="Store value under key.")
def put(key: str, value: str) -> str:
    _data[key] = value
    return "ok"


@server.tool(description="The value stored under key.")
def get(key: str) -> str:
    if key not in _data:
        raise ToolError(f"no key {key!r}")
    return _data[key]


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--http", action="store_true")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args()
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.port)
    else:
        server.run("stdio")
