"""``serve_http``: start a streamable-HTTP MCP server for the length of a block (one per rollout).

::

    async with serve_http(["python", "kv_server.py", "--port", "{port}"]) as server:
        async with connect(server) as tools: ...

``{port}`` in the command becomes a free port of 127.0.0.1; the block starts once the
port accepts connections, and the server is stopped (terminated, then killed) at its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

from agentbolt.mcp.servers import HttpServer
from agentbolt.mcp.tools import MCPToolError

__all__ = ["serve_http"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@asynccontextmanager
async def serve_http(command: Sequence[str], *, path: str = "/mcp", env: Mapping[str, str] | None = None,
                     ready_timeout: float = 30.0) -> AsyncIterator[HttpServer]:
    """Run ``command`` (``{port}`` substituted) and yield its endpoint."""
    port = _free_port()
    argv = [part.replace("{port}", str(port)) for part in command]
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **dict(env or {})})
    try:
        await _wait_ready(process, port, ready_timeout, argv)
        yield HttpServer(f"http://127.0.0.1:{port}{path}")
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 5.0)
            except TimeoutError:
                process.kill()
                await process.wait()


async def _wait_ready(process: asyncio.subprocess.Process, port: int, timeout: float, argv: list[str]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if process.returncode is not None:
            err = (await process.stderr.read()).decode(errors="replace")[-2000:] if process.stderr else ""
            raise MCPToolError(f"the MCP server {' '.join(argv)!r} exited with code {process.returncode} before "
                               f"listening on port {port}: {err.strip() or 'no stderr'}")
        with contextlib.suppress(OSError):
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            await writer.wait_closed()
            return
        if loop.time() > deadline:
            raise MCPToolError(f"the MCP server {' '.join(argv)!r} did not listen on port {port} within {timeout:g} s")
        await asyncio.sleep(0.05)
