"""External strategy: the trainer serves the store and prints the ``agentbolt runner``
command; a runner started by hand from that command (another OS process) does the work."""

from __future__ import annotations

import io
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agentbolt.algorithms import Evaluate
from agentbolt.execution import ExternalStrategy
from agentbolt.trainer import Trainer
from runner.cli_agents import echo_agent

TESTS = Path(__file__).parent.parent

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_runner_started_from_the_printed_command_does_the_work(tmp_path: Path) -> None:
    announcements = io.StringIO()
    strategy = ExternalStrategy(port=free_port(), run_dir=tmp_path, console=Console(file=announcements, width=500))
    trainer = Trainer(algorithm=Evaluate(console=Console(file=io.StringIO())), strategy=strategy)
    outcome: dict[str, Any] = {}

    def fit() -> None:
        try:
            outcome["result"] = trainer.fit(echo_agent, [{"i": i} for i in range(10)])
        except BaseException as exc:  # surfaced by the assertions below
            outcome["error"] = exc

    thread = threading.Thread(target=fit)
    thread.start()
    runner = None
    try:
        deadline = time.monotonic() + 60
        while "agentbolt runner" not in announcements.getvalue():
            assert thread.is_alive(), outcome
            assert time.monotonic() < deadline, "no runner command was printed"
            time.sleep(0.05)
        line = next(ln for ln in announcements.getvalue().splitlines() if "agentbolt runner" in ln)
        args = shlex.split(line.strip())[2:]
        assert "--token" in args and "runner.cli_agents:echo_agent" in args
        runner = subprocess.Popen(
            [sys.executable, "-m", "agentbolt.runner_cli", *args, "--log-level", "warning"],
            env=dict(os.environ, PYTHONPATH=str(TESTS)),
            stdin=subprocess.DEVNULL,
        )
        thread.join(60)
        assert not thread.is_alive(), "fit did not finish"
        assert "error" not in outcome, outcome.get("error")
        assert outcome["result"].n_scored == 10 and outcome["result"].mean_reward == 1.0
        assert (tmp_path / "store.db").exists()  # the run's data stays in the run directory
    finally:
        if runner is not None:
            runner.send_signal(signal.SIGTERM)
            try:
                runner.wait(30)
            except subprocess.TimeoutExpired:
                runner.kill()
                runner.wait()
        thread.join(5)
