"""``agentbolt runner`` (``python -m agentbolt.runner_cli``): joins a server running in
another process and takes its work — two OS processes on loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import typer
from typer.testing import CliRunner

from agentbolt.runner_cli import runner
from agentbolt.store.http import HttpStore
from agentbolt.types import RolloutCreate, RolloutStatus, WorkerStatus

HERE = Path(__file__).parent
TOKEN = "cli-test-admin"

pytestmark = pytest.mark.slow


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``run_server`` on a SQLite file, in its own process."""
    db = tmp_path_factory.mktemp("server") / "store.db"
    port = free_port()
    code = (
        "from agentbolt.server import run_server\n"
        f"run_server(store_url={f'sqlite:///{db}'!r}, host='127.0.0.1', port={port}, admin_token={TOKEN!r}, "
        "log_level='warning')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, "the server process died"
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(15)


def start_runner(url: str, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(HERE), PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-m", "agentbolt.runner_cli", "--server", url, "--token", TOKEN, *args],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


async def test_runner_process_joins_the_server_and_takes_work(server: str) -> None:
    store = HttpStore(server, token=TOKEN)
    await store.start()
    rollouts = await store.enqueue_rollouts([RolloutCreate(input={"i": i}) for i in range(20)])
    proc = start_runner(server, "--agent", "cli_agents:echo_agent", "--concurrency", "4", "--worker-id", "remote-1")
    try:
        done = await store.wait_for_rollouts([r.rollout_id for r in rollouts], timeout=60)
        assert len(done) == 20 and all(r.status == RolloutStatus.SUCCEEDED and r.reward == 1.0 for r in done)
        worker = await store.get_worker("remote-1")
        assert worker.metadata["pid"] == proc.pid and worker.metadata["agent"] == "echo_agent"
        attempts = [(await store.query_attempts(r.rollout_id))[0] for r in done]
        assert {a.worker_id for a in attempts} == {"remote-1"}
        spans = await store.get_spans(done[0].rollout_id)
        assert any(s.attributes.get("agentbolt.message.content", "").startswith(f"pid {proc.pid} ") for s in spans)

        proc.send_signal(signal.SIGTERM)  # leave cleanly
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "20 succeeded" in err
        assert (await store.get_worker("remote-1")).status == WorkerStatus.OFFLINE
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        await store.close()


async def test_max_rollouts_makes_the_runner_leave_on_its_own(server: str) -> None:
    store = HttpStore(server, token=TOKEN)
    await store.start()
    rollouts = []
    try:
        rollouts = await store.enqueue_rollouts([RolloutCreate(input={"i": i}, mode="val") for i in range(5)])
        proc = start_runner(server, "--agent", "cli_agents:ClassAgent", "--max-rollouts", "3", "-c", "1")
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "3 claimed, 3 succeeded" in err
        states = [await store.get_rollout(r.rollout_id) for r in rollouts]
        assert [s.status for s in states].count(RolloutStatus.SUCCEEDED) == 3
        assert {s.reward for s in states if s.status == RolloutStatus.SUCCEEDED} == {0.5}
    finally:
        for r in rollouts:  # leave the shared server's queue empty for the other tests
            if not (await store.get_rollout(r.rollout_id)).status.is_terminal:
                await store.cancel_rollout(r.rollout_id)
        await store.close()


def cli() -> typer.Typer:
    app = typer.Typer()
    app.command()(runner)
    return app


def test_an_agent_that_cannot_be_loaded_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli(), ["--server", "http://127.0.0.1:9", "--agent", "no_such_module_xyz:agent"])
    assert result.exit_code == 2
    assert "cannot import module 'no_such_module_xyz'" in result.output
    result = CliRunner().invoke(cli(), ["--server", "http://127.0.0.1:9", "--agent", "not-a-reference"])
    assert result.exit_code == 2 and "module:object" in result.output


def test_an_unreachable_server_is_a_runtime_error() -> None:
    port = free_port()  # nothing listens there
    result = CliRunner().invoke(
        cli(), ["--server", f"http://127.0.0.1:{port}", "--agent", f"{HERE / 'cli_agents.py'}:echo_agent"]
    )
    assert result.exit_code == 1, result.output
    assert "Error:" in result.output and "Traceback" not in result.output
