"""A server shutting down does not wait for long-polls to run out, and prints no
traceback for them."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from agentbolt.store.http import HttpStore
from faults.procs import free_port


def test_sigterm_during_a_long_poll_ends_the_server_promptly_and_cleanly(tmp_path: Path) -> None:
    port = free_port()
    code = (
        "from agentbolt.server import run_server\n"
        f"run_server('sqlite:///{tmp_path / 's.db'}', port={port}, log_level='warning')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)

        async def long_poll_then_stop() -> float:
            store = HttpStore(url, max_retries=0)
            rollout = await store.enqueue_rollout({"never": "finishes"})
            poll = asyncio.create_task(
                httpx.AsyncClient().post(url + "/v1/rollouts/wait", json={"rollout_ids": [rollout.rollout_id], "timeout": 30})
            )
            await asyncio.sleep(0.5)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            answer = await poll
            assert answer.status_code == 200 and answer.json() == []
            await asyncio.to_thread(proc.wait, 20)
            return time.monotonic() - t0

        elapsed = asyncio.run(long_poll_then_stop())
        assert proc.returncode in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after a clean exit
        assert elapsed < 10, "the long-poll held up the shutdown"
        stderr = proc.stderr.read() if proc.stderr else ""
        assert "Traceback" not in stderr and "CancelledError" not in stderr, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
