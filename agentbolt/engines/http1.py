"""A lean HTTP/1.1 client for an engine's whole-answer calls: keep-alive connections to
one server, each request written in one piece, each answer parsed by httptools (llhttp).

On the gateway's hot path aiohttp's request machinery (request and response objects,
header multidicts, timers, its connector) cost ~100 µs of CPU per call against ~20 µs
here (``docs/benchmarks.md``, "Gateway overhead"). This client does what the engines'
non-streaming calls need and no more: a method, a path under the base URL and a body
(sent with ``Content-Length``); an answer with ``Content-Length``, chunked, or ending
with the connection, plain or gzip/deflate-encoded; http and https; at most
``max_connections`` open connections. Streams stay on aiohttp (:mod:`.http_engines`).

A connection kept alive may have been closed by the server while idle (vLLM's uvicorn
closes them after 5 s): a request that fails on a reused connection before any byte of
its answer came is sent once more, on a new connection.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import urlsplit

import httptools

from agentbolt.version import __version__

__all__ = ["ConnectionFailedError", "Http1Client", "HttpAnswer"]


class HttpAnswer(NamedTuple):
    status: int
    body: bytes


class ConnectionFailedError(Exception):
    """The server could not be reached, or the connection broke before the whole answer came."""


class Http1Client:
    """Requests to the server at ``base_url`` (``http://host:port/v1``); paths given to
    :meth:`request` are under its path. ``headers`` go with every request."""

    def __init__(self, base_url: str, *, headers: Mapping[str, str] | None = None, max_connections: int = 256) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"an engine URL must be http://host[:port]/... or https://..., got {base_url!r}")
        self._host = url.hostname
        self._port = url.port or (443 if url.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if url.scheme == "https" else None
        self._prefix = url.path.rstrip("/")
        host = f"[{self._host}]" if ":" in self._host else self._host
        default_port = self._port == (443 if url.scheme == "https" else 80)
        fixed = {"host": host if default_port else f"{host}:{self._port}", "accept": "*/*",
                 "accept-encoding": "identity", "user-agent": f"agentbolt/{__version__}"}
        fixed.update({k.lower(): v for k, v in (headers or {}).items()})
        for name, value in fixed.items():
            if any(c in f"{name}{value}" for c in "\r\n"):
                raise ValueError(f"header {name!r} holds a line break")
        self._headers = "".join(f"{name}: {value}\r\n" for name, value in fixed.items()).encode("latin-1")
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._slots = asyncio.Semaphore(max_connections)
        self._closed = False

    async def request(self, method: str, path: str, body: bytes = b"") -> HttpAnswer:
        """Send one request and return the whole answer; raises :class:`ConnectionFailedError`."""
        head = f"{method} {self._prefix}{path} HTTP/1.1\r\n".encode("latin-1") + self._headers
        message = head + b"content-length: %d\r\n\r\n" % len(body) + body
        async with self._slots:
            for retry in (False, True):
                conn, reused = await self._connection()
                try:
                    answer = await conn.exchange(message)
                except ConnectionFailedError:
                    self._drop(conn)
                    if reused and not conn.answered and not retry:
                        continue  # the server had closed the idle connection: once more, on a new one
                    raise
                except BaseException:  # cancelled (a timeout): the answer would come on this connection later
                    self._drop(conn)
                    raise
                if conn.keep_alive and not self._closed:
                    self._idle.append(conn)
                else:
                    self._drop(conn)
                return answer
        raise AssertionError("unreachable")  # pragma: no cover

    async def close(self) -> None:
        """Close every connection."""
        self._closed = True
        for conn in list(self._open):
            self._drop(conn)
        self._idle.clear()

    async def _connection(self) -> tuple[_Connection, bool]:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn, True
            self._open.discard(conn)
        if self._closed:
            raise ConnectionFailedError("the client is closed")
        loop = asyncio.get_running_loop()
        try:
            _, conn = await loop.create_connection(
                _Connection, self._host, self._port, ssl=self._ssl, server_hostname=self._host if self._ssl else None
            )
        except (OSError, ssl.SSLError) as exc:
            raise ConnectionFailedError(f"could not connect to {self._host}:{self._port}: {exc!r}") from exc
        self._open.add(conn)
        return conn, False

    def _drop(self, conn: _Connection) -> None:
        self._open.discard(conn)
        conn.close()


class _Connection(asyncio.Protocol):
    """One keep-alive connection: one request at a time, its answer parsed as it comes."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._answer: asyncio.Future[HttpAnswer] | None = None
        self._body: list[bytes] = []
        self._encoding = b""
        self._framed = False  # the answer says where it ends (length, chunks, or none by its status)
        self._headers_done = False
        self.closed = False
        self.answered = False  # a byte of the current answer came
        self.keep_alive = True

    async def exchange(self, message: bytes) -> HttpAnswer:
        if self.closed or self._transport is None:
            raise ConnectionFailedError("the connection was closed")
        self._answer = asyncio.get_running_loop().create_future()
        self.answered = False
        self._transport.write(message)
        return await self._answer

    def close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()

    # ------------------------------------------------------------------ asyncio
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # a stream transport

    def data_received(self, data: bytes) -> None:
        if self._answer is None or self._answer.done():  # nothing asked: the server's own message (a 408)
            self.close()
            return
        self.answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(f"the server sent a malformed answer: {exc}")
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._answer is None or self._answer.done():
            return
        if self._headers_done and not self._framed:  # an answer that ends with its connection
            self._finish(keep_alive=False)
        else:
            why = f": {exc!r}" if exc is not None else ""
            self._fail(f"the server closed the connection before the whole answer came{why}")

    # ------------------------------------------------------------------ httptools
    def on_message_begin(self) -> None:
        self._body = []
        self._encoding = b""
        self._framed = False
        self._headers_done = False

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-encoding":
            self._encoding = value.strip().lower()
        elif name in (b"content-length", b"transfer-encoding"):
            self._framed = True

    def on_headers_complete(self) -> None:
        self._headers_done = True
        status = self._parser.get_status_code()
        if status < 200 or status in (204, 304):
            self._framed = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._parser.get_status_code() < 200:  # an interim answer (103 Early Hints): the real one follows
            self.on_message_begin()
            return
        if self._answer is None or self._answer.done():  # a second answer to one request: not a server to trust
            self.close()
            return
        self._finish(keep_alive=self._parser.should_keep_alive())

    def _finish(self, *, keep_alive: bool) -> None:
        assert self._answer is not None
        self.keep_alive = keep_alive
        try:
            body = _decoded(b"".join(self._body), self._encoding)
        except (zlib.error, ValueError) as exc:
            self._fail(f"could not decode the answer ({self._encoding.decode('latin-1')}): {exc}")
            return
        self._answer.set_result(HttpAnswer(self._parser.get_status_code(), body))

    def _fail(self, message: str) -> None:
        self.keep_alive = False
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(ConnectionFailedError(message))


def _decoded(body: bytes, encoding: bytes) -> bytes:
    """The body as sent before its content coding (asked for none; some servers use one anyway)."""
    if encoding in (b"", b"identity"):
        return body
    if encoding in (b"gzip", b"x-gzip"):
        return zlib.decompress(body, 16 + zlib.MAX_WBITS)
    if encoding == b"deflate":
        try:
            return zlib.decompress(body)
        except zlib.error:  # raw deflate, as some servers send it
            return zlib.decompress(body, -zlib.MAX_WBITS)
    raise ValueError(f"unsupported content coding {encoding.decode('latin-1')!r}")
