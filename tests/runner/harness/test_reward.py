"""Reward text: a number or one of two JSON forms; anything else is refused clearly."""

from __future__ import annotations

import pytest

from agentbolt.runner.harness.reward import RewardFormatError, last_line, parse_reward


@pytest.mark.parametrize("text", ["0.75", " 0.75\n", '{"value": 0.75}'])
def test_a_single_reward(text: str) -> None:
    reward = parse_reward(text, source="test")
    assert reward.value == 0.75 and reward.primary == "reward"


def test_named_rewards_with_a_primary() -> None:
    reward = parse_reward('{"rewards": {"acc": 1, "fmt": 0.5}, "primary": "fmt"}', source="test")
    assert reward.rewards == {"acc": 1.0, "fmt": 0.5} and reward.value == 0.5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("correct!", "not a reward"),
        ("true", "not a reward"),
        ('{"rewards": {"a": 1, "b": 2}}', "primary"),
        ('{"value": "high"}', "not a reward"),
        ("NaN", "not a reward"),
    ],
)
def test_bad_reward_text_says_what_to_write(text: str, message: str) -> None:
    with pytest.raises(RewardFormatError, match=message):
        parse_reward(text, source="test")


def test_the_evaluators_last_non_empty_line_counts() -> None:
    assert last_line("checking...\nall good\n1.0\n\n") == "1.0"
