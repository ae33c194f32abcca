"""v0.3's attribute helpers: tags and links as flattened attributes, and finding the spans
a link names."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider

from agentbolt.compat.semconv import LinkPydanticModel
from agentbolt.compat.types import Span
from agentbolt.compat.utils.otel import (
    check_attributes_sanity,
    extract_links_from_attributes,
    extract_tags_from_attributes,
    filter_and_unflatten_attributes,
    flatten_attributes,
    format_exception_attributes,
    full_qualified_name,
    make_link_attributes,
    make_tag_attributes,
    query_linked_spans,
    sanitize_attributes,
    unflatten_attributes,
)


def test_tags_round_trip_through_flat_attributes() -> None:
    attrs = make_tag_attributes(["gen_ai.model:gpt-4", "reward.extrinsic"])
    assert attrs == {"agentlightning.tag.0": "gen_ai.model:gpt-4", "agentlightning.tag.1": "reward.extrinsic"}
    assert extract_tags_from_attributes({**attrs, "other": 1}) == ["gen_ai.model:gpt-4", "reward.extrinsic"]
    assert extract_tags_from_attributes({}) == []


def test_links_round_trip_and_name_spans_by_id_or_attribute() -> None:
    attrs = make_link_attributes({"gen_ai.response.id": "resp-1"})
    assert extract_links_from_attributes(attrs) == [LinkPydanticModel(key_match="gen_ai.response.id",
                                                                      value_match="resp-1")]
    call = Span.from_attributes(attributes={"gen_ai.response.id": "resp-1"})
    other = Span.from_attributes(attributes={"gen_ai.response.id": "resp-2"})
    assert query_linked_spans([call, other], extract_links_from_attributes(attrs)) == [call]
    by_id = [LinkPydanticModel(key_match="span_id", value_match=other.span_id)]
    assert query_linked_spans([call, other], by_id) == [other]
    with pytest.raises(ValueError, match="must be a string"):
        make_link_attributes({"k": 1})  # type: ignore[dict-item]


def test_links_match_opentelemetry_spans_too() -> None:
    with TracerProvider().get_tracer("t").start_as_current_span("s") as live:
        pass
    span_id = format(live.get_span_context().span_id, "016x")
    assert query_linked_spans([live], [LinkPydanticModel(key_match="span_id", value_match=span_id)]) == [live]


def test_flatten_and_unflatten_are_inverse() -> None:
    nested = {"a": {"b": 1, "c": [2, 3]}, "d": [{"e": "x"}]}
    flat = flatten_attributes(nested, expand_leaf_lists=True)
    assert flat == {"a.b": 1, "a.c.0": 2, "a.c.1": 3, "d.0.e": "x"}
    assert unflatten_attributes(flat) == nested
    assert flatten_attributes({"c": [2, 3]}) == {"c": [2, 3]}  # a list of one type is a value
    assert unflatten_attributes({"x.0": 1, "x.2": 2}) == {"x": {"0": 1, "2": 2}}  # not 0..n-1: a dict
    assert filter_and_unflatten_attributes({"p.a": 1, "p.b.0": "z", "q": 2}, "p") == {"a": 1, "b": ["z"]}


def test_sanitising_and_checking_attributes() -> None:
    assert sanitize_attributes({"n": 1, "l": [1, 2.5], "d": {"k": "v"}}) == {"n": 1, "l": [1.0, 2.5],
                                                                              "d": '{"k": "v"}'}
    check_attributes_sanity({"ok": [1, 2], "s": "x"})
    with pytest.raises(ValueError, match="attribute 'bad'"):
        check_attributes_sanity({"bad": {"nested": 1}})


def test_exception_attributes_and_names() -> None:
    try:
        raise KeyError("missing")
    except KeyError as exc:
        attrs = format_exception_attributes(exc)
    assert attrs["exception.type"] == "KeyError" and "raise KeyError" in attrs["exception.stacktrace"]
    assert full_qualified_name(Span) == "agentbolt.compat.types.span.Span"
    assert full_qualified_name(int) == "int"
