"""v0.3's emitters take v0.3's arguments: ``attributes=`` land on the span (flattened),
``propagate=False`` records nothing, ``emit_annotation`` takes a dict and keeps its keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentbolt.compat import (
    InMemoryLightningStore,
    OtelTracer,
    emit_annotation,
    emit_exception,
    emit_message,
    emit_object,
    find_final_reward,
    get_message_value,
    get_object_value,
)
from agentbolt.compat.utils.otel import extract_tags_from_attributes, make_tag_attributes


async def _spans_of(body: Callable[[], Any]) -> list[Any]:
    store = InMemoryLightningStore()
    rollout = await store.start_rollout(input={"q": 1})
    tracer = OtelTracer()
    with tracer.lifespan(store):
        async with tracer.trace_context(store=store, rollout_id=rollout.rollout_id,
                                        attempt_id=rollout.attempt.attempt_id):
            body()
    return [s for s in await store.query_spans(rollout.rollout_id) if s.name != "agentbolt.rollout"]


async def test_emit_object_and_message_take_attributes() -> None:
    spans = await _spans_of(lambda: (
        emit_object({"answer": 42}, attributes={"step": 3, "meta": {"source": "tool"}}),
        emit_message("thinking", attributes={"phase": "plan"}),
    ))
    obj, msg = spans
    assert get_object_value(obj) == {"answer": 42}
    assert obj.attributes["step"] == 3 and obj.attributes["meta.source"] == "tool"
    assert get_message_value(msg) == "thinking" and msg.attributes["phase"] == "plan"


async def test_emit_exception_takes_attributes_and_marks_the_span_failed() -> None:
    def body() -> None:
        try:
            raise ValueError("bad input")
        except ValueError as exc:
            emit_exception(exc, attributes={"tool": "search"})

    (span,) = await _spans_of(body)
    assert span.attributes["exception.type"] == "ValueError" and span.attributes["tool"] == "search"
    assert span.status == "error"


async def test_emit_annotation_takes_v03s_dict_and_keeps_its_keys() -> None:
    spans = await _spans_of(lambda: (
        emit_annotation({**make_tag_attributes(["hard"]), "agentlightning.reward.0.name": "score",
                         "agentlightning.reward.0.value": 0.5}),
    ))
    assert extract_tags_from_attributes(spans[0].attributes) == ["hard"]
    assert find_final_reward(spans) == 0.5


async def test_propagate_false_builds_the_span_without_recording_it() -> None:
    built: list[Any] = []
    spans = await _spans_of(lambda: built.append(emit_object([1, 2], attributes={"k": "v"}, propagate=False)))
    assert spans == []
    assert built[0].name == "agentbolt.object" and built[0].attributes["k"] == "v"
    assert built[0].status.status_code == "OK"


@pytest.mark.parametrize(("call", "reason"), [
    (lambda: emit_object(1, attributes=["not", "a", "dict"]), "attributes= is a dict"),
    (lambda: emit_annotation({"k": 1}, propagate="yes"), "propagate= is True or False"),
    (lambda: emit_annotation({"k": 1}, other=2), "not both"),
])
async def test_wrong_options_are_refused_with_the_reason(call: Callable[[], Any], reason: str) -> None:
    with pytest.raises(TypeError, match=reason):
        await _spans_of(call)


def test_a_mixed_list_is_stored_item_by_item_as_v03_does() -> None:
    from agentbolt.compat.utils.otel import flatten_attributes

    assert flatten_attributes({"k": [1, "a"]}) == {"k.0": 1, "k.1": "a"}
