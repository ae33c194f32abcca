"""Which rollouts SFT learns from, records on disk, and the config's rules."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from agentbolt.algorithms import SFTConfig
from agentbolt.algorithms.sft import (
    NoTrainingDataError,
    dedupe_records,
    load_records,
    select_rollouts,
)
from agentbolt.algorithms.sft.selection import task_key
from agentbolt.types import Rollout, RolloutStatus

OK = RolloutStatus.SUCCEEDED


def ro(rid: str, task: object, status: RolloutStatus, reward: float | None) -> Rollout:
    return Rollout(rollout_id=rid, input=task, status=status, reward=reward)


ROLLOUTS = [
    ro("a1", {"q": 1}, OK, 1.0),
    ro("a2", {"q": 1}, OK, 0.4),
    ro("a3", {"q": 1}, RolloutStatus.FAILED, 1.0),  # a reward before it failed: still never learned from
    ro("b1", {"q": 2}, OK, 0.7),
    ro("b2", {"q": 2}, OK, 0.9),
    ro("b3", {"q": 2}, OK, None),  # finished without a reward
    ro("c1", {"q": 3}, RolloutStatus.CANCELLED, None),
    ro("c2", {"q": 3}, OK, 1.0),
    ro("c3", {"q": 3}, OK, 1.0),
]


def ids(selection: object) -> list[str]:
    return [r.rollout_id for r in selection.kept]  # type: ignore[attr-defined]


def test_threshold_keeps_succeeded_scored_rollouts_at_or_above_it() -> None:
    sel = select_rollouts(ROLLOUTS, min_reward=0.9, top_k_per_task=None)
    assert ids(sel) == ["a1", "b2", "c2", "c3"]
    assert (sel.total, sel.not_finished, sel.unscored, sel.below_min_reward, sel.beyond_top_k) == (9, 2, 1, 2, 0)
    assert "4 of 9 rollouts kept" in sel.describe()


def test_top_k_keeps_the_best_of_each_task_earliest_first_on_ties() -> None:
    sel = select_rollouts(ROLLOUTS, min_reward=None, top_k_per_task=1)
    assert ids(sel) == ["a1", "b2", "c2"]
    assert sel.beyond_top_k == 3
    both = select_rollouts(ROLLOUTS, min_reward=0.95, top_k_per_task=2)
    assert ids(both) == ["a1", "c2", "c3"]


def test_a_task_is_its_input_whatever_the_key_order() -> None:
    assert task_key(ro("x", {"a": 1, "b": 2}, OK, 1.0)) == task_key(ro("y", {"b": 2, "a": 1}, OK, 1.0))


def test_duplicate_records_are_learned_once() -> None:
    rec = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    same = {"messages": [{"content": "q", "role": "user"}, {"content": "a", "role": "assistant"}]}
    other = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "b"}]}
    assert dedupe_records([rec, same, other, rec]) == ([rec, other], 2)


def test_records_load_from_jsonl_and_bad_ones_are_named(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text('{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}\n\n')
    assert load_records(good)[0]["messages"][1]["content"] == "a"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": []}\nnot json\n')
    with pytest.raises(ValueError, match="record 0 has no 'messages' list"):
        load_records([{"messages": []}])
    with pytest.raises(ValueError, match="bad.jsonl:2: not a JSON object"):
        load_records(bad)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_records(tmp_path / "missing.jsonl")


def test_config_refuses_selecting_nothing_and_unknown_fields(tmp_path: Path) -> None:
    with pytest.raises(pydantic.ValidationError, match="selects nothing"):
        SFTConfig(min_reward=None, top_k_per_task=None)
    with pytest.raises(pydantic.ValidationError, match="extra"):
        SFTConfig(learning_rat=1e-3)  # type: ignore[call-arg]
    path = tmp_path / "sft.yaml"
    path.write_text("epochs: 3\nlora: null\ntop_k_per_task: 2\n")
    cfg = SFTConfig.from_yaml(path, learning_rate=1e-3)
    assert (cfg.epochs, cfg.lora, cfg.top_k_per_task, cfg.learning_rate) == (3, None, 2, 1e-3)


def test_no_training_data_error_is_a_value_error() -> None:
    assert issubclass(NoTrainingDataError, ValueError)
