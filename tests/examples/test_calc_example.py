"""``examples/calc/train.py --smoke`` runs the README's main job end to end on the real
model: SmolLM2-135M behind the gateway, the embedded SQLite store, a GRPO step that
hot-swaps the LoRA into the engine, held-out evaluations, the learning curve and the
exported model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "calc" / "train.py"


@pytest.mark.slow
def test_smoke_run_trains_evaluates_and_exports(tmp_path: Path) -> None:
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, str(EXAMPLE), "--smoke", "--run-dir", str(run)],
                         check=False, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "held-out success (greedy, 2 problems)" in out.stdout
    assert (run / "store.db").is_file()
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "reward/mean" in r] == [1]
    assert any("val/success_rate" in r for r in rows)
    assert (run / "model" / "config.json").is_file() and (run / "model" / "tokenizer.json").is_file()
    assert (run / "learning_curve.png").stat().st_size > 1000
    assert (run / "checkpoints" / "step-000001" / "state.json").is_file()
