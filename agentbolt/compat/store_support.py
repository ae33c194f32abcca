"""Helpers of :mod:`agentbolt.compat.store`: v0.3's result types, filtering, sorting and
windowing of full query results, and resources given the v0.3 way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypedDict

from agentbolt.types import PromptTemplate

__all__ = ["LightningStoreCapabilities", "LightningStoreStatistics", "combine", "resources_of", "window"]


class LightningStoreCapabilities(TypedDict, total=False):
    thread_safe: bool
    async_safe: bool
    zero_copy: bool
    otlp_traces: bool


class LightningStoreStatistics(TypedDict, total=False):
    name: str
    total_rollouts: int
    total_attempts: int
    total_spans: int
    total_resources: int
    total_workers: int
    queue_depth: int


def window(items: list[Any], sort_by: str | None, sort_order: str, limit: int, offset: int) -> list[Any]:
    """v0.3's sorting and ``offset``/``limit`` (``-1``: no limit) on a full result."""
    if sort_by:
        items = sorted(items, key=lambda x: _sort_key(x, sort_by), reverse=sort_order == "desc")
    items = items[offset:] if offset > 0 else items
    return items if limit is None or limit < 0 else items[:limit]


def _sort_key(item: Any, field: str) -> tuple[bool, Any]:
    value = getattr(item, field, None)  # third-party: v0.3's sort_by names a field of the caller's choice
    return value is None, value


def combine(tests: list[Callable[[Any], bool]], logic: Literal["and", "or"]) -> Callable[[Any], bool]:
    if not tests:
        return lambda _: True
    if logic == "or":
        return lambda x: any(t(x) for t in tests)
    return lambda x: all(t(x) for t in tests)


def resources_of(resources: Any) -> dict[str, Any]:
    return {k: PromptTemplate(template=v) if isinstance(v, str) else v for k, v in dict(resources).items()}
