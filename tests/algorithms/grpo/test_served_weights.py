"""What is trained is what is served, when an engine already serves a LoRA: a
trainer whose policy is a copy of the served model (SFT's LoRA merged in) plus a fresh
LoRA must, after publishing, be served exactly that — not its delta on the weights
from before SFT's LoRA."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from agentbolt.algorithms.gateway_access import engine_weights
from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.gateway import Gateway, LocalGatewayControl
from agentbolt.models import tiny_model
from agentbolt.training.lora import LoraSettings
from agentbolt.training.policy import Policy
from agentbolt.training.publish import (
    EngineInfo,
    Publisher,
    engine_info,
    numerics_match,
    policy_device,
)

LORA = LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"])
PROBE = torch.tensor([[1, *range(40, 90)]])


def engine_vs_trainer(engine: TransformersEngine, policy: Policy) -> float:
    """max |Δ logprob| between the served model and the trainer's policy on a probe."""
    mask = torch.ones_like(PROBE)
    trained = policy.inference_logprobs(PROBE, mask)
    with torch.no_grad():
        served = policy.token_logprobs(PROBE, mask, model=engine.model)[0]
    return float((trained - served).abs().max())


def _sft_policy(control: Any) -> Policy:
    """SFT's policy: a copy of the served model with a trained (non-zero) LoRA."""
    model, tok = engine_weights(control)  # type: ignore[misc]
    policy = Policy(model, tok, lora=LORA)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(len(name)))
    return policy


async def test_a_fresh_lora_on_a_copy_of_an_sft_model_is_served_on_top_of_sft() -> None:
    model, tok = tiny_model(seed=3, vocab="bytes", hidden=32, n_layers=1)
    engine = TransformersEngine(model, tok, num_threads=1)
    control = LocalGatewayControl(Gateway(engine))
    await engine.start()
    try:
        sft = _sft_policy(control)
        assert await control.update_weights(**sft.engine_update()) == 1
        assert engine_vs_trainer(engine, sft) < 1e-4

        grpo = Policy(*engine_weights(control), lora=LORA)  # type: ignore[misc]  # B = 0: serves what SFT served
        assert engine_vs_trainer(engine, grpo) < 1e-4
        assert await control.update_weights(**grpo.engine_update()) == 2
        assert engine_vs_trainer(engine, grpo) < 1e-4  # before the fix: 0.2 (SFT's LoRA dropped)

        with torch.no_grad():  # GRPO trains; its later LoRAs keep replacing each other on top of SFT
            for name, p in grpo.model.named_parameters():
                if "lora_B" in name:
                    p.add_(0.1)
        await control.update_weights(**grpo.engine_update())
        assert engine_vs_trainer(engine, grpo) < 1e-4
        await control.update_weights(**grpo.engine_update())  # the same LoRA again: no piling up
        assert engine_vs_trainer(engine, grpo) < 1e-4
    finally:
        await engine.close()


async def test_the_publisher_probes_the_engine_and_stops_on_a_mismatch() -> None:
    model, tok = tiny_model(seed=4, vocab="bytes", hidden=32, n_layers=1)
    engine = TransformersEngine(model, tok, num_threads=1)
    control = LocalGatewayControl(Gateway(engine))
    await engine.start()
    try:
        policy = Policy(*engine_weights(control), lora=LORA)  # type: ignore[misc]
        info = await engine_info(control)
        assert info.local and info.dtype == "torch.float32" and info.device == "cpu"
        assert numerics_match(policy, info)
        publisher = Publisher(control, policy, info, lora_dir="unused")
        version, values = await publisher.publish(7, PROBE[0].tolist())
        assert version == 7 and values["publish/max_abs_logprob_diff"] < 1e-4

        with torch.no_grad():  # someone else changes the served weights behind the trainer's back
            engine.model.model.norm.weight.mul_(3.0)
        from agentbolt.training.publish import PublishMismatchError

        with pytest.raises(PublishMismatchError, match="serves other weights than the trainer trains"):
            await publisher.agreement(PROBE[0].tolist())
    finally:
        await engine.close()


def test_the_policy_goes_where_it_is_told_or_where_the_engine_is() -> None:
    here = EngineInfo("transformers", "torch.float32", "cuda:1", ("lora",), local=True)
    remote = EngineInfo("vllm", None, None, ("lora_path",), local=False)
    assert policy_device("cpu", here) == "cpu"
    assert policy_device(None, here) == "cuda:1"
    assert policy_device(None, remote) == ("cuda" if torch.cuda.is_available() else "cpu")


def test_numerics_match_only_for_the_same_dtype_and_device() -> None:
    model, tok = tiny_model(seed=1, vocab="bytes", hidden=32, n_layers=1)
    fp32 = Policy(model, tok, lora=LORA, dtype="float32")
    assert numerics_match(fp32, EngineInfo("transformers", "torch.float32", "cpu", (), local=True))
    assert not numerics_match(fp32, EngineInfo("transformers", "torch.bfloat16", "cpu", (), local=True))
    bf16 = Policy(tiny_model(seed=1, vocab="bytes", hidden=32, n_layers=1)[0], tok, lora=LORA, dtype="bfloat16")
    assert not numerics_match(bf16, EngineInfo("transformers", "torch.bfloat16", "cpu", (), local=True))
    assert not numerics_match(fp32, EngineInfo("transformers", "torch.float32", "cuda:0", (), local=True))
    assert numerics_match(fp32, EngineInfo("transformers", "torch.float32", "cpu", (), local=False))  # a server's
    assert not numerics_match(fp32, EngineInfo("vllm", None, None, ("lora_path",), local=False))


if __name__ == "__main__":  # pragma: no cover
    asyncio.run(test_a_fresh_lora_on_a_copy_of_an_sft_model_is_served_on_top_of_sft())


def test_a_bf16_trainer_next_to_an_fp32_engine_recomputes_pi_old(tmp_path: Any) -> None:
    from agentbolt.algorithms.grpo import GRPO
    from agentbolt.metrics import read_jsonl
    from algorithms.grpo import resume_worker

    config = resume_worker.config(tmp_path / "run", max_steps=2).model_copy(update={"dtype": "bfloat16"})
    algorithm = GRPO(config)  # a copy of the served (float32) model, trained in bf16
    result = resume_worker.trainer(algorithm, tmp_path / "store.db").fit(resume_worker.byte_agent,
                                                                         resume_worker.TASKS)
    assert algorithm.policy.dtype == torch.bfloat16 and algorithm.learner.sync.recompute_old
    rows = [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "train/loss" in r]
    assert rows and result.policy_version == len(rows)
    for row in rows:  # π_old is the trainer's own: the first (only) epoch starts at ratio 1
        assert row["train/ratio_mean"] == pytest.approx(1.0, abs=1e-4)
        assert row["train/clip_fraction"] == 0.0
        assert row["train/stale_samples"] == 0
        assert row["publish/max_abs_logprob_diff"] > 1e-4  # bf16 vs fp32: reported, not a failure


def test_the_engines_dtype_is_settable_and_reported() -> None:
    from agentbolt.cli.server_cmd import EngineKind, _gateway_spec

    spec = _gateway_spec(EngineKind.TRANSFORMERS, None, None, None, "smollm2", "cpu", None, None, dtype="bfloat16")
    assert spec is not None and spec.engine.dtype == "bfloat16"
    model, tok = tiny_model(seed=1, vocab="bytes", hidden=32, n_layers=1)
    status = Gateway(TransformersEngine(model, tok, dtype=torch.bfloat16)).status()
    assert status["dtype"] == "torch.bfloat16" and status["device"] == "cpu"
    assert status["weight_formats"] == ["state_dict", "lora", "lora_path"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_grpo_given_an_sft_export_trains_on_top_of_the_sft_lora_the_engine_serves(tmp_path: Any,
                                                                                     dtype: str) -> None:
    """``GRPO(model=<SFT's export>)`` on the engine SFT published to: GRPO adopts the served
    weights as the base of its LoRA, so every publish serves what it trains (before the
    fix its LoRA went onto the pre-SFT weights: raised in fp32, silent in bf16)."""
    import copy

    from agentbolt.algorithms.grpo import GRPO
    from agentbolt.metrics import read_jsonl
    from algorithms.grpo import resume_worker

    served, tok = tiny_model(seed=5, vocab="bytes", hidden=32, n_layers=1)
    sft = _sft_policy_of(copy.deepcopy(served), tok)
    engine = TransformersEngine(served, tok, max_batch_size=16, num_threads=1, default_max_tokens=3,
                                dtype=getattr(torch, dtype))

    async def publish_sft() -> None:
        await engine.start()
        try:
            await LocalGatewayControl(Gateway(engine)).update_weights(**sft.engine_update())
        finally:
            await engine.close()

    asyncio.run(publish_sft())
    config = resume_worker.config(tmp_path / "run", max_steps=2).model_copy(update={"dtype": dtype})
    algorithm = GRPO(config, model=sft.merged_model(), tokenizer=tok)
    import agentbolt
    from agentbolt.gateway import GatewayConfig

    trainer = agentbolt.Trainer(algorithm=algorithm, n_runners=1, runner=agentbolt.Runner(concurrency=16),
                                store=str(tmp_path / "store.db"), gateway=Gateway(engine, GatewayConfig(retry_after=1)))
    result = trainer.fit(resume_worker.byte_agent, resume_worker.TASKS)
    rows = [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "train/loss" in r]
    assert rows and result.policy_version == 1 + len(rows)  # SFT's version, then one per GRPO step
    # fp32: rounding only; bf16 on this 1-layer model: 8-bit rounding (before the fix: > 0.3)
    assert max(r["publish/max_abs_logprob_diff"] for r in rows) < (1e-4 if dtype == "float32" else 0.02)


def _sft_policy_of(model: Any, tok: Any) -> Policy:
    policy = Policy(model, tok, lora=LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(len(name)))
    return policy
