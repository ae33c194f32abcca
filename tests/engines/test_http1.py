"""The engines' lean HTTP/1.1 client against a real asyncio server whose answers are
scripted per request: keep-alive, the three ways an answer can end, content codings, a
connection the server closed while idle, one that breaks mid-answer, the connection
bound and a cancelled call."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Self

import pytest

from agentbolt.engines.http1 import ConnectionFailedError, Http1Client

Action = Callable[[bytes, asyncio.StreamWriter], Awaitable[None]]


class ScriptedServer:
    """Answers each request (head + Content-Length body) with the next scripted action;
    counts the connections it accepted and keeps the requests it read."""

    def __init__(self, actions: list[Action]) -> None:
        self.actions = actions
        self.connections = 0
        self.open = 0
        self.most_open = 0
        self.requests: list[bytes] = []
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                await self.actions.pop(0)(request, writer)
                if writer.is_closing():
                    return
        finally:
            self.open -= 1
            writer.close()


def answer(body: bytes, *, status: int = 200, extra: bytes = b"") -> Action:
    async def act(request: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 %d OK\r\ncontent-length: %d\r\n%s\r\n" % (status, len(body), extra) + body)
        await writer.drain()
    return act


def chunked(*parts: bytes) -> Action:
    async def act(request: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for part in parts:
            writer.write(b"%x\r\n%s\r\n" % (len(part), part))
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.write(b"0\r\n\r\n")
    return act


def until_close(body: bytes) -> Action:
    async def act(request: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + body)
        await writer.drain()
        writer.close()
    return act


def hang_up(after: bytes = b"") -> Action:
    async def act(request: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(after)
        await writer.drain()
        writer.close()
    return act


def slowly(seconds: float, body: bytes) -> Action:
    async def act(request: bytes, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(seconds)
        await answer(body)(request, writer)
    return act


@pytest.fixture
async def client_of() -> AsyncIterator[Callable[..., Http1Client]]:
    made: list[Http1Client] = []

    def make(url: str, **kw: object) -> Http1Client:
        made.append(Http1Client(url, **kw))  # type: ignore[arg-type]
        return made[-1]

    yield make
    for c in made:
        await c.close()


async def test_calls_share_one_kept_alive_connection_and_carry_the_headers(client_of) -> None:
    async with ScriptedServer([answer(b'{"n": 1}'), answer(b'{"n": 2}', status=400)]) as server:
        client = client_of(server.url, headers={"Authorization": "Bearer sk-x", "content-type": "application/json"})
        first = await client.request("POST", "/chat/completions", b'{"q": 1}')
        second = await client.request("GET", "/models")
    assert (first.status, first.body) == (200, b'{"n": 1}')
    assert (second.status, second.body) == (400, b'{"n": 2}')
    assert server.connections == 1
    head = server.requests[0].lower()
    assert head.startswith(b"post /v1/chat/completions http/1.1\r\n")
    port = server.url.split(":")[2].split("/")[0]
    for line in (b"host: 127.0.0.1:" + port.encode(), b"authorization: bearer sk-x", b"content-length: 8",
                 b"content-type: application/json", b"accept-encoding: identity"):
        assert line in head
    assert server.requests[0].endswith(b'\r\n\r\n{"q": 1}')
    assert server.requests[1].lower().startswith(b"get /v1/models http/1.1\r\n")


async def test_chunked_answers_answers_that_end_with_the_connection_and_content_codings(client_of) -> None:
    packed = gzip.compress(b'{"zipped": true}')
    async with ScriptedServer([chunked(b'{"a":', b' 1}'), answer(packed, extra=b"content-encoding: gzip\r\n"),
                               until_close(b'{"till": "close"}'), answer(b"{}")]) as server:
        client = client_of(server.url)
        assert (await client.request("POST", "/x", b"{}")).body == b'{"a": 1}'
        assert (await client.request("POST", "/x", b"{}")).body == b'{"zipped": true}'
        assert (await client.request("POST", "/x", b"{}")).body == b'{"till": "close"}'
        assert (await client.request("POST", "/x", b"{}")).body == b"{}"  # on a new connection
    assert server.connections == 2


async def test_a_connection_the_server_dropped_unanswered_is_retried_once_on_a_new_one(client_of) -> None:
    async with ScriptedServer([answer(b"1"), hang_up(), answer(b"2")]) as server:
        client = client_of(server.url)
        assert (await client.request("POST", "/x")).body == b"1"
        assert (await client.request("POST", "/x")).body == b"2"
    assert server.connections == 2 and len(server.requests) == 3


async def test_an_answer_broken_off_midway_fails_and_is_not_sent_again(client_of) -> None:
    async with ScriptedServer([hang_up(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n{\"a\"")]) as server:
        client = client_of(server.url)
        with pytest.raises(ConnectionFailedError, match="before the whole answer"):
            await client.request("POST", "/x")
    assert len(server.requests) == 1


async def test_an_unreachable_server_fails_with_its_address(client_of) -> None:
    client = client_of("http://127.0.0.1:9/v1")
    with pytest.raises(ConnectionFailedError, match=r"could not connect to 127\.0\.0\.1:9"):
        await client.request("POST", "/x")


async def test_no_more_connections_than_the_bound(client_of) -> None:
    async with ScriptedServer([slowly(0.05, b"ok") for _ in range(6)]) as server:
        client = client_of(server.url, max_connections=2)
        answers = await asyncio.gather(*(client.request("POST", "/x") for _ in range(6)))
    assert [a.body for a in answers] == [b"ok"] * 6
    assert server.most_open == 2


async def test_a_cancelled_call_leaves_no_late_answer_for_the_next(client_of) -> None:
    async with ScriptedServer([slowly(0.3, b"late"), answer(b"mine")]) as server:
        client = client_of(server.url)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await client.request("POST", "/x")
        assert (await client.request("POST", "/x")).body == b"mine"
    assert server.connections == 2


def test_a_url_that_is_not_http_is_refused() -> None:
    with pytest.raises(ValueError, match="http://host"):
        Http1Client("ftp://example.com/v1")
    with pytest.raises(ValueError, match="line break"):
        Http1Client("http://example.com/v1", headers={"x-a": "b\r\nx-c: d"})
