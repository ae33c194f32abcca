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


def test_engine_throughput_smoke_mode_reports_1_and_16_sequences_against_the_fp32_peak() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "engine_throughput.py"), "--smoke", "--json"],
                         capture_output=True, text=True, timeout=300, check=True)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    peak = next(r for r in rows if "fp32_peak_gflops" in r)
    assert peak["fp32_peak_gflops"] > 0 and peak["flops_per_token"] > 0
    measured = {r["concurrency"]: r for r in rows if r.get("engine") == "agentbolt/continuous"}
    assert set(measured) == {1, 16}
    assert measured[16]["tokens"] == 16 * 8
    assert measured[16]["forward_passes"] == 8  # the 16 prompts prefilled in one pass, then 7 decode steps
    for r in measured.values():  # tokens/s x FLOPs per token / peak
        expected = r["tokens_per_s"] * peak["flops_per_token"] / (peak["fp32_peak_gflops"] * 1e9)
        assert abs(r["fraction_of_fp32_peak"] - expected) < 1e-3
    llama = next(r for r in rows if r.get("engine") == "llama.cpp")
    assert "skipped" in llama  # the tiny model has no GGUF: the peer says why it did not run
    assert {r["concurrency"] for r in rows if r.get("engine") == "hf-generate"} == {1, 16}
    assert any(r.get("ratio") == "agentbolt/continuous vs hf-generate" and "x_at_16" in r for r in rows)
