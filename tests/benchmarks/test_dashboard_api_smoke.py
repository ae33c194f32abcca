"""The dashboard API benchmark runs (smoke mode: 1,000 rollouts). Its timings are not
checked: they do not belong in pass/fail tests on a shared machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_dashboard_api_benchmark_times_every_case_over_http() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "dashboard_api.py"), "--smoke", "--json"],
        capture_output=True, text=True, timeout=300, check=True, cwd=ROOT,
    )
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [r["case"] for r in rows][0] == "rollouts: first page, newest first" and rows[-1]["case"] == "summary"
    assert rows[0]["total"] == 1000 and all(r["median_s"] > 0 for r in rows)
