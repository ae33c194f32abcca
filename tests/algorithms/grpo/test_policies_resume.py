"""One LoRA per agent, resumed and exported per policy: an interrupted ``GRPOPolicies`` run
continues from each policy's own checkpoint — its weights, its optimizer, its version
(republished to a restarted engine, never a number used before) — at the step after the
newest one every policy saved, and each policy is exported to its own model directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from agentbolt.training.checkpoint import CheckpointManager

import agentbolt
from agentbolt.algorithms.grpo import GRPOConfig
from agentbolt.algorithms.grpo.policies import GRPOPolicies
from agentbolt.engines.policies import PolicyEngines
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.metrics import read_jsonl
from agentbolt.models import tiny_model
from agentbolt.store.memory import MemoryStore

from .test_agent_match import own_policies

TASKS = [{"prompt": "apple 1"}, {"prompt": "river 2"}]
PROBE = torch.tensor([[1, 40, 41, 42, 43, 2]])
POLICIES = {"planner": "^planner$", "solver": "^solver$"}


class RecordingPolicies(GRPOPolicies):
    """Notes, per policy, the state its first update of this process starts from."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.first: dict[str, dict[str, Any]] = {}
        self.engines: Any = None

    async def _train(self, ctx: Any, run: Any, groups: Any, *, with_batch_metrics: bool) -> dict[str, Any]:
        if run.name not in self.first:
            engine = self.engines.engines[run.name]
            with torch.no_grad():
                self.first[run.name] = {
                    "version": run.version, "served": self.engines.versions[run.name],
                    "weights": run.policy.trainable_state(), "updates": run.update.steps,
                    "policy_logits": run.policy.model(input_ids=PROBE).logits,
                    "engine_logits": engine.model(input_ids=PROBE).logits,
                }
        return await super()._train(ctx, run, groups, with_batch_metrics=with_batch_metrics)


def _fit(run_dir: Path, max_steps: int, export_dir: Path | None = None) -> tuple[RecordingPolicies, Any]:
    """A run on a fresh engine serving the untrained weights, like a restarted process."""
    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    engines = PolicyEngines.local(model, tokenizer, list(POLICIES), max_batch_size=16, num_threads=1,
                                  default_max_tokens=3)
    config = GRPOConfig(max_steps=max_steps, tasks_per_step=2, group_size=4, learning_rate=5e-2, run_dir=str(run_dir),
                        progress=False, eval_before=False, eval_after=False, checkpoint_every=1, keep_checkpoints=10,
                        loggers=["jsonl"], export_dir=str(export_dir) if export_dir else None)
    algorithm = RecordingPolicies(POLICIES, config)
    algorithm.engines = engines
    trainer = agentbolt.Trainer(algorithm=algorithm, store=MemoryStore(), runner=agentbolt.Runner(concurrency=8),
                                gateway=Gateway(engines, GatewayConfig(retry_after=1)))
    return algorithm, trainer.fit(own_policies, TASKS)


def _trained(result: Any, name: str) -> list[bool]:
    """Per step, whether the policy ``name`` trained: a step whose groups all tied (every
    rollout's sampled first character agreed — a busy machine batches, and so samples,
    differently) trains nothing and publishes no version."""
    return [bool(row[f"{name}/samples/trained"]) for row in result.history]


def test_each_policy_resumes_from_its_own_checkpoint_and_is_exported_on_its_own(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    _, first = _fit(run_dir, max_steps=2)
    versions = {name: sum(_trained(r, name)) for name, r in first.items()}
    assert all(v >= 1 for v in versions.values())  # the untrained policies' first step always has a spread
    assert {name: r.policy_version for name, r in first.items()} == versions  # one version per update
    saved = {name: CheckpointManager.load(run_dir / name / "checkpoints" / "step-000002") for name in POLICIES}
    assert {name: c.state["policy_version"] for name, c in saved.items()} == versions
    assert saved["planner"].weights.keys() == saved["solver"].weights.keys()
    assert any(not torch.equal(saved["planner"].weights[k], v) for k, v in saved["solver"].weights.items())

    resumed, results = _fit(run_dir, max_steps=3, export_dir=tmp_path / "export")

    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3]  # nothing lost, nothing twice
    for name in POLICIES:
        start = resumed.first[name]
        for key, value in saved[name].weights.items():  # its own weights, not the other policy's
            torch.testing.assert_close(start["weights"][key], value, rtol=0, atol=0, msg=key)
        assert start["updates"] == saved[name].optimizer["steps"] == versions[name]  # its own optimizer
        # the restarted engine was re-synced, same version
        assert start["version"] == start["served"] == versions[name]
        torch.testing.assert_close(start["engine_logits"], start["policy_logits"], rtol=1e-4, atol=1e-4)
        final = versions[name] + _trained(results[name], name)[-1]
        assert results[name].policy_version == resumed.engines.versions[name] == final
        assert results[name].export_dir == tmp_path / "export" / name  # each policy its own export
        assert (tmp_path / "export" / name / "config.json").is_file()
        assert CheckpointManager(run_dir / name).latest().state["policy_version"] == final  # type: ignore[union-attr]


def test_a_policy_one_checkpoint_ahead_resumes_with_the_others_at_their_common_step(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    _fit(run_dir, max_steps=2)
    # a crash between the two policies' saves of step 2: the planner saved it, the solver did not
    step2 = run_dir / "solver" / "checkpoints" / "step-000002"
    for f in step2.iterdir():
        f.unlink()
    step2.rmdir()
    step1 = {name: CheckpointManager.load(run_dir / name / "checkpoints" / "step-000001") for name in POLICIES}

    resumed, results = _fit(run_dir, max_steps=2)

    for name in POLICIES:
        start = resumed.first[name]
        for key, value in step1[name].weights.items():
            torch.testing.assert_close(start["weights"][key], value, rtol=0, atol=0, msg=key)
        # version 2 named weights this run no longer has: the step-1 weights come back as 3
        assert start["version"] == start["served"] == 3
        # the retrained step publishes 4, never a number used before; a step whose groups all
        # tied (the sampled first characters agreed: a busy machine batches differently)
        # trains nothing and publishes nothing
        trained = results[name].history[-1][f"{name}/samples/trained"]
        assert results[name].policy_version == (4 if trained else 3), results[name].history
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 2]  # step 2 was trained again
