"""GRPO trains the chosen agents: with ``agent_match`` only the matched agents' tokens carry
loss, the other agents' calls stay in the rollout (their reward counts) as context, metrics
count calls and tokens per agent, and ``Trainer.dev`` previews exactly what GRPO trains on."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

import openai
from rich.console import Console

import agentbolt
from agentbolt import semconv
from agentbolt.adapters.samples import SampleAdapter
from agentbolt.algorithms.grpo import (
    GRPO,
    GroupMember,
    GRPOConfig,
    apply_advantages,
    compute_advantages,
)
from agentbolt.algorithms.grpo.loss import grpo_loss
from agentbolt.algorithms.grpo.update import PolicyUpdate
from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.execution.dev import preview_adapter, training_samples
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.metrics import read_jsonl
from agentbolt.models import tiny_model
from agentbolt.store.memory import MemoryStore
from agentbolt.training.batch import collate
from agentbolt.types import Span


def _call(rollout: str, span_id: str, agent: str, prompt: list[int], response: list[int], t: float) -> Span:
    attrs: dict[str, Any] = {
        "agentbolt.llm.request": json.dumps({"model": "m", "messages": [{"role": "user", "content": "q"}]}),
        "agentbolt.llm.prompt_token_ids": prompt, "agentbolt.llm.response_token_ids": response,
        "agentbolt.llm.response_logprobs": [-1.0] * len(response), "agentbolt.llm.token_ids_source": "engine",
        "agentbolt.agent.name": agent,
    }
    return Span(rollout_id=rollout, attempt_id="a", span_id=span_id, name="chat m", start_time=t, end_time=t + 0.5,
                attributes=attrs)


def _reward(rollout: str, value: float) -> Span:
    return Span(rollout_id=rollout, attempt_id="a", span_id=f"rw-{rollout}", name=semconv.REWARD_SPAN, start_time=9.0,
                attributes=semconv.reward_span_attributes({"reward": value}, "reward"))


def test_hand_computed_gradient_only_on_the_matched_agents_tokens() -> None:
    # one task, three rollouts; each: planner answers [3 4], solver continues the conversation.
    #   r1: solver answers 2 tokens, reward 1.0      A = 1.0 - 0.5 = +0.5
    #   r2: solver answers 3 tokens, reward 0.0      A = 0.0 - 0.5 = -0.5
    #   r3: solver answers 1 token,  reward 0.5      A = 0
    # At ρ = 1 (old = current logprobs) ∂loss/∂logπ_t = -A_r / (|T_r| · R) on trained tokens:
    #   r1: -0.5 / (2·3) = -1/12,   r2: +0.5 / (3·3) = +1/18,   r3: 0;   and 0 on every planner token.
    solver = {"r1": [5, 6], "r2": [5, 6, 7], "r3": [5]}
    spans = [s for rid, answer in solver.items() for s in (
        _call(rid, f"{rid}-p", "planner", [1, 2], [3, 4], 1.0),
        _call(rid, f"{rid}-s", "solver", [1, 2, 3, 4, 9], answer, 2.0),
        _reward(rid, {"r1": 1.0, "r2": 0.0, "r3": 0.5}[rid]),
    )]
    adapted = SampleAdapter(agent_match="^solver$").adapt(spans)
    members = {"task": [GroupMember(f.rollout_id, f.reward) for f in adapted]}
    samples = apply_advantages([s for f in adapted for s in f.samples], compute_advantages(members))
    batch = collate(samples)
    assert batch.loss_mask.tolist() == [[0, 0, 0, 0, 0, 1, 1, 0], [0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 1, 0, 0]]

    logprobs = batch.old_logprobs.clone().requires_grad_(True)
    out = grpo_loss(logprobs, batch.old_logprobs, batch.advantages, batch.loss_mask, batch.rollout_index)
    out.loss.backward()
    assert logprobs.grad is not None
    expected = torch.zeros_like(logprobs)
    expected[0, 5:7] = -1 / 12
    expected[1, 5:8] = 1 / 18
    torch.testing.assert_close(logprobs.grad, expected)
    assert float(out.loss.detach()) == pytest.approx(0.0)  # Σ_r A_r = 0 at ρ = 1


async def two_agents(task: dict[str, str], llm: agentbolt.LLM) -> float:
    """A planner and a solver on one conversation, through the gateway; the solver is graded."""
    client = openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5)
    async with client:
        messages = [{"role": "user", "content": task["prompt"]}]
        with agentbolt.agent("planner"):
            plan = await client.chat.completions.create(model=llm.model, messages=messages, max_tokens=3)
        messages += [{"role": "assistant", "content": plan.choices[0].message.content or ""},
                     {"role": "user", "content": "solve"}]
        with agentbolt.agent("solver"):
            answer = await client.chat.completions.create(model=llm.model, messages=messages, max_tokens=3)
    text = answer.choices[0].message.content or ""
    return ord(text[0]) / 1000 if text else 0.0


def test_grpo_with_agent_match_trains_only_the_solver_and_dev_previews_the_same_samples(
    tmp_path: Path, trained_samples: list[Any]
) -> None:
    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    engine = TransformersEngine(model, tokenizer, max_batch_size=16, num_threads=1, default_max_tokens=3)
    store = MemoryStore()
    config = GRPOConfig(max_steps=1, tasks_per_step=2, group_size=4, agent_match="^solver$", run_dir=str(tmp_path),
                        progress=False, eval_before=False, eval_after=False, checkpoint_every=0, loggers=["jsonl"])
    grpo = GRPO(config)
    trained = trained_samples
    trainer = agentbolt.Trainer(algorithm=grpo, store=store, gateway=Gateway(engine, GatewayConfig(retry_after=1)),
                                runner=agentbolt.Runner(concurrency=8))
    trainer.fit(two_agents, [{"prompt": "apple 1"}, {"prompt": "river 2"}])

    assert trained, "the step made no update (every group had equal rewards)"
    calls = [c for s in trained for c in s.calls]
    assert {c.agent_name for c in calls if c.trained} == {"solver"}
    for s in trained:  # the planner's answer, where merged, is context with mask 0
        for c in s.calls:
            assert s.loss_mask[c.start:c.start + c.length] == [int(c.trained)] * c.length
    (row,) = [r for r in read_jsonl(tmp_path / "metrics.jsonl") if "train/loss" in r]
    assert row["agents/solver/calls_trained"] == sum(c.trained for c in calls)
    assert row["agents/solver/tokens_trained"] == sum(s.num_response_tokens for s in trained)
    assert row.get("agents/planner/calls_trained", 0) == 0

    # Trainer.dev's preview (the same function, the algorithm's adapter) gives exactly
    # the samples GRPO trained on, for the same spans
    async def preview() -> list[Any]:
        out = []
        for rid in dict.fromkeys(s.rollout_id for s in trained):
            samples, why_not = training_samples(await store.get_spans(rid, "latest"), preview_adapter(grpo))
            assert why_not is None and samples is not None
            out.extend(samples)
        return out

    shown = asyncio.run(preview())
    assert [(s.rollout_id, s.token_ids, s.loss_mask, s.logprobs, s.versions, s.calls) for s in shown] == [
        (s.rollout_id, s.token_ids, s.loss_mask, s.logprobs, s.versions, s.calls) for s in trained]

    # and Trainer.dev itself, on new rollouts, shows GRPO's samples: the solver's tokens only
    (row,) = trainer.dev(two_agents, [{"prompt": "stone 3"}], n=1, console=Console(file=io.StringIO()))
    assert row.samples and row.samples == grpo.adapter(row.spans)
    assert {c.agent_name for s in row.samples for c in s.calls if c.trained} == {"solver"}


async def own_policies(task: dict[str, str], llm: agentbolt.LLM) -> float:
    """Each agent calls its own policy, by model name."""
    client = openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5)
    async with client:
        with agentbolt.agent("planner"):
            plan = await client.chat.completions.create(
                model="planner", messages=[{"role": "user", "content": task["prompt"]}], max_tokens=3)
        with agentbolt.agent("solver"):
            answer = await client.chat.completions.create(
                model="solver", messages=[{"role": "user", "content": f"solve {plan.choices[0].message.content}"}],
                max_tokens=3)
    text = answer.choices[0].message.content or ""
    return ord(text[0]) / 1000 if text else 0.0


def test_grpo_on_the_solvers_own_policy_leaves_the_planners_weights_untouched(tmp_path: Path) -> None:
    from agentbolt.engines.policies import PolicyEngines

    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    engines = PolicyEngines.local(model, tokenizer, ["planner", "solver"], default="solver", max_batch_size=16,
                                  num_threads=1, default_max_tokens=3)
    before = {name: {k: v.clone() for k, v in e.model.state_dict().items()} for name, e in engines.engines.items()}
    config = GRPOConfig(max_steps=2, tasks_per_step=2, group_size=4, agent_match="^solver$", run_dir=str(tmp_path),
                        progress=False, eval_before=False, eval_after=False, checkpoint_every=0, loggers=["jsonl"])
    trainer = agentbolt.Trainer(algorithm=GRPO(config), store=MemoryStore(), runner=agentbolt.Runner(concurrency=8),
                                gateway=Gateway(engines, GatewayConfig(retry_after=1)))
    trainer.fit(own_policies, [{"prompt": "apple 1"}, {"prompt": "river 2"}])

    rows = [r for r in read_jsonl(tmp_path / "metrics.jsonl") if "train/loss" in r]
    assert rows and engines.versions == {"planner": 0, "solver": len(rows)}  # a version per solver update
    after = {name: e.model.state_dict() for name, e in engines.engines.items()}
    assert all(torch.equal(before["planner"][k], v) for k, v in after["planner"].items())  # the planner: untouched
    assert any(not torch.equal(before["solver"][k], v) for k, v in after["solver"].items())  # the solver: trained


def test_two_policies_each_trained_by_its_own_update_on_its_own_agents_samples(tmp_path: Path) -> None:
    from agentbolt.algorithms.grpo.policies import GRPOPolicies
    from agentbolt.engines.policies import PolicyEngines

    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    engines = PolicyEngines.local(model, tokenizer, ["planner", "solver"], max_batch_size=16, num_threads=1,
                                  default_max_tokens=3)
    config = GRPOConfig(max_steps=2, tasks_per_step=2, group_size=4, run_dir=str(tmp_path), progress=False,
                        eval_before=False, eval_after=False, checkpoint_every=1, loggers=["jsonl"])
    algorithm = GRPOPolicies({"planner": "^planner$", "solver": "^solver$"}, config)
    trainer = agentbolt.Trainer(algorithm=algorithm, store=MemoryStore(), runner=agentbolt.Runner(concurrency=8),
                                gateway=Gateway(engines, GatewayConfig(retry_after=1)))
    results = trainer.fit(own_policies, [{"prompt": "apple 1"}, {"prompt": "river 2"}])

    rows = read_jsonl(tmp_path / "metrics.jsonl")
    for name, other in (("planner", "solver"), ("solver", "planner")):
        updates = [r for r in rows if f"{name}/train/loss" in r]
        assert updates, f"the {name} policy was never updated"
        assert engines.versions[name] == results[name].policy_version == len(updates)  # its own versions
        assert all(r[f"{name}/agents/{name}/calls_trained"] > 0 for r in updates)
        assert all(r.get(f"{name}/agents/{other}/calls_trained", 0) == 0 for r in rows)  # never the other's tokens
        assert (tmp_path / name / "model" / "config.json").is_file()  # its own export
        assert max(p.name for p in (tmp_path / name / "checkpoints").iterdir()) == "step-000002"
    a, b = (engines.engines[n].model.state_dict() for n in ("planner", "solver"))
    assert any(not torch.equal(a[k], b[k]) for k in a)  # two policies, trained apart


def test_dev_previews_what_each_policy_of_a_two_policy_run_trains_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentbolt.algorithms.grpo.policies import GRPOPolicies
    from agentbolt.engines.policies import PolicyEngines

    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    engines = PolicyEngines.local(model, tokenizer, ["planner", "solver"], max_batch_size=16, num_threads=1,
                                  default_max_tokens=3)
    store = MemoryStore()
    config = GRPOConfig(max_steps=1, tasks_per_step=2, group_size=4, run_dir=str(tmp_path), progress=False,
                        eval_before=False, eval_after=False, checkpoint_every=0, loggers=["jsonl"])
    algorithm = GRPOPolicies({"planner": "^planner$", "solver": "^solver$"}, config)
    trained: list[tuple[Any, list[Any]]] = []
    step = PolicyUpdate.step

    def spy(self: PolicyUpdate, samples: Any, **kw: Any) -> Any:
        trained.append((self, list(samples)))
        return step(self, samples, **kw)

    monkeypatch.setattr(PolicyUpdate, "step", spy)
    trainer = agentbolt.Trainer(algorithm=algorithm, store=store, runner=agentbolt.Runner(concurrency=8),
                                gateway=Gateway(engines, GatewayConfig(retry_after=1)))
    trainer.fit(own_policies, [{"prompt": "apple 1"}, {"prompt": "river 2"}])

    by_policy = {name: [s for update, samples in trained if update is run.update for s in samples]
                 for name, run in algorithm.runs.items()}
    assert all(by_policy.values()), "a policy made no update"
    for name, samples in by_policy.items():  # each policy trained its own agent's tokens only
        assert {c.agent_name for s in samples for c in s.calls if c.trained} == {name}

    def key(s: Any) -> tuple[Any, ...]:
        return (s.rollout_id, tuple(s.token_ids), tuple(s.loss_mask), tuple(s.logprobs), tuple(s.versions))

    async def preview(rollout_ids: list[str]) -> list[Any]:
        out = []
        for rid in rollout_ids:
            samples, why_not = training_samples(await store.get_spans(rid, "latest"), preview_adapter(algorithm))
            assert why_not is None and samples is not None
            out.extend(samples)
        return out

    trained_rollouts = list(dict.fromkeys(s.rollout_id for ss in by_policy.values() for s in ss))
    shown = asyncio.run(preview(trained_rollouts))
    assert sorted(map(key, shown)) == sorted(key(s) for ss in by_policy.values() for s in ss)
