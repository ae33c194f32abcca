"""GRPO publishes to vLLM: each update's LoRA is saved as a peft directory and loaded
through vLLM's runtime LoRA route, and the version goes up — a whole GRPO run against a
recorded fake of vLLM's API (no GPU here)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

import openai
from gateway.vllm_fake import BASE_MODEL, FakeVLLM

import agentbolt
from agentbolt.algorithms.grpo import GRPO, GRPOConfig
from agentbolt.training.lora import LoraSettings
from agentbolt.engines import VLLMEngine
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.metrics import read_jsonl
from agentbolt.server.testing import serve_app_in_thread


async def any_agent(task: dict[str, str], llm: agentbolt.LLM) -> float:
    """One call; a random reward, so every group carries signal."""
    client = openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5)
    async with client:
        await client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": task["q"]}])
    return random.random()


def _policy_model() -> torch.nn.Module:
    """A tiny Llama whose vocabulary holds the fake's token ids (up to 30124)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=30200, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return LlamaForCausalLM(config)


def test_grpo_saves_each_lora_and_loads_it_through_vllms_runtime_lora_route(tmp_path: Path) -> None:
    fake = FakeVLLM()
    loras = tmp_path / "shared" / "loras"
    config = GRPOConfig(max_steps=2, tasks_per_step=1, group_size=4, learning_rate=1e-2, run_dir=str(tmp_path / "run"),
                        lora=LoraSettings(r=2, alpha=4, target_modules=["q_proj", "v_proj"]), lora_dir=str(loras),
                        eval_before=False, eval_after=False, progress=False, loggers=["jsonl"], checkpoint_every=0)
    algorithm = GRPO(config, model=_policy_model())
    with serve_app_in_thread(fake.app) as url:
        engine = VLLMEngine(url + "/v1", model=BASE_MODEL, policy_version=0)
        trainer = agentbolt.Trainer(algorithm=algorithm, runner=agentbolt.Runner(concurrency=4),
                                    gateway=Gateway(engine, GatewayConfig(retry_after=1)))
        result = trainer.fit(any_agent, [{"q": "2+2?"}, {"q": "3+3?"}])

    assert result.policy_version == 2 and engine.policy_version == 2
    loads = [body for route, body in fake.lora_calls if route == "load"]
    assert loads == [{"lora_name": "agentbolt-lora-v1", "lora_path": str((loras / "v1").resolve())},
                     {"lora_name": "agentbolt-lora-v2", "lora_path": str((loras / "v2").resolve())}]
    assert ("unload", {"lora_name": "agentbolt-lora-v1"}) in fake.lora_calls
    assert list(fake.adapters) == ["agentbolt-lora-v2"]
    # calls after the first publish went to the LoRA, by name
    assert {body["model"] for body in fake.seen} >= {BASE_MODEL, "agentbolt-lora-v1"}

    # the directory vLLM read holds the trainer's LoRA, as peft saves it
    latest = loras / "v2"
    assert (latest / "adapter_config.json").is_file() and (latest / "adapter_model.safetensors").is_file()
    from peft import get_peft_model_state_dict
    from safetensors.torch import load_file

    saved = load_file(str(latest / "adapter_model.safetensors"))
    trained = get_peft_model_state_dict(algorithm.policy.model)
    assert saved.keys() == trained.keys() and any("lora_B" in k for k in saved)
    for key, value in trained.items():
        torch.testing.assert_close(saved[key], value.detach().cpu(), rtol=0, atol=0)

    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["policy_version"] for r in rows] == [1, 2]
    assert all(r["train/ratio_mean"] == pytest.approx(1.0, abs=1e-4) for r in rows)  # π_old recomputed: not vLLM's


def test_full_fine_tuning_for_vllm_is_refused_before_training(tmp_path: Path) -> None:
    fake = FakeVLLM()
    config = GRPOConfig(max_steps=1, tasks_per_step=1, group_size=2, lora=None, run_dir=str(tmp_path / "run"),
                        eval_before=False, eval_after=False, progress=False, loggers=["jsonl"])
    with serve_app_in_thread(fake.app) as url:
        trainer = agentbolt.Trainer(algorithm=GRPO(config, model=_policy_model()),
                                    gateway=Gateway(VLLMEngine(url + "/v1", model=BASE_MODEL, policy_version=0)))
        with pytest.raises(ValueError, match="loads LoRAs only"):
            trainer.fit(any_agent, [{"q": "2+2?"}])
    assert fake.seen == [] and fake.lora_calls == []
