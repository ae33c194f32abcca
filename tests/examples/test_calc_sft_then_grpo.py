"""``examples/calc/sft_then_grpo.py --smoke``: SFT on a teacher's traces, then GRPO, on one
SmolLM2 engine behind one gateway — held-out success after each, and the engine's
logprobs equal to the trainer's at every publish of both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "calc" / "sft_then_grpo.py"


@pytest.mark.slow
def test_smoke_run_keeps_trainer_and_engine_in_agreement_at_every_publish(tmp_path: Path) -> None:
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, str(EXAMPLE), "--smoke", "--run-dir", str(run)],
                         check=False, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "after SFT" in out.stdout and "after GRPO" in out.stdout
    summary = json.loads((run / "summary.json").read_text())
    assert summary["held_out_after_sft"] is not None and summary["held_out_after_grpo"] is not None
    assert summary["publishes"] >= 1  # SFT's, and GRPO's when its step's groups carried signal
    assert summary["policy_version"] == summary["publishes"]  # one version per publish, none reused
    assert summary["max_publish_logprob_diff"] < 1e-4
    assert (run / "grpo" / "model" / "config.json").is_file()
