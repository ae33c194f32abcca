"""Several servers for one client: ``HttpStore([url1, url2])`` and ``agentbolt runner
--server URL1 --server URL2`` use one server and fail over to the next."""

from __future__ import annotations

import logging
import zlib
from collections import Counter

import pytest
import typer
from starlette.responses import JSONResponse
from typer.testing import CliRunner

from agentbolt.runner_cli import _server_pool, runner
from agentbolt.server.testing import serve_app_in_thread, serve_in_thread
from agentbolt.store.errors import StoreUnavailableError
from agentbolt.store.http import HttpStore
from agentbolt.store.memory import MemoryStore
from agentbolt.types import AttemptStatus, RolloutCreate

from .procs import free_port


async def unavailable(scope, receive, send) -> None:  # a server that cannot serve now
    if scope["type"] == "http":
        await JSONResponse({"error": {"code": "unavailable", "message": "database down"}}, status_code=503)(
            scope, receive, send
        )
    elif scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})


async def test_a_server_that_refuses_connections_is_skipped_for_the_next(caplog: pytest.LogCaptureFixture) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with serve_in_thread(MemoryStore()) as live:
        store = HttpStore([dead, live])
        with caplog.at_level(logging.WARNING, logger="agentbolt.store.http"):
            await store.enqueue_rollouts([RolloutCreate(rollout_id="r1", input=1)])
            (claim,) = await store.claim_rollouts("w", 1)
            await store.update_attempt("r1", claim.attempt.attempt_id, status=AttemptStatus.SUCCEEDED)
        assert store.base_url == live and store.base_urls == (dead, live)
        assert (await store.get_rollout("r1")).status.value == "succeeded"
        assert [m for m in caplog.messages if "switching to" in m] == [
            f"store server {dead} failed (ConnectError: All connection attempts failed): switching to {live}"
        ]
        await store.close()


async def test_a_server_answering_503_is_left_for_the_next() -> None:
    with serve_app_in_thread(unavailable) as sick, serve_in_thread(MemoryStore()) as live:
        store = HttpStore([sick, live], batching=False)
        await store.enqueue_rollouts([RolloutCreate(rollout_id="r1", input=1)])
        assert store.base_url == live
        assert (await store.stats()).total_rollouts == 1
        await store.close()


async def test_when_every_server_is_down_the_error_names_them_all() -> None:
    urls = [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"]
    store = HttpStore(urls, max_retries=2)
    with pytest.raises(StoreUnavailableError) as err:
        await store.stats()
    assert f"{urls[0]}, {urls[1]}" in str(err.value) and "is the server running?" in str(err.value)
    await store.close()


def test_server_lists_are_checked() -> None:
    with pytest.raises(ValueError, match="at least one server URL"):
        HttpStore([])
    with pytest.raises(ValueError, match="http:// or https://"):
        HttpStore(["http://a:1", "sqlite:///x.db"])


def test_runners_spread_over_the_servers_by_worker_id_and_keep_the_rest_for_failover() -> None:
    servers = ["http://a:1", "http://b:1", "http://c:1"]
    firsts = Counter()
    for k in range(300):
        store = _server_pool(servers, None, f"runner-{k}")
        assert isinstance(store, HttpStore)
        first = zlib.crc32(f"runner-{k}".encode()) % 3
        assert list(store.base_urls) == servers[first:] + servers[:first]  # the others follow, in order
        firsts[store.base_url] += 1
    assert set(firsts) == set(servers) and min(firsts.values()) > 70  # about a third each


def test_several_servers_must_all_be_http() -> None:
    app = typer.Typer()
    app.command()(runner)
    result = CliRunner().invoke(
        app, ["--server", "http://127.0.0.1:1", "--server", "sqlite:///x.db", "--agent", "tests.faults.chaos_agent:chaos_agent"]
    )
    assert result.exit_code == 2
    assert "several --server must all be agentbolt servers (http://host:port), not sqlite:///x.db" in result.output


def test_several_servers_can_come_from_the_environment_separated_by_spaces() -> None:
    app = typer.Typer()
    app.command()(runner)
    result = CliRunner().invoke(
        app, ["--agent", "tests.faults.chaos_agent:chaos_agent"],
        env={"AGENTBOLT_SERVER": "http://127.0.0.1:1 sqlite:///x.db"},
    )
    assert result.exit_code == 2 and "not sqlite:///x.db" in result.output  # two URLs were read
