"""``examples/calc/sft.py --smoke`` runs the SFT example end to end on the real model: a
scripted teacher recorded through the gateway, SmolLM2-135M fine-tuned on its traces
behind the gateway (LoRA published to the engine), held-out evaluations before and after,
the exported model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "calc" / "sft.py"


@pytest.mark.slow
def test_smoke_run_records_the_teacher_fine_tunes_evaluates_and_exports(tmp_path: Path) -> None:
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, str(EXAMPLE), "--smoke", "--run-dir", str(run)],
                         check=False, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "teacher: 2 training problems recorded, success 100%" in out.stdout
    assert "held-out success before: " in out.stdout and " after: " in out.stdout
    assert (run / "store.db").is_file() and len(json.loads((run / "teacher_rollouts.json").read_text())) == 2

    # two model calls per teacher rollout, each a record whose trained answer is the teacher's
    records = [json.loads(line) for line in (run / "records" / "iteration-1.jsonl").read_text().splitlines()]
    answers = sorted(r["messages"][-1]["content"].split("(")[0].split(":")[0] for r in records)
    assert answers == ["ANSWER", "ANSWER", "CALC", "CALC"]
    assert all(m.get("weight") == 0 for r in records for m in r["messages"][:-1] if m["role"] == "assistant")

    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in rows if "train/loss" in r]
    assert len(trained) == 1 and trained[0]["data/records"] == 4 and trained[0]["policy_version"] == 1
    assert len([r for r in rows if "val/success_rate" in r]) == 2
    summary = json.loads((run / "summary.json").read_text())
    assert summary["records"] == [4] and summary["held_out_before"] is not None
    assert (run / "model" / "config.json").is_file() and (run / "model" / "tokenizer.json").is_file()
