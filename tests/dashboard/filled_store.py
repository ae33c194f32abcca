"""A SQLite store filled by a short real run, for the dashboard's browser tests and screenshots.

``fill_store(path)`` runs a small Python agent through :class:`agentbolt.Trainer` with
:class:`~agentbolt.algorithms.evaluate.Evaluate`, the model gateway in front of a
scripted engine (``gateway.fakes.FakeEngine``: token ids and logprobs), so the store
holds what a real job leaves: rollouts with nested spans, recorded model calls, rewards,
a retried attempt and a failed rollout, a runner worker; then a few queued training
rollouts, one claimed by a live worker. For the tests it also adds a training fixture:
metric records of a run named ``metrics-fixture`` (synthetic numbers, so a test can add
steps and watch the curves grow) and a second prompt-template version with APO-style
metadata. The screenshots (``dashboard/screenshots.py``) leave the fixture out and fill
the Training and Resources pages with real GRPO and APO runs instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
from gateway.fakes import FakeEngine

import agentbolt
from agentbolt import (
    LLM,
    MetricRecord,
    PromptTemplate,
    RetryableError,
    RolloutCreate,
    RolloutMode,
)
from agentbolt.algorithms.evaluate import Evaluate
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import WorkerStatus

T = TypeVar("T")

RUN_ID = "metrics-fixture"
"""The synthetic metric run of the tests (not a real training run)."""
PROMPT_V1 = "Add the numbers.\nQuestion: {question}\nAnswer with a number."
PROMPT_V2 = (
    "You are a careful calculator.\nAdd the numbers step by step.\nQuestion: {question}\n"
    "Answer with the number only."
)
N_TASKS = 6
FAILING_TASK = 4  # raises: its rollout fails
RETRIED_TASK = 2  # its first attempt raises a RetryableError: two attempts
LIVE_WORKER = "runner-live-1"


@dataclass
class FilledStore:
    """What :func:`fill_store` put in the store, for the tests to look for."""

    path: Path
    rollout_ids: list[str] = field(default_factory=list)
    succeeded: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    retried: str = ""
    queued: list[str] = field(default_factory=list)
    claimed: str = ""  # a queued rollout the live worker holds
    metric_steps: int = 0


_seen_attempts: set[str] = set()


@agentbolt.rollout(name="calculator")
async def calculator(task: dict[str, Any], llm: LLM, prompt_template: PromptTemplate, rollout: agentbolt.Rollout) -> float:
    """Plans, asks the model through the gateway, checks, and reports rewards as it goes."""
    with agentbolt.operation("plan") as op:
        op.set_input(task)
        await asyncio.sleep(0.02)
        op.set_output({"steps": ["ask the model", "check"]})
    if task["i"] == RETRIED_TASK and rollout.rollout_id not in _seen_attempts:
        _seen_attempts.add(rollout.rollout_id)
        raise RetryableError("the calculator's tool was busy; try again")
    async with httpx.AsyncClient(timeout=30) as client:
        reply = await client.post(
            f"{llm.endpoint}/chat/completions",
            headers={"Authorization": f"Bearer {llm.api_key}"},
            json={
                "model": llm.model,
                "messages": [
                    {"role": "system", "content": "You add numbers."},
                    {"role": "user", "content": prompt_template.format(question=task["question"])},
                ],
                "logprobs": True,
            },
        )
        reply.raise_for_status()
        text = reply.json()["choices"][0]["message"]["content"]
    agentbolt.emit_reward(format=1.0)
    with agentbolt.operation("check") as op:
        op.set_input(text)
        await asyncio.sleep(0.01)
        if task["i"] == FAILING_TASK:
            raise ValueError(f"cannot read a number in {text!r}")
        op.set_output(task["i"] % 2 == 0)
    return 1.0 if task["i"] % 2 == 0 else 0.25


def metric_record(step: int) -> MetricRecord:
    """Synthetic numbers under the keys GRPO logs at ``step`` (a curve that improves),
    evaluation every 2 steps: a fixture for the live-refresh test, not a training run."""
    values: dict[str, float | int] = {
        "reward/mean": round(0.2 + 0.07 * step, 4),
        "success_rate": round(min(1.0, 0.1 + 0.08 * step), 4),
        "train/loss": round(1.0 / (1 + step), 4),
        "train/kl": round(0.001 * step, 5),
        "train/tokens_per_second": 1500 + 25 * step,
        "policy_version": step + 1,
    }
    if step % 2 == 0:
        values["val/success_rate"] = round(min(1.0, 0.15 + 0.09 * step), 4)
        values["val/mean_reward"] = round(0.25 + 0.06 * step, 4)
    return MetricRecord(run_id=RUN_ID, step=step, values=values)


async def add_metric_steps(store: Any, steps: range) -> None:
    await store.add_metrics([metric_record(s) for s in steps])


async def run_calculator(path: Path) -> FilledStore:
    """The real part: the calculator agent evaluated through the gateway into the SQLite
    store at ``path`` (created if new); a few seconds."""
    _seen_attempts.clear()
    tasks = [{"i": i, "question": f"{i} + {i}"} for i in range(N_TASKS)]
    gateway = Gateway(FakeEngine(), GatewayConfig(span_flush_interval=0.01))
    trainer = agentbolt.Trainer(
        algorithm=Evaluate(show=False, threshold=1.0),
        store=SqliteStore(path),
        gateway=gateway,
        resources={"llm": agentbolt.gateway_llm(), "prompt_template": PromptTemplate(template=PROMPT_V1)},
    )
    result = await trainer.fit_async(calculator, tasks)
    filled = FilledStore(path=path)
    filled.rollout_ids = [r.rollout_id for r in result.rows]
    filled.succeeded = [r.rollout_id for r in result.rows if r.status == "succeeded"]
    filled.failed = [r.rollout_id for r in result.rows if r.status == "failed"]
    filled.retried = result.rows[RETRIED_TASK].rollout_id
    return filled


async def add_queue_and_live_worker(filled: FilledStore) -> None:
    """Queue three training rollouts and have a live runner claim the first."""
    async with SqliteStore(filled.path) as store:
        queued = await store.enqueue_rollouts(
            [RolloutCreate(input={"i": i, "question": f"{i} * 3"}, mode=RolloutMode.TRAIN) for i in range(3)]
        )
        filled.queued = [r.rollout_id for r in queued]
        await store.update_worker(LIVE_WORKER, status=WorkerStatus.IDLE, metadata={"kind": "runner"})
        claims = await store.claim_rollouts(LIVE_WORKER, 1, "fill-claim")
        filled.claimed = claims[0].rollout.rollout_id


async def add_training_fixture(filled: FilledStore, metric_steps: int) -> None:
    """The tests' synthetic training data: ``metric_steps`` metric records of
    :data:`RUN_ID` and a second prompt version carrying APO-style candidate metadata."""
    filled.metric_steps = metric_steps
    async with SqliteStore(filled.path) as store:
        await add_metric_steps(store, range(metric_steps))
        await store.update_resources(
            {"prompt_template": PromptTemplate(template=PROMPT_V2)},
            metadata={
                "apo": {
                    "candidate_id": "c-2",
                    "parent_id": "c-1",
                    "round": 1,
                    "critique": "The answers carried words around the number; ask for the number only.",
                }
            },
        )


async def fill_store_async(path: Path, *, metric_steps: int = 6) -> FilledStore:
    """Fill a new SQLite store at ``path`` for the tests (see the module docstring); a few seconds."""
    filled = await run_calculator(path)
    await add_training_fixture(filled, metric_steps)
    await add_queue_and_live_worker(filled)
    return filled


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to the end from sync code, even where an event loop is running
    (Playwright's sync API keeps one in the main thread): in a thread of its own."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def fill_store(path: Path, *, metric_steps: int = 6) -> FilledStore:
    return run_async(fill_store_async(path, metric_steps=metric_steps))
