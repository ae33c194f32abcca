"""Agent Lightning v0.3's data types (``agentlightning.types``), on agentbolt's.

Rollouts, attempts, spans, resources and workers are agentbolt's own models (the same
field names where v0.3 programs read them: ``rollout_id``, ``input``, ``status``,
``attempt_id``, ``name``, ``attributes``...). The types v0.3 has and agentbolt has not —
:class:`AttemptedRollout`, :class:`ResourcesUpdate`, :class:`Hook`, :class:`Dataset`,
:data:`NamedResources` — are defined here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, Protocol, SupportsIndex, TypeVar
from urllib.parse import quote

from opentelemetry.sdk.trace import ReadableSpan
from pydantic import BaseModel, ConfigDict, Field

from agentbolt import semconv
from agentbolt.compat.resolution import module_getattr
from agentbolt.compat.types.page import PaginatedResult
from agentbolt.compat.types.span import Span
from agentbolt.compat.types.tracer import (
    Event,
    Link,
    OtelResource,
    SpanContext,
    SpanCoreFields,
    SpanRecordingContext,
    TraceState,
    TraceStatus,
)
from agentbolt.types import (
    LLM,
    Attempt,
    AttemptStatus,
    PromptTemplate,
    Resource,
    Resources,
    Rollout,
    RolloutConfig,
    RolloutCreate,
    RolloutMode,
    RolloutStatus,
    SpanStatus,
    Worker,
    WorkerStatus,
)
from agentbolt.types import Span as BoltSpan

__all__ = [
    "Event",
    "Link",
    "OtelResource",
    "SpanContext",
    "SpanCoreFields",
    "SpanRecordingContext",
    "TraceState",
    "TraceStatus",
    "LLM",
    "Attempt",
    "AttemptStatus",
    "AttemptedRollout",
    "AttributeValue",
    "Attributes",
    "Dataset",
    "EnqueueRolloutRequest",
    "Hook",
    "NamedResources",
    "PaginatedResult",
    "PromptTemplate",
    "ProxyLLM",
    "Resource",
    "ResourceUnion",
    "ResourcesUpdate",
    "Rollout",
    "RolloutConfig",
    "RolloutMode",
    "RolloutRawResult",
    "RolloutStatus",
    "Span",
    "SpanAttributeNames",
    "SpanLike",
    "SpanNames",
    "StatusCode",
    "TaskInput",
    "Triplet",
    "Worker",
    "WorkerStatus",
    "resources_id_of",
    "version_of",
]

T_co = TypeVar("T_co", covariant=True)

TaskInput = Any
"""A rollout's input: any JSON-serialisable value."""

NamedResources = dict[str, Resource]
"""Resources by name, e.g. ``{"main_prompt": PromptTemplate(...), "main_llm": LLM(...)}``."""

ResourceUnion = Resource
"""Any one resource (agentbolt's discriminated union of LLM, PromptTemplate, JsonResource)."""

class ProxyLLM(LLM):
    """An LLM behind v0.3's proxy (agentbolt's gateway): ``get_base_url(rollout_id,
    attempt_id)`` routes the endpoint to that attempt — ``http://host:port/v1`` becomes
    ``http://host:port/rollout/<rollout_id>/attempt/<attempt_id>/v1``. An endpoint already
    routed to the attempt (the runner scopes gateway LLMs itself) is returned as it is.
    Stored, it is an :class:`~agentbolt.LLM` (``resource_type="llm"``)."""

    def get_base_url(self, rollout_id: str | None = None, attempt_id: str | None = None,
                     *_ids: Any, **_named: Any) -> str:
        if rollout_id is None and attempt_id is None:
            return self.endpoint
        if not (isinstance(rollout_id, str) and isinstance(attempt_id, str)):
            raise ValueError("give both rollout_id and attempt_id (strings), or neither")
        prefix = self.endpoint.rstrip("/")
        has_v1 = prefix.endswith("/v1")
        prefix = prefix.removesuffix("/v1")
        route = f"/rollout/{quote(rollout_id, safe='')}/attempt/{quote(attempt_id, safe='')}"
        if prefix.endswith(route):
            return self.endpoint
        return prefix + route + ("/v1" if has_v1 else "")


StatusCode = SpanStatus
"""A span's status: ``unset``, ``ok`` or ``error``."""

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[bool] | Sequence[int] | Sequence[float]
Attributes = Mapping[str, AttributeValue]
SpanLike = ReadableSpan | BoltSpan
"""What the span readers accept: agentbolt spans and OpenTelemetry ``ReadableSpan``."""

RolloutRawResult = None | float | list[ReadableSpan] | list[BoltSpan]
"""What a v0.3 rollout may return: nothing (rewards emitted), the final reward, or spans."""


class Dataset(Protocol[T_co]):
    """Anything indexable with a length — a list will do."""

    def __getitem__(self, index: SupportsIndex, /) -> T_co: ...

    def __len__(self) -> int: ...


class AttemptedRollout(Rollout):
    """A rollout together with the attempt being made of it (what a claim returns)."""

    attempt: Attempt

    @classmethod
    def of(cls, rollout: Rollout, attempt: Attempt) -> AttemptedRollout:
        return cls(**dict(rollout.__dict__), attempt=attempt)


class EnqueueRolloutRequest(BaseModel):
    """One rollout to enqueue (v0.3's ``enqueue_many_rollouts`` item)."""

    model_config = ConfigDict(extra="forbid")

    input: TaskInput = None
    mode: RolloutMode | None = None
    resources_id: str | None = None
    config: RolloutConfig | None = None
    metadata: dict[str, Any] | None = None


class ResourcesUpdate(BaseModel):
    """A published resources version as v0.3 names it: ``resources_id`` is ``"rs-<version>"``."""

    resources_id: str
    version: int
    create_time: float
    update_time: float
    resources: NamedResources = Field(default_factory=dict)

    @classmethod
    def of(cls, resources: Resources) -> ResourcesUpdate:
        return cls(
            resources_id=resources_id_of(resources.version),
            version=resources.version,
            create_time=resources.created_at,
            update_time=resources.created_at,
            resources=dict(resources.resources),
        )


def resources_id_of(version: int) -> str:
    return f"rs-{version}"


def version_of(resources_id: str | int | None) -> int | None:
    """The resources version a v0.3 ``resources_id`` names (``"rs-3"``, ``"3"`` or ``3``)."""
    if resources_id is None or isinstance(resources_id, int):
        return resources_id
    text = str(resources_id)
    digits = text.removeprefix("rs-")
    if not digits.isdigit():
        raise ValueError(f"{resources_id!r} is not a resources id of this store (they look like 'rs-3')")
    return int(digits)


def enqueue_request(request: EnqueueRolloutRequest | Mapping[str, Any]) -> RolloutCreate:
    """The agentbolt enqueue spec for a v0.3 request."""
    req = request if isinstance(request, EnqueueRolloutRequest) else EnqueueRolloutRequest(**request)
    spec: dict[str, Any] = {"input": req.input, "metadata": dict(req.metadata or {})}
    if req.mode is not None:
        spec["mode"] = RolloutMode(req.mode)
    if req.config is not None:
        spec["config"] = req.config
    version = version_of(req.resources_id)
    if version is not None:
        spec["resources_version"] = version
    return RolloutCreate(**spec)


class Triplet(BaseModel):
    """v0.3's training triplet: one model call's prompt, response and reward."""

    prompt: Any
    response: Any
    reward: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


def _noop(fn: Any) -> Any:
    fn.__agentbolt_noop__ = True
    return fn


class Hook:
    """v0.3's hook base class: override any of the four methods (all keyword arguments).

    agentbolt's runner calls them with v0.3's arguments — ``agent``, ``runner``,
    ``tracer``, ``rollout`` (and ``spans`` at the end); the methods left alone cost nothing.
    """

    @_noop
    async def on_trace_start(self, *, agent: Any, runner: Any, tracer: Any, rollout: Rollout) -> None:
        """The trace is open; the agent has not started."""

    @_noop
    async def on_trace_end(self, *, agent: Any, runner: Any, tracer: Any, rollout: Rollout) -> None:
        """The agent returned; the trace is still open (``emit_reward`` works here)."""

    @_noop
    async def on_rollout_start(self, *, agent: Any, runner: Any, rollout: Rollout) -> None:
        """Before the attempt starts."""

    @_noop
    async def on_rollout_end(self, *, agent: Any, runner: Any, rollout: Rollout, spans: list[BoltSpan]) -> None:
        """After the attempt's outcome is stored; ``spans`` are its spans."""


class SpanNames(str, Enum):
    """Names of the spans agentbolt's emitters make (v0.3 called them ``agentlightning.*``)."""

    REWARD = semconv.REWARD_SPAN
    MESSAGE = semconv.MESSAGE_SPAN
    OBJECT = semconv.OBJECT_SPAN
    EXCEPTION = semconv.EXCEPTION_SPAN
    ANNOTATION = semconv.ANNOTATION_SPAN
    OPERATION = semconv.OPERATION_SPAN


class SpanAttributeNames(str, Enum):
    """Attribute keys of those spans (v0.3's ``agentlightning.*`` ones are read too)."""

    REWARD_VALUE = semconv.REWARD_VALUE
    MESSAGE = semconv.MESSAGE_CONTENT
    OBJECT = semconv.OBJECT_JSON




__getattr__ = module_getattr(__name__)  # third-party: v0.3's names agentbolt does not provide say why
