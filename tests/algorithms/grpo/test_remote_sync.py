"""GRPO with the engine in another process: the multiprocess strategy serves the
gateway (a transformers engine over a model directory) in the server child process,
and GRPO reaches it through ``RemoteGateway`` — every update goes over the HTTP
weights route, and the server's policy version follows the steps."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from agentbolt.algorithms.grpo import GRPO, GRPOConfig
from agentbolt.engines import EngineSpec
from agentbolt.gateway.control import RemoteGateway
from agentbolt.metrics import read_jsonl
from agentbolt.models import tiny_model
from agentbolt.semconv import LLM_POLICY_VERSION as POLICY_VERSION
from agentbolt.store.sqlite import SqliteStore
from agentbolt.trainer import Trainer
from agentbolt.training.lora import LoraSettings
from algorithms.grpo.agents import byte_agent

TASKS = [{"prompt": f"task {i}"} for i in range(4)]


class StatusRecordingGRPO(GRPO):
    """Asks the server for its gateway status (admin route) after every step."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.statuses: list[dict[str, Any]] = []
        self.controls: list[Any] = []

    async def step(self, ctx: Any, control: Any, *args: Any) -> Any:
        out = await super().step(ctx, control, *args)
        self.controls.append(control)
        self.statuses.append(await control.status())
        return out


def _model_dir(path: Path) -> Path:
    model, tokenizer = tiny_model(seed=7, vocab="bytes", hidden=32, n_layers=1)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_updates_reach_the_engine_of_the_server_process(tmp_path: Path) -> None:
    model_dir = str(_model_dir(tmp_path / "model"))
    cfg = GRPOConfig(max_steps=2, tasks_per_step=2, group_size=4, learning_rate=5e-2, seed=0, progress=False,
                     lora=LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]), eval_before=False,
                     eval_after=False, run_dir=str(tmp_path / "grpo"), loggers=["jsonl"])
    algorithm = StatusRecordingGRPO(cfg, model=model_dir)
    trainer = Trainer(algorithm=algorithm, strategy="multiprocess", n_runners=1, run_dir=str(tmp_path / "run"),
                      gateway=EngineSpec(kind="transformers", path=model_dir, max_tokens=3, num_threads=1))
    result = trainer.fit(byte_agent, TASKS)

    assert all(isinstance(c, RemoteGateway) for c in algorithm.controls)  # not a gateway of this process
    assert [s["policy_version"] for s in algorithm.statuses] == [1, 2]  # the server's engine, asked over HTTP
    assert result.steps == 2 and result.policy_version == 2
    rows = read_jsonl(tmp_path / "grpo" / "metrics.jsonl")
    assert [r["policy_version"] for r in rows] == [1, 2] and all("train/loss" in r for r in rows)

    async def versions_by_step() -> dict[int, set[Any]]:
        out: dict[int, set[Any]] = {}
        async with SqliteStore(tmp_path / "run" / "store.db") as store:
            for rollout in (await store.query_rollouts(limit=1000)).items:
                spans = await store.get_spans(rollout.rollout_id, "latest")
                version = rollout.metadata.get("policy_version")
                calls = [s for s in spans if POLICY_VERSION in s.attributes]
                out.setdefault(version, set()).update(s.attributes[POLICY_VERSION] for s in calls)
        return out

    # groups are enqueued with the version served then; the engine stamps every call
    assert asyncio.run(versions_by_step()) == {0: {0}, 1: {1}}
