"""Span names and attribute keys that agentbolt writes and reads.

Model calls follow the OpenTelemetry GenAI conventions (``gen_ai.*``); everything
agentbolt adds lives under ``agentbolt.*``. ``docs/semantic-conventions.md`` lists them.
"""

from __future__ import annotations

from typing import Any

# --- rewards ---------------------------------------------------------------------------
REWARD_SPAN = "agentbolt.reward"
"""Name of a reward span. A rollout may hold many; the last primary one counts."""
REWARD_VALUE = "agentbolt.reward.value"
"""The primary reward value (float)."""
REWARD_PRIMARY = "agentbolt.reward.primary"
"""Name of the primary reward (``"reward"`` unless the emitter chose another)."""
REWARD_PREFIX = "agentbolt.rewards."
"""Each named reward: ``agentbolt.rewards.<name> = value``."""

# --- attribution -----------------------------------------------------------------------
ROLLOUT_ID = "agentbolt.rollout_id"
ATTEMPT_ID = "agentbolt.attempt_id"
SEQUENCE_ID = "agentbolt.sequence_id"


def reward_span_attributes(rewards: dict[str, float], primary: str) -> dict[str, Any]:
    """Attributes of a reward span carrying ``rewards`` with ``primary`` as the main one."""
    if primary not in rewards:
        raise ValueError(f"primary reward {primary!r} is not among the rewards {sorted(rewards)}")
    attrs: dict[str, Any] = {REWARD_PREFIX + name: float(v) for name, v in rewards.items()}
    attrs[REWARD_PRIMARY] = primary
    attrs[REWARD_VALUE] = float(rewards[primary])
    return attrs


def primary_reward(name: str, attributes: dict[str, Any]) -> float | None:
    """The primary reward a span carries, or None if it is not a (valid) reward span."""
    if name != REWARD_SPAN:
        return None
    value = attributes.get(REWARD_VALUE)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
