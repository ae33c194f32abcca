"""benchmarks/gateway_overhead.py runs end to end in smoke mode (three processes, every
proxied call answered 2xx and recorded as a span). Its timings are not checked: they do
not belong in pass/fail tests on a shared machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("client", ["python", "auto"])
def test_gateway_overhead_smoke_mode_records_every_call(client: str) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gateway_overhead.py"), "--smoke", "--json", "--client", client],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    (result,) = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert result["calls_answered"] > 0 and result["non_2xx"] == 0
    assert result["spans_recorded"] >= result["calls_answered"]
    assert result["every_call_recorded"] is True
    assert result["gateway_rps_16"] > 0 and result["gateway_p50_ms"] > 0
