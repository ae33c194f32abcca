"""v0.3's OpenTelemetry attribute helpers (``agentlightning.utils.otel``).

Tags and links are flattened attribute lists under ``agentlightning.tag`` and
``agentlightning.link`` (``agentlightning.link.0.key_match`` ...), so they travel on any
span through any OpenTelemetry exporter; agentbolt stores them as they are.
:func:`query_linked_spans` finds the spans a link names (by ``span_id``, ``trace_id`` or
any attribute), on agentbolt spans and OpenTelemetry ``ReadableSpan`` alike.
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from pydantic import TypeAdapter

from agentbolt.compat.semconv import LightningSpanAttributes, LinkPydanticModel

__all__ = [
    "check_attributes_sanity",
    "extract_links_from_attributes",
    "extract_tags_from_attributes",
    "filter_and_unflatten_attributes",
    "filter_attributes",
    "flatten_attributes",
    "format_exception_attributes",
    "full_qualified_name",
    "get_tracer",
    "get_tracer_provider",
    "make_link_attributes",
    "make_tag_attributes",
    "query_linked_spans",
    "sanitize_attribute_value",
    "sanitize_attributes",
    "sanitize_list_attribute_sanity",
    "unflatten_attributes",
]

log = logging.getLogger(__name__)
S = TypeVar("S")
_PRIMITIVES = (str, bool, int, float)
_TAG = LightningSpanAttributes.TAG.value
_LINK = LightningSpanAttributes.LINK.value


def full_qualified_name(obj: type) -> str:
    """``module.QualName`` of a class (builtins without the module)."""
    module = obj.__module__
    return obj.__qualname__ if module in (None, "builtins") else f"{module}.{obj.__qualname__}"


def get_tracer_provider(inspect: bool = True) -> trace.TracerProvider:
    """The global OpenTelemetry tracer provider (inside a rollout, agentbolt records what it
    traces as spans of the attempt). ``inspect`` is accepted for v0.3 and has no effect."""
    return trace.get_tracer_provider()


def get_tracer(use_active_span_processor: bool = True) -> trace.Tracer:
    """A tracer of the global provider (see :func:`get_tracer_provider`)."""
    return trace.get_tracer("agentlightning")


def make_tag_attributes(tags: list[str]) -> dict[str, Any]:
    """``["a", "b"]`` → ``{"agentlightning.tag.0": "a", "agentlightning.tag.1": "b"}``."""
    return flatten_attributes({_TAG: list(tags)}, expand_leaf_lists=True)


def extract_tags_from_attributes(attributes: Mapping[str, Any]) -> list[str]:
    """The tags :func:`make_tag_attributes` put in ``attributes`` (``[]`` when none)."""
    found = filter_and_unflatten_attributes(attributes, _TAG)
    return TypeAdapter(list[str]).validate_python(found or [])


def make_link_attributes(links: Mapping[str, str]) -> dict[str, Any]:
    """``{"gen_ai.response.id": "r-1"}`` → ``agentlightning.link.0.key_match`` /
    ``.value_match`` attributes (values must be strings)."""
    pairs = []
    for key, value in links.items():
        if not isinstance(value, str):
            raise ValueError(f"a link's value must be a string; {key!r} has a {type(value).__name__}")
        pairs.append({"key_match": key, "value_match": value})
    return flatten_attributes({_LINK: pairs}, expand_leaf_lists=True)


def extract_links_from_attributes(attributes: Mapping[str, Any]) -> list[LinkPydanticModel]:
    """The links :func:`make_link_attributes` put in ``attributes`` (``[]`` when none)."""
    found = filter_and_unflatten_attributes(attributes, _LINK)
    return TypeAdapter(list[LinkPydanticModel]).validate_python(found or [])


def _span_field(span: Any, key: str) -> Any:
    if key in ("span_id", "trace_id"):
        if isinstance(span, ReadableSpan):
            ctx = span.context
            if ctx is None:
                return None
            return trace.format_span_id(ctx.span_id) if key == "span_id" else trace.format_trace_id(ctx.trace_id)
        return getattr(span, key)  # third-party: a v0.3 caller's span field by name
    return (span.attributes or {}).get(key)


def query_linked_spans(spans: Sequence[S], links: Sequence[LinkPydanticModel]) -> list[S]:
    """The spans matching every link (an empty ``links`` matches all)."""
    return [s for s in spans if all(_span_field(s, link.key_match) == link.value_match for link in links)]


def filter_attributes(attributes: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The attributes named ``prefix`` or ``prefix.<anything>``."""
    return {k: v for k, v in attributes.items() if k == prefix or k.startswith(prefix + ".")}


def filter_and_unflatten_attributes(attributes: Mapping[str, Any], prefix: str) -> dict[str, Any] | list[Any]:
    """The attributes under ``prefix.``, prefix removed, unflattened."""
    inner: dict[str, Any] = {}
    for key, value in filter_attributes(attributes, prefix).items():
        if key == prefix:
            raise ValueError(f"attribute {prefix!r} is a value, not a group: nothing to unflatten under it")
        inner[key[len(prefix) + 1:]] = value
    return unflatten_attributes(inner)


def flatten_attributes(nested: Mapping[str, Any] | list[Any], *, expand_leaf_lists: bool = False
                       ) -> dict[str, Any]:
    """Dotted keys for nested dicts and lists (``{"a": {"b": 1}}`` → ``{"a.b": 1}``). A list
    of one primitive type stays a value unless ``expand_leaf_lists``."""
    flat: dict[str, Any] = {}

    def walk(value: Any, path: str) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ValueError(f"keys must be strings: {key!r} under {path or 'the top level'}")
                walk(item, f"{path}.{key}" if path else key)
            return
        if isinstance(value, list):
            if value and path and not expand_leaf_lists and all(isinstance(v, _PRIMITIVES) for v in value):
                if len({_primitive_kind(v) for v in value}) == 1:
                    flat[path] = value
                    return
                log.warning("list attribute %r mixes types; stored item by item", path)
            for index, item in enumerate(value):
                walk(item, f"{path}.{index}" if path else str(index))
            return
        flat[path] = value

    walk(nested, "")
    return flat


def _primitive_kind(value: Any) -> type:
    return bool if isinstance(value, bool) else int if isinstance(value, int) else type(value)


def unflatten_attributes(flat: Mapping[str, Any]) -> dict[str, Any] | list[Any]:
    """The inverse of :func:`flatten_attributes`: a group whose keys are exactly
    ``0..n-1`` becomes a list."""
    root: dict[str, Any] = {}
    for key, value in flat.items():
        node = root
        *parents, leaf = key.split(".")
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[leaf] = value
    return _listify(root)


def _listify(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    converted = {k: _listify(v) for k, v in node.items()}
    if converted and all(k.isdigit() for k in converted):
        if sorted(int(k) for k in converted) == list(range(len(converted))):
            return [converted[str(i)] for i in range(len(converted))]
    return converted


def sanitize_list_attribute_sanity(values: list[Any]) -> Any:
    """A list as an OpenTelemetry attribute value (one primitive type; ints and bools
    widen to the wider type); :class:`ValueError` for anything else."""
    if all(isinstance(v, str) for v in values):
        return list(values)
    if all(isinstance(v, bool) for v in values):
        return list(values)
    if all(isinstance(v, (int, bool)) for v in values):
        return [int(v) for v in values]
    if all(isinstance(v, (int, float, bool)) for v in values):
        return [float(v) for v in values]
    raise ValueError(f"a list attribute holds one primitive type, got {sorted({type(v).__name__ for v in values})}")


def sanitize_attribute_value(value: Any, force: bool = True) -> Any:
    """``value`` as an OpenTelemetry attribute value: primitives as they are, lists of one
    type as lists, anything else as JSON (``force``: non-JSON values by ``str``)."""
    if isinstance(value, _PRIMITIVES):
        return value
    if isinstance(value, list):
        try:
            return sanitize_list_attribute_sanity(value)
        except ValueError:
            pass
    try:
        return json.dumps(value, default=str if force else None)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"a {type(value).__name__} is not JSON serialisable (pass force=True)") from exc


def sanitize_attributes(attributes: Mapping[str, Any], force: bool = True) -> dict[str, Any]:
    """:func:`sanitize_attribute_value` of every attribute."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        try:
            out[key] = sanitize_attribute_value(value, force=force)
        except ValueError as exc:
            raise ValueError(f"attribute {key!r}: {exc}") from exc
    return out


def check_attributes_sanity(attributes: Mapping[Any, Any]) -> None:
    """:class:`ValueError` unless every key is a string and every value a valid attribute."""
    for key, value in attributes.items():
        if not isinstance(key, str):
            raise ValueError(f"attribute keys are strings, got {key!r}")
        if isinstance(value, list):
            try:
                sanitize_list_attribute_sanity(value)
            except ValueError as exc:
                raise ValueError(f"attribute {key!r}: {exc}") from exc
        elif not isinstance(value, _PRIMITIVES):
            raise ValueError(f"attribute {key!r} is a {type(value).__name__}: use str, int, float, bool or a list")


def format_exception_attributes(exception: BaseException) -> dict[str, Any]:
    """OpenTelemetry's exception attributes (``exception.type``, ``.message``,
    ``.escaped``, ``.stacktrace``)."""
    attrs: dict[str, Any] = {
        "exception.type": type(exception).__name__,
        "exception.message": str(exception),
        "exception.escaped": True,
    }
    stack = "".join(traceback.format_exception(type(exception), exception, exception.__traceback__))
    if stack.strip():
        attrs["exception.stacktrace"] = stack
    return attrs
