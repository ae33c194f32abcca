"""``benchmarks/dashboard_first_render.py`` runs (smoke mode: a small store, two loads)
and reports a first-render time. The figure itself is not checked: timings do not
belong in pass/fail tests on a shared machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard.browser import missing_reason

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(120)
def test_first_render_benchmark_smoke_mode_reports_a_time() -> None:
    reason = missing_reason()
    if reason:
        pytest.skip(f"the dashboard benchmark needs Playwright and Chromium: {reason}")
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "dashboard_first_render.py"), "--smoke", "--json"],
        capture_output=True, text=True, timeout=110, check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["rollouts"] == 2000 and result["loads"] == 2
    assert len(result["first_row_ms"]) == 2 and all(ms > 0 for ms in result["first_row_ms"])
    assert result["rollouts_api_median_ms"] is not None  # the table's data came from the dashboard API
