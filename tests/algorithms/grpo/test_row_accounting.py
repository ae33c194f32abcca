"""Per step, every rollout handed to GRPO is counted once: trained, or dropped under the
first reason that applies (``rows/in``, ``rows/trained``, ``rows/dropped/<reason>``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbolt.adapters.samples import Sample, SampleCall
from agentbolt.algorithms.base import AlgorithmContext
from agentbolt.algorithms.grpo import GRPO, GRPOConfig
from agentbolt.algorithms.grpo.advantages import GroupMember, apply_advantages, compute_advantages
from agentbolt.algorithms.grpo.groups import Group
from agentbolt.algorithms.grpo.overlong import filter_overlong
from agentbolt.algorithms.grpo.row_accounting import row_metrics
from agentbolt.metrics.rows import DROP_REASONS, why_nothing_trained
from agentbolt.store.memory import MemoryStore
from agentbolt.training.staleness import split_stale
from algorithms.stored_rollouts import succeeded_rollout


def sample(rollout_id: str, version: int = 5, *, truncated: bool = False) -> Sample:
    finish = "length" if truncated else "stop"
    return Sample(rollout_id, "at-1", [1, 2, 3], [0, 1, 1], [0.0, -1.0, -1.0], [None, version, version], ["c"],
                  calls=(SampleCall("c", None, 1, 2, True, finish),))


def members(group: str, rewards: dict[str, float | None], failed: tuple[str, ...] = ()) -> dict[str, list[GroupMember]]:
    return {group: [GroupMember(rid, r, rid in failed) for rid, r in rewards.items()]}


def rows(offered: list[str], groups: dict[str, list[GroupMember]], built: list[Sample], *, max_lag: int = 1,
         overlong: str = "keep", refused: dict | None = None) -> dict[str, int]:
    """What the step does with them, in its order, and the rows it reports."""
    advantages = compute_advantages(groups)
    kept = filter_overlong(apply_advantages(built, advantages), overlong)  # type: ignore[arg-type]
    split = split_stale(kept, current_version=5, max_lag=max_lag)
    return row_metrics(offered, groups, refused or {}, built, advantages, kept, split, split.fresh)


def dropped(values: dict[str, int]) -> dict[str, int]:
    return {k.removeprefix("rows/dropped/"): n for k, n in values.items() if k.startswith("rows/dropped/") and n}


def test_every_reason_is_logged_even_when_zero() -> None:
    values = rows(["a", "b"], members("g", {"a": 1.0, "b": 0.0}), [sample("a"), sample("b")])
    assert values["rows/in"] == 2 and values["rows/trained"] == 2
    assert {f"rows/dropped/{r}" for r in DROP_REASONS} <= values.keys() and not dropped(values)


def test_a_group_with_zero_reward_variance_drops_all_its_rollouts_and_says_so() -> None:
    groups = {**members("g1", {"a": 1.0, "b": 1.0}), **members("g2", {"c": 0.0, "d": 0.0})}
    values = {**rows(["a", "b", "c", "d"], groups, [sample(x) for x in "abcd"]), "groups/dropped_equal": 2}
    assert values["rows/in"] == 4 and values["rows/trained"] == 0
    assert dropped(values) == {"zero_variance": 4}
    assert why_nothing_trained(values) == "all 2 groups had zero reward variance (4 rollouts)"


def test_stale_and_unknown_versions_are_told_apart() -> None:
    # version 5 now, max lag 1: "old" lags 3, "future" carries version 9 the trainer never had
    built = [sample("fresh"), sample("other"), sample("old", version=2), sample("future", version=9)]
    groups = members("g", {"fresh": 1.0, "other": 0.0, "old": 1.0, "future": 0.0})
    values = rows(["fresh", "other", "old", "future"], groups, built)
    assert values["rows/trained"] == 2
    assert dropped(values) == {"stale": 1, "unknown_version": 1}


def test_each_dropped_rollout_counts_once_under_the_first_reason() -> None:
    # "gone" failed (and built nothing); "cached" made no model call; "cut" was truncated
    # with overlong="drop"; "judged" is in no group the judge scored
    groups = members("g", {"ok": 1.0, "gone": None, "cached": 0.5, "cut": 0.0}, failed=("gone",))
    built = [sample("ok"), sample("cut", truncated=True)]
    values = rows(["ok", "gone", "cached", "cut", "judged"], groups, built, overlong="drop",
                  refused={"cached": "no_model_call"})
    assert values["rows/in"] == 5 and values["rows/trained"] == 1
    assert dropped(values) == {"unscored": 1, "failed": 1, "no_model_call": 1, "truncated": 1}
    assert sum(dropped(values).values()) + values["rows/trained"] == values["rows/in"]


def test_a_step_that_trained_nothing_for_several_reasons_lists_them() -> None:
    groups = members("g", {"a": None, "b": 1.0}, failed=("a",))
    values = rows(["a", "b"], groups, [sample("b")])
    assert dropped(values) == {"failed": 1, "zero_variance": 1}
    assert why_nothing_trained(values) == (
        "none of 2 rollouts trained: 1 failed (infrastructure) or had no reward; 1 in groups with zero reward variance")
    assert why_nothing_trained({**values, "rows/trained": 1}) is None


async def test_rollouts_without_a_model_call_are_dropped_as_such_from_collect() -> None:
    store = MemoryStore()
    ids = [await succeeded_rollout(store, with_call=c) for c in (True, False, False)]
    group = Group("g0", 0, ids, 0, rollouts=[await store.get_rollout(r) for r in ids])
    batch = await GRPO(GRPOConfig()).collect(AlgorithmContext(store=store), [group])
    values = rows(ids, batch.members, batch.samples, refused=batch.refused)
    # the one rollout with a call is alone in its group's signal: all rewards are 1.0
    assert dropped(values) == {"no_model_call": 2, "zero_variance": 1}
    assert why_nothing_trained(values) == (
        "none of 3 rollouts trained: 2 made no successful model call; 1 in groups with zero reward variance")


def test_a_real_grpo_step_accounts_for_every_rollout(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    import agentbolt
    from agentbolt.engines.transformers_engine import TransformersEngine
    from agentbolt.gateway import Gateway, GatewayConfig
    from agentbolt.metrics import read_jsonl
    from agentbolt.models import tiny_model

    from .test_agent_match import two_agents

    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    engine = TransformersEngine(model, tokenizer, max_batch_size=16, num_threads=1, default_max_tokens=3)
    config = GRPOConfig(max_steps=2, tasks_per_step=2, group_size=4, agent_match="^solver$", run_dir=str(tmp_path),
                        progress=False, eval_before=False, eval_after=False, checkpoint_every=0, loggers=["jsonl"])
    trainer = agentbolt.Trainer(algorithm=GRPO(config), store=MemoryStore(), runner=agentbolt.Runner(concurrency=8),
                                gateway=Gateway(engine, GatewayConfig(retry_after=1)))
    trainer.fit(two_agents, [{"prompt": "apple 1"}, {"prompt": "river 2"}])

    rows = [r for r in read_jsonl(tmp_path / "metrics.jsonl") if "rows/in" in r]
    assert len(rows) == 2
    for row in rows:  # 2 groups of 4: each rollout trained or dropped under one reason
        assert row["rows/in"] == 8 == row["rows/trained"] + sum(row[f"rows/dropped/{r}"] for r in DROP_REASONS)
        equal_groups = 4 * row["groups/dropped_equal"]  # their rollouts: zero_variance, unless they failed first
        assert equal_groups - row["rows/dropped/failed"] <= row["rows/dropped/zero_variance"] <= equal_groups
        assert (row["rows/trained"] > 0) == (row["samples/trained"] > 0)
