"""Where an MCP server is: a command to start (stdio) or a URL (streamable HTTP).

A :class:`StdioServer` is started by :func:`~agentbolt.mcp.connect` itself, as a child
process speaking MCP over its stdin/stdout, and stopped when the connection closes: opened
inside a rollout, that is one server per rollout (its state — a key-value store, a
scratch directory — belongs to that rollout alone). An :class:`HttpServer` is one already
listening; :func:`~agentbolt.mcp.serve_http` starts one per rollout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["HttpServer", "ServerSpec", "StdioServer", "Transport"]

Transport = Literal["stdio", "streamable-http"]


@dataclass(frozen=True)
class StdioServer:
    """``command args...`` started per connection. ``env`` is its whole environment
    beyond the MCP SDK's safe defaults (PATH, HOME...): the runner's secrets are not
    passed on unless listed."""

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None

    transport: Transport = field(default="stdio", init=False)

    @property
    def label(self) -> str:
        return " ".join([self.command, *self.args])


@dataclass(frozen=True)
class HttpServer:
    """A streamable-HTTP MCP endpoint, e.g. ``http://127.0.0.1:8000/mcp``."""

    url: str

    transport: Transport = field(default="streamable-http", init=False)

    @property
    def label(self) -> str:
        return self.url


ServerSpec = StdioServer | HttpServer
