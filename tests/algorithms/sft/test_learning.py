"""SFT learns through the real path: records or sampled rollouts → the chat template →
the update → weights published to the engine behind the gateway → better held-out
success (greedy), with a real Trainer, the in-process transformers engine serving a
seeded random tiny model, runners and the store."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

import agentbolt
from agentbolt.algorithms import SFT, SFTConfig, SFTResult
from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.metrics import read_jsonl
from agentbolt.models import tiny_model
from tests.algorithms.sft.agents import exact_agent, record, tasks


def trainer(sft: SFT) -> agentbolt.Trainer:
    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    engine = TransformersEngine(model, tokenizer, max_batch_size=32, num_threads=1, default_max_tokens=4)
    return agentbolt.Trainer(algorithm=sft, n_runners=1, runner=agentbolt.Runner(concurrency=32),
                             gateway=Gateway(engine, GatewayConfig(retry_after=1)))


def read_records(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_sft_on_records_raises_held_out_success(tmp_path: Path) -> None:
    train, val = tasks(32, seed=1), tasks(16, seed=2)
    unique = len({t["prompt"] for t in train})  # a repeated task gives the same record: learned once
    config = SFTConfig(epochs=12, batch_size=4, learning_rate=5e-3, lora=None, run_dir=str(tmp_path / "run"),
                       progress=False)
    result: SFTResult = trainer(SFT(config, records=[record(t) for t in train])).fit(exact_agent, train, val)

    assert result.before is not None and result.after is not None
    assert result.before.success_rate == 0.0
    assert result.after.success_rate is not None and result.after.success_rate >= 0.9, result.history
    assert result.iterations == 1 and result.n_records == [unique] and result.policy_version == 1
    run = tmp_path / "run"
    assert len(read_records(run / "records" / "iteration-1.jsonl")) == unique
    rows = read_jsonl(run / "metrics.jsonl")
    trained = [r for r in rows if "train/loss" in r]
    assert len(trained) == 1 and trained[0]["train/loss"] < trained[0]["train/first_epoch_loss"]
    assert trained[0]["train/optimizer_steps"] == 12 * -(-unique // 4) and trained[0]["policy_version"] == 1
    assert [r["val/success_rate"] for r in rows if "val/success_rate" in r] == [0.0, result.after.success_rate]
    assert (run / "model" / "config.json").is_file() and (run / "checkpoints" / "step-000001").is_dir()


def test_rejection_sampling_trains_on_the_good_samples_of_the_policy(tmp_path: Path) -> None:
    """Iteration 1 warms up on a few records; iteration 2 samples the policy (T=1), keeps
    the exact answers, trains and publishes again. Broken tasks never enter."""
    train = tasks(16, seed=1) + [{"prompt": "fruit broken 1", "answer": "ok", "fail": True}]
    config = SFTConfig(iterations=2, samples_per_task=4, min_reward=1.0, top_k_per_task=2, epochs=10, batch_size=4,
                       learning_rate=5e-3, lora=None, run_dir=str(tmp_path / "run"), progress=False,
                       eval_before=False, eval_after=False)
    sft = SFT(config, records=[record(t) for t in train[:12]])
    result = trainer(sft).fit(exact_agent, train)

    assert result.iterations == 2 and result.policy_version == 2
    first, second = result.history
    assert "sample/rollouts" not in first and second["sample/rollouts"] == 17 * 4
    assert second["sample/not_succeeded"] == 4  # the broken task's rollouts: failed, not zero-reward samples
    assert second["sample/success_rate"] > 0 and second["sample/selected"] > 0
    sampled = read_records(tmp_path / "run" / "records" / "iteration-2.jsonl")
    assert len(sampled) == result.n_records[1] == second["data/records"] > 0
    by_prompt = {t["prompt"]: t["answer"] for t in train}
    # the agent grades the stripped reply: a kept sample may carry a trailing space (sampled at T=1)
    assert all(r["messages"][-1]["content"].strip() == by_prompt[r["messages"][0]["content"]] for r in sampled)
    assert not any("broken" in r["messages"][0]["content"] for r in sampled)
    per_task = [sum(r["messages"][0]["content"] == p for r in sampled) for p in by_prompt]
    assert max(per_task) <= 2  # top_k_per_task=2 (and identical samples are learned once)


def test_teacher_rollouts_recorded_through_another_engine_are_learned_from(tmp_path: Path) -> None:
    """Phase 1 records a teacher (an OpenAI-compatible server) through the gateway; phase 2
    fine-tunes the tiny model on the teacher's rollouts that passed, found by id."""
    from agentbolt.algorithms import Evaluate
    from agentbolt.engines import EngineSpec
    from tests.algorithms.sft.agents import teacher_agent
    from tests.fakes.openai_server import serve_fake_openai

    store = f"sqlite:///{tmp_path / 'store.db'}"
    train = [{"prompt": "fruit a 1"}, {"prompt": "metal b 2", "teacher_reward": 0.0}, {"prompt": "fruit c 3"},
             {"prompt": "metal d 4", "fail": True}]
    with serve_fake_openai() as url:
        recorded = agentbolt.Trainer(algorithm=Evaluate("train", mode="test", show=False), store=store,
                                     resources={"llm": agentbolt.gateway_llm()},
                                     gateway=EngineSpec(kind="openai", url=url)).fit(teacher_agent, train)
    ids = [row.rollout_id for row in recorded.rows]

    config = SFTConfig(epochs=1, lora=None, run_dir=str(tmp_path / "run"), progress=False)
    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    engine = TransformersEngine(model, tokenizer, num_threads=1, default_max_tokens=4)
    result = agentbolt.Trainer(algorithm=SFT(config, rollouts=ids), store=store, gateway=Gateway(engine)).fit(
        teacher_agent, train)

    learned = read_records(tmp_path / "run" / "records" / "iteration-1.jsonl")
    assert learned == [{"messages": [{"role": "user", "content": p}, {"role": "assistant", "content": f"echo: {p}"}]}
                       for p in ("fruit a 1", "fruit c 3")]
    assert result.n_records == [2] and result.policy_version == 1
    assert (result.history[0]["given/rollouts"], result.history[0]["given/not_succeeded"]) == (4, 1)


def test_sft_given_other_weights_than_the_engine_serves_refuses_before_training(tmp_path: Path) -> None:
    """SFT(model=...) is checked like GRPO(model=...): the engine serves seed 3, SFT was given seed 4."""
    from agentbolt.training.publish import ServedWeightsMismatchError

    other, tokenizer = tiny_model(seed=4, vocab="bytes", hidden=64, n_layers=2)
    train = tasks(4, seed=1)
    config = SFTConfig(epochs=1, batch_size=4, run_dir=str(tmp_path / "sft"), progress=False, eval_before=False,
                       eval_after=False)
    with pytest.raises(ServedWeightsMismatchError, match="does not serve the weights this trainer was given"):
        trainer(SFT(config, model=other, tokenizer=tokenizer, records=[record(t) for t in train])).fit(
            exact_agent, train)
