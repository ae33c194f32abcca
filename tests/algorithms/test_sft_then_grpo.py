"""The documented path SFT → GRPO on one engine (one ``Gateway`` given to both trainers):
SFT publishes its LoRA, GRPO builds its policy from the served model and trains its own
LoRA on top — and at every publish of either, the engine's logprobs equal the
trainer's (``publish/max_abs_logprob_diff``). Before GRPO's fix the first GRPO publish
served the base model + GRPO's delta, dropping SFT's LoRA (|Δ| ≈ 0.2 and the held-out
success SFT bought gone)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

import agentbolt
from agentbolt.algorithms import SFT, SFTConfig
from agentbolt.algorithms.grpo import GRPO, GRPOConfig
from agentbolt.training.lora import LoraSettings
from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.metrics import read_jsonl
from agentbolt.models import tiny_model
from agentbolt.store.memory import MemoryStore
from tests.algorithms.sft.agents import record, tasks

LORA = LoraSettings(r=16, alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                    "down_proj"])


async def graded_agent(task: dict[str, Any], llm: Any) -> float:
    """1.0 for exactly the expected answer (a success); otherwise 0.5 for its first letter
    plus a tie-breaker from the first byte, so GRPO's groups always carry signal."""
    import openai

    async with openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5) as client:
        answer = await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["prompt"]}], max_tokens=4)
    text = (answer.choices[0].message.content or "").strip()
    if text == task["answer"]:
        return 1.0
    return (0.5 if text[:1] == task["answer"][:1] else 0.0) + (ord(text[0]) % 100 if text else 0) / 1000


@pytest.mark.slow
def test_sft_then_grpo_on_one_engine_serves_what_each_trains(tmp_path: Path) -> None:
    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    engine = TransformersEngine(model, tokenizer, max_batch_size=32, num_threads=1, default_max_tokens=4)
    gateway, store = Gateway(engine, GatewayConfig(retry_after=1)), MemoryStore()
    train, val = tasks(24, seed=1), tasks(16, seed=2)

    def trainer(algorithm: object) -> agentbolt.Trainer:
        return agentbolt.Trainer(algorithm=algorithm, n_runners=1, runner=agentbolt.Runner(concurrency=32),
                                 store=store, gateway=gateway)

    sft_config = SFTConfig(epochs=12, batch_size=4, learning_rate=1e-2, lora=LORA, run_dir=str(tmp_path / "sft"),
                           progress=False, eval_before=True)
    sft = trainer(SFT(sft_config, records=[record(t) for t in train])).fit(graded_agent, train, val)
    assert sft.before is not None and sft.after is not None
    assert sft.after.mean_reward > sft.before.mean_reward + 0.2  # SFT bought something GRPO must keep
    sft_rows = [r for r in read_jsonl(tmp_path / "sft" / "metrics.jsonl") if "train/loss" in r]
    assert [r["publish/max_abs_logprob_diff"] < 1e-4 for r in sft_rows] == [True]

    grpo_config = GRPOConfig(max_steps=3, tasks_per_step=4, group_size=4, learning_rate=1e-3, lora=LORA,
                             run_dir=str(tmp_path / "grpo"), progress=False, eval_before=False, loggers=["jsonl"])
    grpo = trainer(GRPO(grpo_config)).fit(graded_agent, train, val)  # policy: a copy of what the engine serves
    published = [r for r in read_jsonl(tmp_path / "grpo" / "metrics.jsonl") if "train/loss" in r]
    assert published, "GRPO made no update"
    diffs = [r["publish/max_abs_logprob_diff"] for r in published]
    assert max(diffs) < 1e-4, diffs
    assert all(r["train/ratio_mean"] == pytest.approx(1.0, abs=1e-3) for r in published)  # π_old = the served policy
    assert grpo.policy_version == sft.policy_version + len(published)
    assert grpo.after is not None
    print(f"held-out success / mean reward: before {sft.before.headline()}; after SFT {sft.after.headline()}; "
          f"after GRPO {grpo.after.headline()}; publish |Δ logprob| ≤ {max(diffs):.1e}")
    assert grpo.after.mean_reward >= sft.after.mean_reward - 0.15  # SFT's LoRA still served under GRPO's
