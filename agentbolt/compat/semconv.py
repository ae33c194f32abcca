"""Agent Lightning v0.3's semantic conventions (``agentlightning.semconv``): the span
names and attribute keys v0.3's emitters wrote, for code that builds or filters spans by
them.

agentbolt's own emitters write ``agentbolt.*`` names (:mod:`agentbolt.semconv`); its
readers (``find_final_reward``, ``get_message_value``...) understand both, and the store
counts a span carrying ``agentlightning.reward.0.value`` as a reward.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel

__all__ = [
    "AGL_ANNOTATION",
    "AGL_EXCEPTION",
    "AGL_MESSAGE",
    "AGL_OBJECT",
    "AGL_OPERATION",
    "AGL_REWARD",
    "AGL_VIRTUAL",
    "LightningResourceAttributes",
    "LightningSpanAttributes",
    "LinkAttributes",
    "LinkPydanticModel",
    "RewardAttributes",
    "RewardPydanticModel",
]

AGL_ANNOTATION = "agentlightning.annotation"
AGL_MESSAGE = "agentlightning.message"
AGL_OBJECT = "agentlightning.object"
AGL_EXCEPTION = "agentlightning.exception"
AGL_OPERATION = "agentlightning.operation"
AGL_REWARD = "agentlightning.reward"
AGL_VIRTUAL = "agentlightning.virtual"


class LightningResourceAttributes(Enum):
    """Resource attributes v0.3's tracers put on exported spans."""

    ROLLOUT_ID = "agentlightning.rollout_id"
    ATTEMPT_ID = "agentlightning.attempt_id"
    SPAN_SEQUENCE_ID = "agentlightning.span_sequence_id"
    TRACER_NAME = "agentlightning.tracer.name"


class LightningSpanAttributes(Enum):
    """Span attribute keys (``REWARD``, ``LINK`` and ``TAG`` are prefixes:
    ``agentlightning.reward.0.value``, ``agentlightning.tag.0``)."""

    REWARD = "agentlightning.reward"
    LINK = "agentlightning.link"
    TAG = "agentlightning.tag"
    MESSAGE_BODY = "agentlightning.message.body"
    OBJECT_TYPE = "agentlightning.object.type"
    OBJECT_LITERAL = "agentlightning.object.literal"
    OBJECT_JSON = "agentlightning.object.json"
    OPERATION_NAME = "agentlightning.operation.name"
    OPERATION_INPUT = "agentlightning.operation.input"
    OPERATION_OUTPUT = "agentlightning.operation.output"


class RewardAttributes(Enum):
    """The fields of one reward under the prefix: ``agentlightning.reward.<i>.name/value``."""

    REWARD_NAME = "name"
    REWARD_VALUE = "value"


class RewardPydanticModel(BaseModel):
    """One reward dimension: the first of a span's rewards is the primary one."""

    name: str
    value: float


class LinkAttributes(Enum):
    """The fields of one link under the prefix: ``agentlightning.link.<i>.key_match/value_match``."""

    KEY_MATCH = "key_match"
    VALUE_MATCH = "value_match"


class LinkPydanticModel(BaseModel):
    """A link to the spans whose attribute ``key_match`` equals ``value_match``
    (``span_id``/``trace_id`` name a span's own ids)."""

    key_match: str
    value_match: str
