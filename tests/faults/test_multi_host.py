"""Runners on "other machines": the server and each runner are separate processes started
with the CLI, joined only by a URL and a shared token — over loopback, and (where the
machine allows network namespaces) from a namespace of its own that reaches the server
over a veth pair, as a second host would over a network. The recipe of docs/scale-out.md.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentbolt.store.http import HttpStore
from agentbolt.types import RolloutCreate, RolloutStatus, WorkerStatus

from .cluster import Runner, Server

pytestmark = pytest.mark.slow

TOKEN = "multi-host-secret"
ROLLOUTS = 40


async def _enqueue_and_wait(url: str, timeout: float = 90.0) -> list:
    store = HttpStore(url, token=TOKEN)
    try:
        ids = [f"mh-{i:03d}" for i in range(ROLLOUTS)]
        await store.enqueue_rollouts([RolloutCreate(rollout_id=rid, input={"i": i}) for i, rid in enumerate(ids)])
        done = await store.wait_for_rollouts(ids, timeout=timeout)
        attempts = [a for rid in ids for a in await store.query_attempts(rid)]
        return [done, attempts, await store.query_workers()]
    finally:
        await store.close()


def _run_two_runners(server: Server, tmp_path: Path, netns: str | None = None) -> None:
    runners = [Runner([server.url], tmp_path, f"host-b-runner-{k}", concurrency=4, token=TOKEN, netns=netns)
               for k in range(2)]
    try:
        for r in runners:
            r.start()
        done, attempts, workers = asyncio.run(_enqueue_and_wait(server.url))
    finally:
        codes = [r.stop() for r in runners]
    logs = "\n".join(p.tail() for p in [server, *runners])
    assert len(done) == ROLLOUTS and all(r.status == RolloutStatus.SUCCEEDED for r in done), logs
    assert {a.worker_id for a in attempts} <= {r.worker_id for r in runners}
    assert len(attempts) == ROLLOUTS  # one attempt each: nothing failed, nothing retried
    assert codes == [0, 0], logs  # SIGTERM: finish, mark offline, leave
    by_id = {w.worker_id: w for w in workers}
    assert all(by_id[r.worker_id].metadata["kind"] == "runner" for r in runners)


def test_runners_in_other_processes_join_a_server_by_url_and_token(tmp_path: Path) -> None:
    server = Server(f"sqlite:///{tmp_path / 'store.db'}", tmp_path, token=TOKEN)
    server.start()
    try:
        _run_two_runners(server, tmp_path)
        # without the token a runner is refused, and says why
        stranger = Runner([server.url], tmp_path, "stranger", token="wrong")
        stranger.start()
        assert stranger.proc is not None and stranger.proc.wait(60) != 0
        assert "token" in stranger.log.read_text().lower()
    finally:
        server.stop()

    offline = asyncio.run(_workers_after(server, tmp_path))
    assert offline == {"host-b-runner-0": WorkerStatus.OFFLINE, "host-b-runner-1": WorkerStatus.OFFLINE}


async def _workers_after(server: Server, tmp_path: Path) -> dict[str, WorkerStatus]:
    from agentbolt.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "store.db")
    await store.start()
    try:
        return {w.worker_id: w.status for w in await store.query_workers()}
    finally:
        await store.close()


# ------------------------------------------------------------------ network namespaces
def _sh(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


@pytest.fixture
def other_host() -> Iterator[tuple[str, str]]:
    """A network namespace ("host B") joined to this one by a veth pair; yields (the
    namespace's name, the IP this host has on the link)."""
    if sys.platform != "linux" or shutil.which("ip") is None:
        pytest.skip("network namespaces need Linux and iproute2 (`ip`)")
    tag = f"{os.getpid() % 100000}"
    ns, host_if, ns_if = f"abt-{tag}", f"abh{tag}", f"abn{tag}"
    subnet = 16 + os.getpid() % 200
    host_ip, ns_ip = f"10.213.{subnet}.1", f"10.213.{subnet}.2"
    made = _sh("ip", "netns", "add", ns)
    if made.returncode != 0:
        pytest.skip(f"cannot create a network namespace here (needs root or CAP_NET_ADMIN): {made.stderr.strip()}")
    try:
        for argv in (
            ("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if),
            ("ip", "link", "set", ns_if, "netns", ns),
            ("ip", "addr", "add", f"{host_ip}/30", "dev", host_if),
            ("ip", "link", "set", host_if, "up"),
            ("ip", "netns", "exec", ns, "ip", "addr", "add", f"{ns_ip}/30", "dev", ns_if),
            ("ip", "netns", "exec", ns, "ip", "link", "set", ns_if, "up"),
            ("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"),
        ):
            done = _sh(*argv)
            if done.returncode != 0:
                pytest.skip(f"cannot wire the namespace ({' '.join(argv)}): {done.stderr.strip()}")
        yield ns, host_ip
    finally:
        _sh("ip", "link", "del", host_if)  # removes both ends
        _sh("ip", "netns", "del", ns)


def test_runners_in_another_network_namespace_reach_the_server_over_a_veth_link(
    other_host: tuple[str, str], tmp_path: Path
) -> None:
    ns, host_ip = other_host
    # a non-loopback address: the server refuses to listen there without a token
    server = Server(f"sqlite:///{tmp_path / 'store.db'}", tmp_path, host=host_ip, token=TOKEN)
    server.start()
    try:
        # host B really is elsewhere: its loopback has no server on that port
        probe = _sh("ip", "netns", "exec", ns, sys.executable, "-c",
                    f"import httpx; httpx.get('http://127.0.0.1:{server.port}/healthz', timeout=2)")
        assert probe.returncode != 0 and "ConnectError" in probe.stderr
        reach = _sh("ip", "netns", "exec", ns, sys.executable, "-c",
                    f"import httpx; print(httpx.get('{server.url}/healthz', timeout=5).status_code)")
        assert reach.stdout.strip() == "200", reach.stderr
        t0 = time.monotonic()
        _run_two_runners(server, tmp_path, netns=ns)
        print(f"{ROLLOUTS} rollouts from runners in namespace {ns} in {time.monotonic() - t0:.1f} s")
    finally:
        server.stop()
