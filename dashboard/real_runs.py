"""Real training runs into one SQLite store, for the dashboard's screenshots.

The docs must show what a job really leaves in the store, so ``fill_real_store(path)``
runs, one after the other, against the same store:

1. **APO** on the room-booking task of the APO tests (``tests/algorithms/apo/world.py``):
   the agent is rewarded when the prompt names what the task needs; the critic and
   editor are the scripted chat server of those tests (real HTTP, answers by rule). Every
   candidate is a resources version with its parent and critique: the Resources page.
2. **GRPO** on a seeded random tiny Llama over bytes (:func:`agentbolt.models.tiny_model`)
   served by the in-process transformers engine behind the gateway; a rollout succeeds
   when the model's answer starts with a digit. Its metrics (reward, success rate,
   loss, KL, tokens per second, validation every 3 steps) are the Training page.
3. The calculator agent evaluated through the gateway (``tests/dashboard/filled_store.py``):
   a retried attempt, a failed rollout, model calls with logprobs — the Rollouts and
   rollout pages — then a few queued rollouts, one claimed by a live runner (Workers).

About a minute and a half of CPU.
"""

from __future__ import annotations

import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import openai

# tests/ is on sys.path (screenshots.py puts it there): the APO tests' world and critic
from algorithms.apo.scripted_llm import serve_scripted_llm
from algorithms.apo.world import INITIAL, critic, room_agent, tasks
from dashboard.filled_store import (
    FilledStore,
    add_queue_and_live_worker,
    run_async,
    run_calculator,
)

import agentbolt
from agentbolt.algorithms import APO, APOConfig
from agentbolt.algorithms.grpo import GRPO, GRPOConfig
from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.models import tiny_model
from agentbolt.store.sqlite import SqliteStore

APO_RUN = "apo-room-booking"
GRPO_RUN = "grpo-tiny-digits"
GRPO_STEPS = 12


@dataclass
class RealStore:
    """What :func:`fill_real_store` left in the store, for the screenshots to open."""

    filled: FilledStore
    apo_versions: dict[str, int]
    """Resources version of each APO candidate id (``c0``, ``c1``...)."""
    apo_parents: dict[str, str | None]
    apo_best_version: int
    """The version APO published last: its best candidate."""
    grpo_steps: int


def _prompts(n: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    words = ["apple", "river", "stone", "cloud", "lamp", "tiger", "salt", "moon", "grass", "iron"]
    return [{"prompt": f"{rng.choice(words)} {rng.choice(words)} {rng.randint(0, 99)}"} for _ in range(n)]


async def digit_agent(task: dict[str, str], llm: agentbolt.LLM) -> float:
    """Asks the model through the gateway; 1 when the answer starts with a digit."""
    client = openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5)
    async with client:
        reply = await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["prompt"]}], max_tokens=3
        )
    answer = reply.choices[0].message.content or ""
    return 1.0 if answer[:1].isdigit() else 0.0


def run_apo(path: Path, work: Path) -> tuple[dict[str, int], dict[str, str | None], int]:
    """Three rounds of APO beam search with the scripted critic/editor."""
    cfg = APOConfig(
        beam_width=2, branch_factor=2, rounds=3, train_batch_size=4, val_batch_size=None,
        max_failures_shown=1, run_dir=str(work / "apo"), run_name=APO_RUN, progress=False,
    )
    with serve_scripted_llm() as llm:
        apo = APO(cfg, initial_prompt=INITIAL, critic=critic(llm.base_url))
        result = agentbolt.Trainer(algorithm=apo, store=SqliteStore(path), n_runners=2).fit(
            room_agent, tasks(), tasks()
        )
    print(f"APO: best {result.best.candidate_id} mean_val {result.best.mean_val} of {len(result.candidates)}")

    async def versions() -> tuple[dict[str, int], int]:
        async with SqliteStore(path) as store:
            page = await store.query_resources(limit=1000)
        out: dict[str, int] = {}
        best = 0
        for v in sorted(page.items, key=lambda r: r.version):
            apo = v.metadata.get("apo", {})
            if apo.get("candidate_id") and apo["candidate_id"] not in out:
                out[apo["candidate_id"]] = v.version
            if apo.get("best"):
                best = v.version
        return out, best

    published, best = run_async(versions())
    return published, {c.candidate_id: c.parent_id for c in result.candidates}, best


def run_grpo(path: Path, work: Path) -> int:
    """A few GRPO steps of a tiny byte model behind the gateway (full fine-tuning, KL logged)."""
    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    engine = TransformersEngine(model, tokenizer, max_batch_size=32, num_threads=1, default_max_tokens=3)
    config = GRPOConfig(
        max_steps=GRPO_STEPS, tasks_per_step=8, group_size=8, learning_rate=1e-2, lora=None, log_kl=True,
        eval_every=3, checkpoint_every=0, run_dir=str(work / "grpo"), run_name=GRPO_RUN, seed=0,
    )
    trainer = agentbolt.Trainer(
        algorithm=GRPO(config), store=SqliteStore(path), n_runners=2, runner=agentbolt.Runner(concurrency=32),
        gateway=Gateway(engine, GatewayConfig(retry_after=1)),
    )
    result = trainer.fit(digit_agent, _prompts(40, seed=1), _prompts(24, seed=2))
    before = result.before.success_rate if result.before else None
    after = result.after.success_rate if result.after else None
    print(f"GRPO: {result.steps} steps, held-out success {before} -> {after}")
    return result.steps


def fill_real_store(path: Path) -> RealStore:
    """Run APO, GRPO and the calculator evaluation into the SQLite store at ``path``."""
    with tempfile.TemporaryDirectory() as work:
        t = time.monotonic()
        versions, parents, best = run_apo(path, Path(work))
        print(f"APO run: {time.monotonic() - t:.0f} s")
        t = time.monotonic()
        steps = run_grpo(path, Path(work))
        print(f"GRPO run: {time.monotonic() - t:.0f} s")
    filled = run_async(run_calculator(path))
    run_async(add_queue_and_live_worker(filled))
    return RealStore(filled=filled, apo_versions=versions, apo_parents=parents, apo_best_version=best,
                     grpo_steps=steps)
