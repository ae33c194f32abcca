"""The engine throughput benchmark runs (smoke mode, tiny model). Its figures are not
checked here: timings do not belong in pass/fail tests on a shared machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the transformers engine needs the [torch] extra")

ROOT = Path(__file__).resolve().parents[2]


def test_engine_throughput_smoke_mode_reports_both_concurrencies() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "engine_throughput.py"), "--smoke", "--json"],
                         capture_output=True, text=True, timeout=300, check=True)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    measured = {r["concurrency"]: r for r in rows if "concurrency" in r}
    assert set(measured) == {1, 8}
    assert measured[8]["tokens"] == 8 * 8 and measured[8]["forward_passes"] == 8  # one batch of 8
    assert any("speedup_8_vs_1" in r for r in rows)
