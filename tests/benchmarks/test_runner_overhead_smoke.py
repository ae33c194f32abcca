"""The runner-overhead benchmark runs end to end in smoke mode (a real server process;
the agentbolt cells fail unless every rollout succeeded with its reward). Its figures
are not checked: timings do not belong in pass/fail tests on a shared machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_runner_overhead_smoke_mode_reports_every_cell() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "runner_overhead.py"), "--smoke", "--json",
         "--agents", "sync,async", "--concurrency", "2"],
        check=False, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert {(r["agent"], r["concurrency"]) for r in rows} == {("sync", 2), ("async", 2)}
    for r in rows:
        assert r["rollouts"] == 20
        assert r["direct_ms"] > 0 and r["agentbolt_ms"] > 0
        assert abs(r["overhead_ms"] - (r["agentbolt_ms"] - r["direct_ms"])) < 0.01
