"""v0.3's adapters (``agentlightning.adapter``) over agentbolt's.

* :class:`TracerTraceToTriplet` and :class:`LlmProxyTraceToTriplet` —
  :class:`~agentbolt.adapters.TripletAdapter` (model calls recorded by the tracer or by
  the gateway are the same spans on agentbolt), answering v0.3's :class:`Triplet`
  (``prompt``/``response`` dicts with ``token_ids``, the reward, and the agentbolt
  triplet's details in ``metadata``);
* :class:`TraceToMessages` — :class:`~agentbolt.adapters.MessagesAdapter`: OpenAI chat
  records ``{"messages": [...], "tools": [...]}``;
* :class:`Adapter`, :class:`TraceAdapter`, :class:`OtelTraceAdapter`,
  :class:`TraceToTripletBase` — the base classes, for adapters of your own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Generic, Literal, TypedDict, TypeVar

from agentbolt.adapters.messages import ChatRecord, MessagesAdapter
from agentbolt.adapters.triplets import Triplet as BoltTriplet
from agentbolt.adapters.triplets import TripletAdapter
from agentbolt.compat.types import Triplet
from agentbolt.types import Span

__all__ = [
    "Adapter",
    "OpenAIMessages",
    "LlmProxyTraceToTriplet",
    "OtelTraceAdapter",
    "TraceAdapter",
    "TraceToMessages",
    "TraceToTripletBase",
    "TracerTraceToTriplet",
]

T_from = TypeVar("T_from")
T_to = TypeVar("T_to")


class OpenAIMessages(TypedDict):
    """One OpenAI chat record, as :class:`TraceToMessages` makes them."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None


class Adapter(Generic[T_from, T_to]):
    """Turns ``T_from`` into ``T_to``: override :meth:`adapt`; calling the adapter adapts."""

    def adapt(self, source: T_from, /) -> T_to:
        raise NotImplementedError(f"{type(self).__name__} must implement adapt(source)")

    def __call__(self, source: T_from, /) -> T_to:
        return self.adapt(source)


class TraceAdapter(Adapter[Sequence[Span], T_to], Generic[T_to]):
    """An adapter of a rollout's spans (agentbolt :class:`~agentbolt.types.Span` objects)."""


class OtelTraceAdapter(Adapter[Sequence[Any], T_to], Generic[T_to]):
    """An adapter of OpenTelemetry ``ReadableSpan`` objects (e.g. ``tracer.get_last_trace()``)."""


class TraceToTripletBase(TraceAdapter[list[Triplet]]):
    """Base of the adapters that make v0.3 :class:`Triplet` objects."""


def _v03_triplet(t: BoltTriplet) -> Triplet:
    prompt = {"token_ids": t.prompt.token_ids or [], "messages": t.prompt.messages, "text": t.prompt.text}
    response = {"token_ids": t.response.token_ids or [], "text": t.response.text, "message": t.response.message}
    metadata = {
        "rollout_id": t.rollout_id,
        "attempt_id": t.attempt_id,
        "span_id": t.span_id,
        "agent_name": t.agent_name,
        "index": t.index,
        "model": t.model,
        "logprobs": t.logprobs,
        "token_ids_source": t.token_ids_source,
        "resources_version": t.resources_version,
    }
    return Triplet(prompt=prompt, response=response, reward=t.reward, metadata=metadata)


class TracerTraceToTriplet(TraceToTripletBase):
    """One :class:`Triplet` per model call of the spans, with the engine's token ids.

    ``agent_match`` (a regular expression on agent names) picks the calls to keep;
    ``final_reward`` only (v0.3's default reward matching) puts the rollout's final reward
    on the last call, ``"preceding"`` (any other ``reward_match``) gives each call the
    reward emitted after it. v0.3's span-tree options (``exclude_llm_call_in_reward``,
    ``repair_hierarchy``, ``llm_call_match``...) have no counterpart: agentbolt identifies
    model calls by their ``gen_ai.*`` attributes."""

    def __init__(self, *, agent_match: str | re.Pattern[str] | None = None, reward_match: Any = None,
                 **_options: Any) -> None:
        rule: Literal["final", "preceding"] = (
            "final" if reward_match in (None, "final", "FIRST_OCCURRENCE") else "preceding"
        )
        self.adapter = TripletAdapter(reward_rule=rule, agent_match=agent_match)

    def adapt(self, source: Iterable[Span], /) -> list[Triplet]:
        return [_v03_triplet(t) for t in self.adapter.adapt(source)]


class LlmProxyTraceToTriplet(TracerTraceToTriplet):
    """The same as :class:`TracerTraceToTriplet`: the gateway's spans (v0.3's LLM proxy)
    and the tracer's are the same kind of span on agentbolt."""


class TraceToMessages(TraceAdapter[list[ChatRecord]]):
    """OpenAI chat records of every model call (``{"messages": [...], "tools": [...]}``)."""

    def __init__(self, agent_match: str | re.Pattern[str] | None = None, **_options: Any) -> None:
        self.adapter = MessagesAdapter(agent_match)

    def adapt(self, source: Iterable[Span], /) -> list[ChatRecord]:
        return self.adapter.adapt(source)
