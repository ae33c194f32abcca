"""v0.3's store server and client: any host (all interfaces with a warning), and a client
that pickles, so runner processes can be spawned with it."""

from __future__ import annotations

import asyncio
import multiprocessing
import socket

import pytest

import agentbolt.compat as agl
from agentbolt.compat.store_server import UnauthenticatedServerWarning
from agentbolt.store.errors import AuthenticationError


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _enqueue_from_a_child(store: agl.LightningStoreClient, text: str) -> None:
    async def go() -> None:
        await store.enqueue_rollout(input={"from": text})
        await store.close()

    asyncio.run(go())


async def test_all_interfaces_serve_with_a_security_warning() -> None:
    port = _free_port()
    server = agl.LightningStoreServer(agl.InMemoryLightningStore(), "0.0.0.0", port)
    with pytest.warns(UnauthenticatedServerWarning, match="WITHOUT authentication"):
        await server.start()
    try:
        client = agl.LightningStoreClient(f"http://127.0.0.1:{port}")
        rollout = await client.enqueue_rollout(input=1)
        assert (await client.get_rollout_by_id(rollout.rollout_id)).input == 1
        await client.close()
    finally:
        await server.stop()


async def test_with_an_admin_token_there_is_no_warning_and_clients_need_it(recwarn: pytest.WarningsRecorder) -> None:
    port = _free_port()
    server = agl.LightningStoreServer(agl.InMemoryLightningStore(), "0.0.0.0", port, admin_token="s3cret")
    await server.start()
    try:
        assert not [w for w in recwarn if issubclass(w.category, UnauthenticatedServerWarning)]
        client = agl.LightningStoreClient(f"http://127.0.0.1:{port}", token="s3cret")
        await client.enqueue_rollout(input=2)
        await client.close()
        stranger = agl.LightningStoreClient(f"http://127.0.0.1:{port}")
        with pytest.raises(AuthenticationError):
            await stranger.enqueue_rollout(input=3)
        await stranger.close()
    finally:
        await server.stop()


async def test_a_client_goes_to_a_spawned_process() -> None:
    port = _free_port()
    store = agl.InMemoryLightningStore()
    server = agl.LightningStoreServer(store, "127.0.0.1", port)
    await server.start()
    try:
        client = agl.LightningStoreClient(f"http://127.0.0.1:{port}")
        child = multiprocessing.get_context("spawn").Process(target=_enqueue_from_a_child, args=(client, "spawned"))
        child.start()
        await asyncio.to_thread(child.join, 60)
        assert child.exitcode == 0
        assert [r.input for r in await store.query_rollouts()] == [{"from": "spawned"}]
        await client.close()
    finally:
        await server.stop()
