"""``examples/calc_tools/train.py --smoke``: an OpenAI Agents SDK agent with a function
tool, on the SDK's default Responses model, trained with GRPO on SmolLM2-135M through
the gateway's ``/v1/responses`` — one tiny step, held-out evaluations, export."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("agents", reason="needs the OpenAI Agents SDK (pip install openai-agents)")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "calc_tools" / "train.py"


@pytest.mark.slow
def test_smoke_run_trains_a_function_calling_agent(tmp_path: Path) -> None:
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, str(EXAMPLE), "--smoke", "--run-dir", str(run)],
                         check=False, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "held-out success (greedy, 2 problems)" in out.stdout
    # token-exact history: each rollout is one sample (n/a: the step had no follow-up call to merge)
    assert re.search(r"merge rate (100\.0 %|n/a)", out.stdout), out.stdout[-2000:]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "reward/mean" in r] == [1]
    assert (run / "model" / "config.json").is_file()
