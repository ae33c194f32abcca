"""benchmarks/gateway_overhead.py runs end to end in smoke mode (three processes, every
proxied call answered 2xx and recorded as a span), and with ``--peer1`` measures Agent
Lightning 1.0's gateway beside it, which records every call too. Its timings are not
checked: they do not belong in pass/fail tests on a shared machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEER1_PYTHON = ROOT / ".bench-venv-peer1" / "bin" / "python"


def _bench(*flags: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gateway_overhead.py"), "--smoke", *flags],
        capture_output=True,
        text=True,
        timeout=300,
        check=check,
    )


def _result(out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    (result,) = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return result


@pytest.mark.parametrize("client", ["python", "auto"])
def test_gateway_overhead_smoke_mode_records_every_call(client: str) -> None:
    result = _result(_bench("--json", "--client", client))
    assert result["calls_answered"] > 0 and result["non_2xx"] == 0
    assert result["spans_recorded"] >= result["calls_answered"]
    assert result["every_call_recorded"] is True
    assert result["gateway_rps_16"] > 0 and result["gateway_p50_ms"] > 0


@pytest.mark.skipif(not PEER1_PYTHON.exists(), reason="no .bench-venv-peer1: run benchmarks/peer/setup.sh")
def test_gateway_overhead_measures_agent_lightning_1_which_records_every_call_it_answers() -> None:
    result = _result(_bench("--json", "--client", "python", "--peer1"))
    assert result["peer1_calls_answered"] > 0 and result["peer1_non_2xx"] == 0
    assert result["peer1_recorded_what"] == "model_request events"
    assert result["peer1_recorded"] >= result["peer1_calls_answered"]
    assert result["peer1_rps_16"] > 0 and result["peer1_p50_ms"] > 0
    assert result["peer1_cpu_ms_per_call_1"] > 0 and result["gateway_cpu_ms_per_call_1"] > 0


def test_gateway_overhead_names_setup_sh_when_a_peer_venv_is_missing(tmp_path: Path) -> None:
    out = _bench("--peer1", str(tmp_path / "no-venv" / "bin" / "python"), check=False)
    assert out.returncode != 0
    assert "benchmarks/peer/setup.sh makes .bench-venv-peer1" in out.stderr
