"""Agent Lightning v0.3's emitters and span readers (``agentlightning.emitter``).

The emitters are agentbolt's own (:func:`agentbolt.emit_reward` takes v0.3's
``primary_key=``, ``attributes=`` and ``propagate=``). The readers — :func:`find_final_reward`,
:func:`get_reward_value`, :func:`get_message_value`... — understand both span shapes:
agentbolt's (``agentbolt.reward`` with ``agentbolt.reward.value``) and v0.3's
(``agentlightning.reward.<i>.name`` / ``.value`` attributes on any span, AgentOps'
``agentops.task.output``), on agentbolt :class:`~agentbolt.types.Span` objects and on
OpenTelemetry ``ReadableSpan`` alike.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import orjson

from agentbolt import semconv
from agentbolt.compat.emitter.options import emit_annotation, emit_exception, emit_message, emit_object
from agentbolt.compat.semconv import RewardPydanticModel
from agentbolt.semconv import (
    MESSAGE_CONTENT,
    MESSAGE_SPAN,
    OBJECT_JSON,
    OBJECT_SPAN,
)
from agentbolt.tracing.emitters import emit_reward, operation

__all__ = [
    "RewardPydanticModel",
    "emit_annotation",
    "emit_exception",
    "emit_message",
    "emit_object",
    "emit_reward",
    "find_final_reward",
    "find_reward_spans",
    "get_message_value",
    "get_object_value",
    "get_reward_value",
    "get_rewards_from_span",
    "is_reward_span",
    "operation",
    "reward",
]

F = TypeVar("F", bound=Callable[..., Any])

_AGL_REWARD = re.compile(r"^agentlightning\.reward\.(\d+)\.(name|value)$")
_AGENTOPS_OUTPUTS = ("agentops.task.output", "agentops.entity.output")


def _attributes(span: Any) -> Mapping[str, Any]:
    return getattr(span, "attributes", None) or {}  # third-party: v0.3 code passes OpenTelemetry spans too


def _name(span: Any) -> str | None:
    return getattr(span, "name", None)  # third-party: v0.3 code passes OpenTelemetry spans too


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def get_rewards_from_span(span: Any) -> list[RewardPydanticModel]:
    """Every reward a span carries, the primary one first; ``[]`` for other spans."""
    attrs = _attributes(span)
    if _name(span) == semconv.REWARD_SPAN:
        primary = attrs.get(semconv.REWARD_PRIMARY, "reward")
        named = {
            key[len(semconv.REWARD_PREFIX) :]: v
            for key, v in attrs.items()
            if key.startswith(semconv.REWARD_PREFIX) and _number(v) is not None
        }
        value = _number(attrs.get(semconv.REWARD_VALUE))
        out = [RewardPydanticModel(name=str(primary), value=value)] if value is not None else []
        out += [RewardPydanticModel(name=k, value=float(v)) for k, v in named.items() if k != primary]
        return out
    slots: dict[int, dict[str, Any]] = {}
    for key, v in attrs.items():
        match = _AGL_REWARD.match(key)
        if match:
            slots.setdefault(int(match.group(1)), {})[match.group(2)] = v
    out = []
    for index in sorted(slots):
        value = _number(slots[index].get("value"))
        if value is not None:
            out.append(RewardPydanticModel(name=str(slots[index].get("name", "reward")), value=value))
    return out


def _agentops_reward(span: Any) -> float | None:
    attrs = _attributes(span)
    for key in _AGENTOPS_OUTPUTS:
        output = attrs.get(key)
        if isinstance(output, str):
            try:
                output = orjson.loads(output)
            except orjson.JSONDecodeError:
                continue
        if isinstance(output, dict) and output.get("type") == "reward":
            return _number(output.get("value"))
    return None


def get_reward_value(span: Any) -> float | None:
    """The primary reward of a span, or None when it is not a reward span."""
    rewards = get_rewards_from_span(span)
    if rewards:
        return rewards[0].value
    return _agentops_reward(span)


def is_reward_span(span: Any) -> bool:
    return get_reward_value(span) is not None


def find_reward_spans(spans: Sequence[Any]) -> list[Any]:
    """The reward spans among ``spans``, in order."""
    return [span for span in spans if is_reward_span(span)]


def find_final_reward(spans: Sequence[Any]) -> float | None:
    """The reward of the last reward span, or None when there is none."""
    for span in reversed(list(spans)):
        value = get_reward_value(span)
        if value is not None:
            return value
    return None


def get_message_value(span: Any) -> str | None:
    """The text of a message span (:func:`emit_message`; v0.3's ``agentlightning.message.body`` too)."""
    attrs = _attributes(span)
    if _name(span) == MESSAGE_SPAN:
        return attrs.get(MESSAGE_CONTENT)
    body = attrs.get(semconv.AGL_MESSAGE_BODY)
    return body if isinstance(body, str) else None


def get_object_value(span: Any) -> Any:
    """The object an object span holds (:func:`emit_object`; v0.3's ``agentlightning.object.*`` too)."""
    attrs = _attributes(span)
    raw = attrs.get(OBJECT_JSON) if _name(span) == OBJECT_SPAN else attrs.get(semconv.AGL_OBJECT_JSON)
    if isinstance(raw, str):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw
    return attrs.get(semconv.AGL_OBJECT_LITERAL)


def reward(fn: F) -> F:
    """v0.3's (deprecated) reward decorator: the function's numeric result is emitted
    as a reward (:func:`emit_reward`) and returned. Prefer calling ``emit_reward``."""

    def record(result: Any) -> Any:
        if _number(result) is not None:
            emit_reward(float(result))
        return result

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            return record(await fn(*args, **kwargs))

        return cast(F, run_async)  # functools.wraps keeps fn's signature

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        return record(fn(*args, **kwargs))

    return cast(F, run)
