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


AGL_REWARD_VALUE = "agentlightning.reward.0.value"
"""The primary reward as Agent Lightning v0.3's emitters write it (on any span): read too,
so spans from v0.3 code (``add_otel_span``, OTLP) count as rewards."""


def primary_reward(name: str, attributes: dict[str, Any]) -> float | None:
    """The primary reward a span carries, or None if it is not a (valid) reward span."""
    if name != REWARD_SPAN:
        value = attributes.get(AGL_REWARD_VALUE)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return float(value)
    value = attributes.get(REWARD_VALUE)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


# --- output ----------------------------------------------------------------------------
OUTPUT_SPAN = "agentbolt.output"
"""The agent's return value when it is not a reward (its answer, a dict...): one span per
attempt that returned something else than a number or None."""
OUTPUT_JSON = "agentbolt.output.json"
"""The output as JSON (objects JSON cannot hold are kept as their ``repr`` string)."""
OUTPUT_TYPE = "agentbolt.output.type"
"""The Python type of the output (``str``, ``dict``, ``myapp.Answer``)."""
ATTEMPT_OUTPUT = "output"
"""Key of the output in the metadata of the attempt that produced it (JSON values), so
tables of rollouts show it without reading spans."""


def output_of(spans: Any) -> tuple[bool, Any]:
    """``(found, value)``: the output recorded among ``spans`` (the last one), decoded."""
    import orjson

    for span in reversed(list(spans)):
        if getattr(span, "name", None) == OUTPUT_SPAN:
            raw = (getattr(span, "attributes", None) or {}).get(OUTPUT_JSON)
            if not isinstance(raw, str):
                return True, raw
            try:
                return True, orjson.loads(raw)
            except orjson.JSONDecodeError:
                return True, raw
    return False, None


# --- sandbox ---------------------------------------------------------------------------
SANDBOX_SPAN = "agentbolt.sandbox"
"""Something a harness sandbox blocked (a refused connection, a denied path or request, a
limit that stopped a process): one span per kind of event of an attempt."""
SANDBOX_KIND = "agentbolt.sandbox.kind"
"""``network.unreachable``, ``network.refused``, ``network.denied``, ``path.denied``,
``limit.processes``, ``limit.memory``, ``limit.cpu``, ``limit.wall_time``,
``limit.file_size``, ``limit.tmp_size`` or ``limit.output``."""
SANDBOX_DETAIL = "agentbolt.sandbox.detail"
"""What happened, in words (the first occurrence)."""
SANDBOX_COUNT = "agentbolt.sandbox.count"
"""How many times it happened in the attempt."""


def sandbox_event_counts(spans: Any) -> dict[str, int]:
    """``{kind: count}`` of the sandbox events among ``spans``."""
    counts: dict[str, int] = {}
    for span in spans:
        if getattr(span, "name", None) != SANDBOX_SPAN:
            continue
        attrs = getattr(span, "attributes", None) or {}
        kind = str(attrs.get(SANDBOX_KIND, "unknown"))
        count = attrs.get(SANDBOX_COUNT, 1)
        counts[kind] = counts.get(kind, 0) + (int(count) if isinstance(count, (int, float)) else 1)
    return counts
