"""The two-agent example runs as documented: `train.py --smoke` against its own echo
model, and its echo model answers like an OpenAI-compatible server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import openai
import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "two_agents"


def test_smoke_run_collects_only_the_solvers_data(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE / "train.py"), "--smoke", "--out", str(tmp_path)],
        check=False, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "smoke check passed" in out.stdout
    assert "model calls by agent: planner=4, solver=4" in out.stdout
    samples = [json.loads(line) for line in (tmp_path / "solver_rl_samples.jsonl").read_text().splitlines()]
    assert len(samples) == 4
    for s in samples:  # the solver's answer is trained; everything before it is context
        (call,) = [c for c in s["calls"] if c["trained"]]
        assert call["agent_name"] == "solver" and s["num_trained_tokens"] == call["length"] > 0
    triplets = [json.loads(line) for line in (tmp_path / "solver_triplets.jsonl").read_text().splitlines()]
    assert [t["agent_name"] for t in triplets] == ["solver"] * 4
    assert all(t["has_token_ids"] and t["prompt"]["token_ids"] for t in triplets)
    # three of the four smoke questions are arithmetic the echo model computes: reward 1
    assert sorted(t["reward"] for t in triplets) == [0.0, 1.0, 1.0, 1.0]
    records = [json.loads(line) for line in (tmp_path / "solver_sft.jsonl").read_text().splitlines()]
    assert len(records) == 3
    assert all(r["messages"][0]["content"].startswith("You are the solver") for r in records)
    assert all(r["messages"][-1]["role"] == "assistant" for r in records)


def test_rl_smoke_trains_each_way_on_the_agents_it_should(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    out = subprocess.run(
        [sys.executable, str(EXAMPLE / "rl.py"), "--smoke", "--out", str(tmp_path)],
        check=False, capture_output=True, text=True, timeout=600, cwd=EXAMPLE,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "smoke check passed" in out.stdout
    rows = {r["way"]: r for r in json.loads((tmp_path / "results.json").read_text())}
    assert set(rows["solver"]["tokens_trained"]) == {"solver"}  # agent_match: the planner trains nothing
    assert all(rows[way]["tokens_trained"].get(a, 0) > 0 for way in ("shared", "own") for a in ("planner", "solver"))
    assert rows["own"]["served_by"] == {"planner": ["planner"], "solver": ["solver"]}  # each agent its own policy
    for policy in ("planner", "solver"):  # own: one LoRA per agent, each exported
        assert (tmp_path / "own" / policy / "model" / "config.json").is_file()


def test_echo_model_is_openai_compatible() -> None:
    sys.path.insert(0, str(EXAMPLE))
    try:
        from echo_server import serve_echo
    finally:
        sys.path.remove(str(EXAMPLE))
    with serve_echo() as base_url, openai.OpenAI(base_url=base_url, api_key="none") as client:
        r = client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "What is 2 + 3?"}], logprobs=True
        )
        assert r.choices[0].message.content == "echo: What is 2 + 3? => 5"
        raw = r.model_dump()
        assert raw["choices"][0]["token_ids"] == list(b"echo: What is 2 + 3? => 5")
        assert raw["prompt_token_ids"] == list(b"<|user|>What is 2 + 3?\n<|assistant|>")
        assert len(r.choices[0].logprobs.content) == len(raw["choices"][0]["token_ids"])
