"""The controller's side of the gateway relay bounds what one attempt holds: requests in
flight, time to send a head, pauses in a body. Driven on its unix socket directly, as a
program can."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentbolt.runner.harness.sandbox.proxy import GatewayProxy


def _proxy(tmp_path: Path, limited: list[str], **limits: Any) -> GatewayProxy:
    return GatewayProxy(
        tmp_path / "gw.sock", "http://127.0.0.1:9", allowed_prefixes=["/rollout/r/attempt/a/"], allowed_exact=[],
        on_denied=lambda _m, _t: None, on_limited=limited.append, **limits,
    )


async def _status(reader: asyncio.StreamReader) -> bytes:
    return (await asyncio.wait_for(reader.readline(), 10)).strip()


async def test_requests_past_the_limit_are_answered_503_at_once(tmp_path: Path) -> None:
    limited: list[str] = []
    async with _proxy(tmp_path, limited, max_connections=2, head_timeout=30) as proxy:
        held = [await asyncio.open_unix_connection(str(proxy.socket_path)) for _ in range(2)]
        for _, writer in held:
            writer.write(b"POST /rollout/r/attempt/a/v1/chat")  # a head that never ends
        await asyncio.sleep(0.1)
        extra_reader, extra_writer = await asyncio.open_unix_connection(str(proxy.socket_path))
        assert await _status(extra_reader) == b"HTTP/1.1 503 Service Unavailable"
        assert limited == ["limit.connections"] and proxy.active == 2
        for _, writer in held:
            writer.close()
        extra_writer.close()


async def test_a_head_sent_too_slowly_is_408(tmp_path: Path) -> None:
    limited: list[str] = []
    async with _proxy(tmp_path, limited, head_timeout=0.3) as proxy:
        reader, writer = await asyncio.open_unix_connection(str(proxy.socket_path))
        writer.write(b"GET /rollout/r/attempt/a/v1/models HTTP/1.1\r\n")  # and nothing more
        assert await _status(reader) == b"HTTP/1.1 408 Request Timeout"
        assert limited == ["limit.request_time"]
        writer.close()
        await asyncio.sleep(0.05)
        assert proxy.active == 0  # its slot is free again


def test_the_attempts_own_base_url_is_its_own(tmp_path: Path) -> None:
    proxy = _proxy(tmp_path, [])
    assert proxy.allows("/rollout/r/attempt/a") and proxy.allows("/rollout/r/attempt/a/v1")
    assert not proxy.allows("/rollout/r/attempt/ab") and not proxy.allows("/rollout/r/attempt")
