"""The benchmark scripts run (seconds-long smoke mode). Their figures are not checked:
timings do not belong in pass/fail tests on a shared machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_store_throughput_smoke_mode_reports_every_cell() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "store_throughput.py"), "--smoke", "--json",
         "--backends", "memory,sqlite,http", "--concurrency", "1,16"],
        capture_output=True, text=True, timeout=300, check=True,
    )
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert {(r["backend"], r["concurrency"]) for r in rows} == {
        (b, c) for b in ("memory", "sqlite", "http") for c in (1, 16)
    }
    assert all(r["rollouts_per_s"] > 0 for r in rows)
