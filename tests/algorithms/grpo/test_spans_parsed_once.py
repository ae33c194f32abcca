"""Each rollout's spans are parsed into model calls once per GRPO step: the samples, the
check of how the calls were sampled and the metrics all use the same parsed calls — and
with several policies, every policy builds its samples from them too."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

import agentbolt  # noqa: E402
from agentbolt.adapters import calls as calls_module  # noqa: E402
from agentbolt.algorithms.grpo import GRPO, GRPOConfig  # noqa: E402
from agentbolt.algorithms.grpo.groups import Group, GroupScheduler  # noqa: E402
from agentbolt.algorithms.grpo.policies import GRPOPolicies  # noqa: E402
from agentbolt.engines.policies import PolicyEngines  # noqa: E402
from agentbolt.engines.transformers_engine import TransformersEngine  # noqa: E402
from agentbolt.gateway import Gateway, GatewayConfig  # noqa: E402
from agentbolt.models import tiny_model  # noqa: E402
from agentbolt.store.memory import MemoryStore  # noqa: E402
from agentbolt.types import Span  # noqa: E402

from .test_agent_match import own_policies, two_agents  # noqa: E402

TASKS = [{"prompt": "apple 1"}, {"prompt": "river 2"}]


class ParseCount:
    """Counts, per step and rollout, the calls of ``extract_model_calls`` made after the
    step's groups were handed over (the rollouts had all finished: nothing else runs)."""

    def __init__(self) -> None:
        self.step = 0
        self.in_step = False
        self.by_step: dict[int, Counter[str]] = {}
        self.batches: dict[int, list[str]] = {}


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> ParseCount:
    count = ParseCount()
    original = calls_module.extract_model_calls

    def spy(spans: Iterable[Span]) -> Any:
        spans = list(spans)
        if count.in_step:
            count.by_step[count.step].update({s.rollout_id for s in spans})
        return original(spans)

    for module in list(sys.modules.values()):  # wherever the function was imported by name
        if module is not None and getattr(module, "extract_model_calls", None) is original:
            monkeypatch.setattr(module, "extract_model_calls", spy)

    next_batch = GroupScheduler.next_batch

    async def handed_over(self: GroupScheduler, n: int, version: int | None) -> list[Group]:
        count.in_step = False
        groups = await next_batch(self, n, version)
        count.step += 1
        count.by_step[count.step] = Counter()
        count.batches[count.step] = [r.rollout_id for g in groups for r in g.rollouts]
        count.in_step = True
        return groups

    monkeypatch.setattr(GroupScheduler, "next_batch", handed_over)
    return count


def _config(tmp_path: Path, **kw: Any) -> GRPOConfig:
    return GRPOConfig(max_steps=2, tasks_per_step=2, group_size=4, run_dir=str(tmp_path), progress=False,
                      eval_before=False, eval_after=False, checkpoint_every=0, loggers=["jsonl"], **kw)


def test_a_grpo_step_parses_each_rollouts_spans_once(tmp_path: Path, parses: ParseCount) -> None:
    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    engine = TransformersEngine(model, tokenizer, max_batch_size=16, num_threads=1, default_max_tokens=3)
    trainer = agentbolt.Trainer(algorithm=GRPO(_config(tmp_path, agent_match="^solver$")), store=MemoryStore(),
                                runner=agentbolt.Runner(concurrency=8),
                                gateway=Gateway(engine, GatewayConfig(retry_after=1)))
    trainer.fit(two_agents, TASKS)

    assert sorted(parses.by_step) == [1, 2]
    for step, rollouts in parses.batches.items():
        assert len(rollouts) == 8
        assert parses.by_step[step] == Counter(dict.fromkeys(rollouts, 1)), f"step {step}"


def test_several_policies_share_one_parse_of_each_rollout_per_step(tmp_path: Path, parses: ParseCount) -> None:
    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    engines = PolicyEngines.local(model, tokenizer, ["planner", "solver"], max_batch_size=16, num_threads=1,
                                  default_max_tokens=3)
    algorithm = GRPOPolicies({"planner": "^planner$", "solver": "^solver$"}, _config(tmp_path))
    trainer = agentbolt.Trainer(algorithm=algorithm, store=MemoryStore(), runner=agentbolt.Runner(concurrency=8),
                                gateway=Gateway(engines, GatewayConfig(retry_after=1)))
    results = trainer.fit(own_policies, TASKS)

    assert all(r.policy_version for r in results.values())  # both policies trained on the shared parse
    assert sorted(parses.by_step) == [1, 2]
    for step, rollouts in parses.batches.items():
        assert parses.by_step[step] == Counter(dict.fromkeys(rollouts, 1)), f"step {step}"
