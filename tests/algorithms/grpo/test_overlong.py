"""Truncated calls: each call's finish_reason is kept in its sample, and GRPO can keep,
mask (DAPO's overlong filtering) or drop the calls cut at max_tokens."""

from __future__ import annotations

import json

import pytest
from adapters.test_samples import call, reward

from agentbolt.adapters.samples import SampleAdapter
from agentbolt.algorithms.grpo import GRPOConfig
from agentbolt.algorithms.grpo.overlong import filter_overlong, truncated_calls
from agentbolt.types import Span


def _cut(span: Span, reason: str) -> Span:
    response = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "a"}, "finish_reason": reason}]}
    return span.model_copy(update={"attributes": {**span.attributes, "agentbolt.llm.response": json.dumps(response)}})


def _two_rollouts() -> list:
    # ro-1: call 1 stops, call 2 (merged into the same sample) is cut at max_tokens; ro-2 stops
    first = SampleAdapter()([_cut(call("c1", [1, 2, 3], [4, 5], t=0), "stop"),
                             _cut(call("c2", [1, 2, 3, 4, 5, 6], [7, 8, 9], t=1), "length"), reward(0.0, t=2)])
    second = SampleAdapter()([_cut(call("d1", [1, 2], [3], t=0, rollout="ro-2"), "stop"),
                              reward(1.0, t=1, rollout="ro-2")])
    return first + second


def test_each_calls_finish_reason_is_kept_in_its_sample() -> None:
    samples = _two_rollouts()
    assert [(c.span_id, c.finish_reason, c.truncated) for c in samples[0].calls] == [("c1", "stop", False),
                                                                                  ("c2", "length", True)]
    assert samples[0].as_dict()["calls"][1]["finish_reason"] == "length"
    assert truncated_calls(samples) == 1


def test_mask_takes_only_the_truncated_calls_tokens_out_of_the_loss() -> None:
    samples = _two_rollouts()
    masked = filter_overlong(samples, "mask")
    assert masked[0].loss_mask == [0, 0, 0, 1, 1, 0, 0, 0, 0]  # c2's [7 8 9] no longer trained
    assert masked[0].logprobs[6:] == [0.0] * 3 and masked[0].versions[6:] == [None] * 3
    assert masked[1] == samples[1]
    assert filter_overlong(samples, "keep") == samples
    assert truncated_calls(masked) == 0  # the masked call is now context


def test_drop_leaves_out_every_sample_of_a_rollout_with_a_truncated_call() -> None:
    assert [s.rollout_id for s in filter_overlong(_two_rollouts(), "drop")] == ["ro-2"]


def test_the_option_is_a_config_field() -> None:
    assert GRPOConfig().overlong == "keep" and GRPOConfig(overlong="mask").overlong == "mask"
    with pytest.raises(ValueError):
        GRPOConfig(overlong="penalise")
