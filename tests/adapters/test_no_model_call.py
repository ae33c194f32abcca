"""Whether a rollout answered a model call — what training needs — and the one wording for
a rollout that did not."""

from __future__ import annotations

from agentbolt.adapters.no_model_call import NO_MODEL_CALL, answered_a_call, left_out

from .spans import Attempt, user


def test_a_rollout_answered_a_call_when_one_call_did_not_fail() -> None:
    none, failed, answered = Attempt(), Attempt(), Attempt()
    none.reward(1.0)
    failed.chat("c1", [user("hi")], failed=True)
    answered.chat("c1", [user("hi")], failed=True)
    answered.chat("c2", [user("hi")], "hello")
    assert [answered_a_call(a.spans) for a in (none, failed, answered)] == [False, False, True]


def test_the_line_an_algorithm_logs_says_how_many_why_and_what_to_do() -> None:
    line = left_out("GRPO", 2, 8)
    assert line.startswith(f"GRPO: 2 of 8 rollouts {NO_MODEL_CALL}")
    assert "left out of the training data" in line and "gateway" in line and "cache=False" in line
