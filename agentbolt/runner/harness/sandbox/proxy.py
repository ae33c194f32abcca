"""The sandbox's only way out: a unix socket that forwards the attempt's own gateway
requests to the server, one request per connection, and refuses everything else.

The program's network namespace has nothing but loopback; the relay inside turns its
connections to ``127.0.0.1:<port>`` into connections to this socket. Here, outside the
sandbox, each request's target is checked: the attempt's gateway routes
(``/rollout/{rollout}/attempt/{attempt}/...``) and its own reward route pass; any other
path (the store's API, the dashboard, another rollout's reward) gets ``403`` and is
recorded as a ``network.denied`` sandbox event. ``Connection: close`` is forced, so every
request is seen here.

What one attempt may hold of the controller is bounded here, whatever the program does
(it can reach this socket directly, not only through the relay): ``max_connections``
requests in flight (more are answered ``503`` at once and counted as ``limit.connections``;
each holds two descriptors), ``head_timeout`` seconds to send a request's head (then
``408``), ``upload_idle_s`` seconds of silence in a body. The session's end cancels all.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Self
from urllib.parse import unquote, urlsplit

import orjson

__all__ = ["GatewayProxy"]

_HEAD_LIMIT = 65536
_HOP_HEADERS = re.compile(rb"^(connection|keep-alive|proxy-connection|host|upgrade)\s*:", re.IGNORECASE)


class GatewayProxy:
    """Serve ``socket_path``; forward allowed requests to ``server_url``.

    ``allowed_prefixes`` are paths a request's path may start with; ``allowed_exact``
    paths it may equal. ``on_denied(method, path)`` is called for each refused request."""

    def __init__(
        self,
        socket_path: Path,
        server_url: str,
        *,
        allowed_prefixes: list[str],
        allowed_exact: list[str],
        on_denied: Callable[[str, str], None],
        max_connections: int = 16,
        head_timeout: float = 30.0,
        upload_idle_s: float = 60.0,
        on_limited: Callable[[str], None] | None = None,
    ) -> None:
        parts = urlsplit(server_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the gateway proxy needs an http(s) server URL, got {server_url!r}")
        self.socket_path = socket_path
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.tls = parts.scheme == "https"
        self.netloc = parts.netloc.encode()
        self.prefixes = [unquote(p) for p in allowed_prefixes]
        self.exact = {unquote(p) for p in allowed_exact}
        self.on_denied = on_denied
        self.max_connections = max_connections
        self.head_timeout = head_timeout
        self.upload_idle_s = upload_idle_s
        self.on_limited = on_limited or (lambda _kind: None)
        self.active = 0
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.socket_path), limit=_HEAD_LIMIT)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def allows(self, target: str) -> bool:
        """Whether a request target (path and query) is one of the attempt's routes."""
        if not target.startswith("/") or "\\" in target:
            return False
        path = unquote(target.split("?", 1)[0].split("#", 1)[0])
        if any(segment in ("..", ".") for segment in path.split("/")) or "//" in path:
            return False
        # the attempt's own base (".../attempt/{id}", no slash after it) is its too
        return path in self.exact or any(path.startswith(p) or path + "/" == p for p in self.prefixes)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.active >= self.max_connections:
            self.on_limited("limit.connections")
            with contextlib.suppress(OSError, asyncio.TimeoutError):
                await asyncio.wait_for(_refuse(writer, 503, f"agentbolt sandbox: more than {self.max_connections} "
                                                            "gateway requests at once; wait for one to finish"), 5)
            writer.close()
            return
        self.active += 1
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._forward(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, TimeoutError):
            pass
        finally:
            self.active -= 1
            if task is not None:
                self._tasks.discard(task)
            writer.close()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.head_timeout)
        except TimeoutError:
            self.on_limited("limit.request_time")
            await _refuse(writer, 408, f"agentbolt sandbox: a request's head took longer than {self.head_timeout:g} s")
            return
        request_line, _, rest = head.partition(b"\r\n")
        parts = request_line.decode("latin-1").split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            await _refuse(writer, 400, "the sandbox's gateway relay speaks HTTP/1.x only")
            return
        method, target, version = parts
        target = _origin_form(target)
        if not self.allows(target):
            self.on_denied(method, target[:300])
            await _refuse(
                writer, 403,
                f"agentbolt sandbox: {method} {target[:200]} is not this attempt's gateway; "
                "the program may call its model (OPENAI_BASE_URL) and post its own reward, nothing else",
            )
            return
        headers = [h for h in rest.split(b"\r\n") if h and not _HOP_HEADERS.match(h)]
        out = b"\r\n".join(
            [f"{method} {target} {version}".encode("latin-1"), b"Host: " + self.netloc, *headers, b"Connection: close"]
        ) + b"\r\n\r\n"
        context = ssl.create_default_context() if self.tls else None
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.port, ssl=context)
        except OSError as exc:
            await _refuse(writer, 502, f"agentbolt sandbox: the server at {self.host}:{self.port} is not reachable: "
                                       f"{exc}")
            return
        try:
            up_writer.write(out)
            await up_writer.drain()
            upload = asyncio.ensure_future(_pump(reader, up_writer, close=False, idle=self.upload_idle_s))
            await _pump(up_reader, writer, close=True)
            upload.cancel()
        finally:
            up_writer.close()


def _origin_form(target: str) -> str:
    """``http://127.0.0.1:port/path?q`` (the absolute form some clients send) as ``/path?q``;
    the host is the relay's whatever it names: the request leaves only for this server."""
    if target.startswith(("http://", "https://")):
        rest = target.split("://", 1)[1]
        slash = rest.find("/")
        return rest[slash:] if slash >= 0 else "/"
    return target


async def _pump(
    src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, close: bool, idle: float | None = None
) -> None:
    try:
        while chunk := await asyncio.wait_for(src.read(65536), idle):
            dst.write(chunk)
            await dst.drain()
    except (OSError, asyncio.CancelledError, TimeoutError):
        if not close:
            return
    if close:
        with contextlib.suppress(OSError):
            dst.close()


async def _refuse(writer: asyncio.StreamWriter, status: int, message: str) -> None:
    body = orjson.dumps({"error": {"message": message, "type": "sandbox_denied", "code": status}})
    reason = {400: "Bad Request", 403: "Forbidden", 408: "Request Timeout", 502: "Bad Gateway",
              503: "Service Unavailable"}[status]
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode() + body
    )
    with contextlib.suppress(OSError):
        await writer.drain()
