"""GRPO's group step with a judge: ``GRPO(config, group_reward=judge)`` scores each group
once its rollouts finished, and the update's advantages are those of the judge's scores;
the judge's calls never become training data; a judge that cannot score stops the run
with its error rather than training on made-up rewards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

import openai

import agentbolt
from agentbolt import semconv
from agentbolt.adapters.calls import extract_model_calls
from agentbolt.algorithms.grpo import GRPO, GRPOConfig
from agentbolt.algorithms.grpo.update import PolicyUpdate
from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.metrics import read_jsonl
from agentbolt.models import tiny_model
from agentbolt.rewards.group import NoGroupScoredError
from agentbolt.rewards.judge import EngineJudgeClient, GroupJudge, JudgeCallError, ScriptedJudgeClient
from agentbolt.store.memory import MemoryStore

from rewards.judge.groups import group_judge_by


async def unrewarded_agent(task: dict[str, str], llm: agentbolt.LLM) -> None:
    """One model call through the gateway, and no reward of its own: the judge gives it."""
    async with openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5) as client:
        await client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": task["prompt"]}],
                                             max_tokens=3)


def _by_first_byte(answer: str) -> float:
    return (ord(answer[0]) % 100) / 100 if answer else 0.0


def _trainer(tmp_path: Path, store: MemoryStore, engine: TransformersEngine, judge: GroupJudge) -> agentbolt.Trainer:
    config = GRPOConfig(max_steps=1, tasks_per_step=2, group_size=4, run_dir=str(tmp_path), progress=False,
                        eval_before=False, eval_after=False, checkpoint_every=0, loggers=["jsonl"])
    return agentbolt.Trainer(algorithm=GRPO(config, group_reward=judge), store=store,
                             gateway=Gateway(engine, GatewayConfig(retry_after=1)),
                             runner=agentbolt.Runner(concurrency=8))


def _engine() -> TransformersEngine:
    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    return TransformersEngine(model, tokenizer, max_batch_size=16, num_threads=1, default_max_tokens=3)


def test_grpo_trains_on_the_judges_scores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trained: list[Any] = []
    step = PolicyUpdate.step

    def spy(self: PolicyUpdate, samples: Any, **kw: Any) -> Any:
        trained.extend(samples)
        return step(self, samples, **kw)

    monkeypatch.setattr(PolicyUpdate, "step", spy)
    store = MemoryStore()
    client = ScriptedJudgeClient(group_judge_by(_by_first_byte))
    _trainer(tmp_path, store, _engine(), GroupJudge(client)).fit(unrewarded_agent,
                                                                 [{"prompt": "apple"}, {"prompt": "river"}])

    assert len(client.calls) == 2  # one call per group
    assert trained, "no update: every group was tied"
    rollouts = {s.rollout_id: None for s in trained}
    for rid in rollouts:
        rollout = asyncio_run(store.get_rollout(rid))
        spans = asyncio_run(store.get_spans(rid, "latest"))
        (judged,) = [s for s in spans if s.name == semconv.JUDGE_SPAN]
        assert rollout.reward == judged.attributes[semconv.JUDGE_SCORE]
        assert all(judged.span_id not in s.span_ids for s in trained)
    # A_i = r_i − mean of its group, with the judge's scores as r
    for rid in rollouts:
        rollout = asyncio_run(store.get_rollout(rid))
        group = [r for r in asyncio_run(store.query_rollouts(limit=100)).items
                 if r.metadata["group_id"] == rollout.metadata["group_id"]]
        mean = sum(r.reward or 0.0 for r in group) / len(group)
        # float64 sums of 4 scores of two decimals: exact to well within 1e-9
        for sample in (s for s in trained if s.rollout_id == rid):
            assert sample.advantage == pytest.approx((rollout.reward or 0.0) - mean, abs=1e-9)
    (row,) = [r for r in read_jsonl(tmp_path / "metrics.jsonl") if "train/loss" in r]
    assert row["judge/scored_groups"] == 2 and row["judge/failed_groups"] == 0


def test_a_judge_that_cannot_score_stops_the_run_with_its_error(tmp_path: Path) -> None:
    engine = _engine()  # a tiny random model as its own judge: the judge's prompt does not even fit its context
    judge = GroupJudge(EngineJudgeClient(engine), retries=0, max_tokens=8)
    store = MemoryStore()
    with pytest.raises(NoGroupScoredError, match="could not answer the judge") as caught:
        _trainer(tmp_path, store, engine, judge).fit(unrewarded_agent, [{"prompt": "apple"}, {"prompt": "river"}])
    assert isinstance(caught.value.__cause__, JudgeCallError)
    rollouts = asyncio_run(store.query_rollouts(limit=100)).items
    assert rollouts and all(r.reward is None for r in rollouts)  # no reward was made up
    spans = asyncio_run(store.get_spans(rollouts[0].rollout_id, "latest"))
    (judged,) = [s for s in spans if s.name == semconv.JUDGE_SPAN]
    assert judged.status == "error" and judged.attributes[semconv.JUDGE_CLIENT] == "engine transformers"
    assert len(extract_model_calls(spans)) == 1  # the agent's call only: the engine judged without the gateway


def asyncio_run(coro: Any) -> Any:
    import asyncio

    return asyncio.run(coro)
