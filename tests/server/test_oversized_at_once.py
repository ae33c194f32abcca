"""A body over the size limit sent all at once (headers and body in one write, as most
clients do) gets a readable 413, not a connection reset: the server reads what was sent
(up to a bound) before it closes, so the client's kernel never sees unread data refused."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore

LIMIT = 64 * 1024
ADMIN = "admin"


@pytest.fixture
def address() -> Iterator[tuple[str, int]]:
    with serve_in_thread(MemoryStore(), admin_token=ADMIN, max_body_bytes=LIMIT) as url:
        host, port = url.split("//")[1].split(":")
        yield host, int(port)


def _send_at_once(address: tuple[str, int], body: bytes, *, declared: int | None = None) -> bytes:
    length = len(body) if declared is None else declared
    head = (f"POST /v1/rollouts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n").encode()
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(head + body)
        sock.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


@pytest.mark.parametrize("size", [2 * LIMIT, 40 * LIMIT])
def test_an_oversized_body_sent_at_once_gets_a_readable_413(address: tuple[str, int], size: int) -> None:
    body = json.dumps({"rollouts": [{"input": "x" * size}]}).encode()
    reply = _send_at_once(address, body)  # a reset would raise ConnectionResetError here
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), reply[:300]
    error = json.loads(payload)["error"]
    assert error["code"] == "payload_too_large", error
    assert str(LIMIT) in error["message"]
