"""v0.3's ``Span`` is an agentbolt span built the v0.3 ways."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider

import agentbolt
from agentbolt.compat import InMemoryLightningStore
from agentbolt.compat.types import OtelResource, Span, SpanContext, SpanCoreFields, TraceStatus


def test_v03s_constructor_arguments_become_agentbolts_fields() -> None:
    span = Span(
        rollout_id="ro-1", attempt_id="at-1", sequence_id=3, trace_id="a" * 32, span_id="b" * 16, parent_id=None,
        name="tool", status=TraceStatus(status_code="ERROR", description="boom"), attributes={"k": 1}, events=[],
        links=[], start_time=None, end_time=None,
        context=SpanContext(trace_id="a" * 32, span_id="b" * 16, is_remote=False, trace_state={}),
        parent=SpanContext(trace_id="a" * 32, span_id="c" * 16, is_remote=False, trace_state={}),
        resource=OtelResource(attributes={"service.name": "svc"}, schema_url=""),
    )
    assert isinstance(span, agentbolt.Span)
    assert (span.status, span.status_message) == ("error", "boom")
    assert span.parent_id == "c" * 16 and span.resource == {"service.name": "svc"}


def test_from_attributes_makes_a_virtual_span_with_fresh_ids() -> None:
    one, two = Span.from_attributes(attributes={"x": 1}), Span.from_attributes(attributes={"x": 2})
    assert one.name == "agentlightning.virtual" and one.status == "ok" and one.attributes == {"x": 1}
    assert one.span_id != two.span_id and len(one.trace_id) == 32


def test_from_core_fields_keeps_name_status_attributes_and_times() -> None:
    core = SpanCoreFields(name="step", status=TraceStatus(status_code="OK"), attributes={"a": "b"},
                          start_time=10.0, end_time=11.5)
    span = Span.from_core_fields(core, rollout_id="ro-1", attempt_id="at-1", sequence_id=2)
    assert (span.name, span.start_time, span.end_time, span.sequence_id) == ("step", 10.0, 11.5, 2)


def test_from_opentelemetry_ties_a_finished_span_to_an_attempt() -> None:
    tracer = TracerProvider().get_tracer("t")
    with tracer.start_as_current_span("outer", attributes={"q": "1"}) as otel:
        pass
    span = Span.from_opentelemetry(otel, "ro-1", "at-1", 7)  # type: ignore[arg-type]
    assert (span.name, span.rollout_id, span.sequence_id, span.attributes["q"]) == ("outer", "ro-1", 7, "1")


def test_links_are_refused_with_what_to_use_instead() -> None:
    link = {"context": {"trace_id": "a" * 32, "span_id": "b" * 16}}
    with pytest.raises(ValueError, match="make_link_attributes"):
        Span.from_attributes(attributes={}).model_validate({"name": "n", "links": [link]})


async def test_a_store_takes_it_as_a_span_of_the_attempt() -> None:
    store = InMemoryLightningStore()
    started = await store.start_rollout(input=1)
    span = Span.from_attributes(attributes={"agentlightning.reward.0.value": 0.5},
                                rollout_id=started.rollout_id, attempt_id=started.attempt.attempt_id)
    await store.add_span(span)
    stored = await store.query_spans(started.rollout_id)
    assert [s.span_id for s in stored if s.span_id == span.span_id] == [span.span_id]
