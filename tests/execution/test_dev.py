"""What ``Trainer.dev`` shows instead of samples, and why: a rollout that made no recorded
model call is said to in the words the runner and the algorithms use."""

from __future__ import annotations

from adapters.spans import Attempt, user

from agentbolt.adapters.no_model_call import NO_MODEL_CALL, why_no_samples
from agentbolt.execution.dev import training_samples


def test_a_rollout_without_a_model_call_has_no_samples_and_says_why() -> None:
    a = Attempt()
    a.reward(1.0)  # e.g. DSPy's cache answered: reward, no call
    samples, why_not = training_samples(a.spans)
    assert samples is None and why_not == f"none: {why_no_samples()}"
    assert NO_MODEL_CALL in why_not and "cache=False" in why_not


def test_a_rollout_with_a_model_call_shows_its_samples() -> None:
    a = Attempt()
    a.chat("c1", [user("2+2?")], "4")
    a.reward(1.0)
    samples, why_not = training_samples(a.spans)
    assert why_not is None and samples is not None and len(samples) == 1


def test_an_adapter_that_makes_samples_without_model_calls_is_shown_as_is() -> None:
    a = Attempt()
    a.reward(0.5)
    samples, why_not = training_samples(a.spans, lambda spans: [{"reward": 0.5}])
    assert (samples, why_not) == ([{"reward": 0.5}], None)
