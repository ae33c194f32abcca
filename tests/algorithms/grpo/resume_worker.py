"""A small GRPO run on a SQLite store, for the crash-and-resume test.

    python resume_worker.py RUN_DIR STORE_DB MAX_STEPS --hang-after 2

``--hang-after N``: once the checkpoint of step N exists, every new rollout hangs, so
the test can SIGKILL the process in the middle of step N + 1 (before its checkpoint).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import torch

import agentbolt
from agentbolt.algorithms.grpo import GRPO, GRPOConfig
from agentbolt.training.lora import LoraSettings
from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.models import tiny_model

TASKS = [{"prompt": f"task {i}"} for i in range(5)]
HANG_ENV = "AGENTBOLT_TEST_HANG_WHEN_EXISTS"


async def byte_agent(task: dict[str, str], llm: Any) -> float:
    """One model call; the reward is the first byte of the answer (differs within a group)."""
    import openai

    hang = os.environ.get(HANG_ENV)
    if hang and Path(hang).exists():
        await asyncio.sleep(600)
    client = openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5)
    async with client:
        answer = await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["prompt"]}], max_tokens=3)
    text = answer.choices[0].message.content or ""
    return ord(text[0]) / 1000 if text else 0.0


def config(run_dir: Path, max_steps: int) -> GRPOConfig:
    return GRPOConfig(max_steps=max_steps, tasks_per_step=2, group_size=4, learning_rate=5e-2, seed=0,
                      lora=LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]), checkpoint_every=1,
                      keep_checkpoints=10, eval_before=False, eval_after=False, progress=False,
                      run_dir=str(run_dir), loggers=["jsonl"])


def trainer(algorithm: GRPO, store_db: Path) -> agentbolt.Trainer:
    """A trainer whose engine starts from the untrained weights, like a restarted process."""
    torch.set_num_threads(1)
    served, tok = tiny_model(seed=5, vocab="bytes", hidden=32, n_layers=1)
    engine = TransformersEngine(served, tok, max_batch_size=16, num_threads=1, default_max_tokens=3)
    return agentbolt.Trainer(algorithm=algorithm, n_runners=1, runner=agentbolt.Runner(concurrency=16),
                             store=str(store_db), gateway=Gateway(engine, GatewayConfig(retry_after=1)))


def policy_model() -> tuple[Any, Any]:
    return tiny_model(seed=5, vocab="bytes", hidden=32, n_layers=1)


def main() -> None:
    run_dir, store_db, max_steps = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    if "--hang-after" in sys.argv:
        n = int(sys.argv[sys.argv.index("--hang-after") + 1])
        os.environ[HANG_ENV] = str(run_dir / "checkpoints" / f"step-{n:06d}")
    model, tok = policy_model()
    trainer(GRPO(config(run_dir, max_steps), model=model, tokenizer=tok), store_db).fit(byte_agent, TASKS)


if __name__ == "__main__":
    main()
