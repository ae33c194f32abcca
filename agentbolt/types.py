"""The data model shared by every part of agentbolt.

Everything that crosses the Store — rollouts, attempts, spans, resources, workers — is
one of these pydantic models. Timestamps are float seconds since the epoch (UTC), ids
are strings. See ``docs/concepts.md`` for the lifecycle and retry semantics.
"""

from __future__ import annotations

import math
import time
import uuid
from enum import StrEnum
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from agentbolt.aliases import other_keywords

__all__ = [
    "RolloutStatus",
    "AttemptStatus",
    "RolloutMode",
    "WorkerStatus",
    "RolloutConfig",
    "ErrorInfo",
    "RolloutCreate",
    "Rollout",
    "Attempt",
    "Claim",
    "ReportAndClaim",
    "SpanStatus",
    "SpanEvent",
    "Span",
    "LLM",
    "PromptTemplate",
    "JsonResource",
    "Resource",
    "Resources",
    "Worker",
    "StoreStats",
    "MetricRecord",
    "MetricValue",
    "Page",
    "new_id",
    "now",
]


def now() -> float:
    """Current wall-clock time in seconds since the epoch."""
    return time.time()


def new_id(prefix: str) -> str:
    """A fresh, sortable-enough unique id such as ``ro-3f2a…``."""
    return f"{prefix}-{uuid.uuid4().hex}"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=False)


class RolloutStatus(StrEnum):
    """Where a rollout is in its life. See ``agentbolt.store.lifecycle`` for the legal moves."""

    QUEUING = "queuing"
    PREPARING = "preparing"
    RUNNING = "running"
    REQUEUING = "requeuing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL_ROLLOUT

    @property
    def is_claimable(self) -> bool:
        return self in (RolloutStatus.QUEUING, RolloutStatus.REQUEUING)


_TERMINAL_ROLLOUT = frozenset({RolloutStatus.SUCCEEDED, RolloutStatus.FAILED, RolloutStatus.CANCELLED})


class AttemptStatus(StrEnum):
    """Outcome of one try of a rollout."""

    PREPARING = "preparing"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMEOUT = "timeout"
    UNRESPONSIVE = "unresponsive"

    @property
    def is_active(self) -> bool:
        return self in (AttemptStatus.PREPARING, AttemptStatus.RUNNING)


class RolloutMode(StrEnum):
    TRAIN = "train"
    VAL = "val"
    TEST = "test"


class WorkerStatus(StrEnum):
    IDLE = "idle"
    BUSY = "busy"
    OFFLINE = "offline"


class RolloutConfig(_Model):
    """Per-rollout limits and retry rules, enforced by the store (not by callers).

    * ``timeout_seconds`` — an attempt running longer than this (from its claim) becomes
      ``timeout``.
    * ``unresponsive_seconds`` — an attempt with no heartbeat and no span for this long
      becomes ``unresponsive``.
    * ``max_attempts`` — how many tries a rollout gets in total.
    * ``retry_on`` — which attempt outcomes requeue the rollout while tries remain.
      Infrastructure failures (``timeout``, ``unresponsive``) retry by default; an
      agent's own ``failed`` retries only if listed here or if the failure says it is
      retryable (:attr:`ErrorInfo.retryable`).
    """

    timeout_seconds: float | None = Field(default=None, gt=0)
    unresponsive_seconds: float | None = Field(default=None, gt=0)
    max_attempts: int = Field(default=3, ge=1, le=100)
    retry_on: list[AttemptStatus] = Field(
        default_factory=lambda: [AttemptStatus.TIMEOUT, AttemptStatus.UNRESPONSIVE],
        validation_alias=AliasChoices("retry_on", *other_keywords("RolloutConfig", "retry_on")),  # retry_condition
    )

    @field_validator("retry_on")
    @classmethod
    def _only_failures(cls, v: list[AttemptStatus]) -> list[AttemptStatus]:
        bad = [s for s in v if s not in (AttemptStatus.FAILED, AttemptStatus.TIMEOUT, AttemptStatus.UNRESPONSIVE)]
        if bad:
            raise ValueError(f"retry_on may only name failure outcomes (failed, timeout, unresponsive), got {bad}")
        return v


class ErrorInfo(_Model):
    """Why an attempt failed. ``retryable`` lets a runner flag infrastructure trouble."""

    type: str = Field(default="Error", max_length=500)
    message: str = Field(default="", max_length=100_000)
    traceback: str | None = Field(default=None, max_length=1_000_000)
    retryable: bool | None = None


class RolloutCreate(_Model):
    """What a caller gives to enqueue a rollout. A caller-chosen ``rollout_id`` makes
    enqueueing idempotent: enqueueing the same id twice returns the first rollout."""

    input: Any = None
    rollout_id: str | None = Field(default=None, min_length=1, max_length=200)
    mode: RolloutMode = RolloutMode.TRAIN
    resources_version: int | None = Field(default=None, ge=1)
    config: RolloutConfig = Field(default_factory=RolloutConfig)
    metadata: dict[str, Any] = Field(default_factory=dict)


class Rollout(_Model):
    """One task run by an agent: possibly several attempts, many spans, one outcome."""

    rollout_id: str
    input: Any = None
    mode: RolloutMode = RolloutMode.TRAIN
    status: RolloutStatus = RolloutStatus.QUEUING
    resources_version: int | None = None
    config: RolloutConfig = Field(default_factory=RolloutConfig)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)
    start_time: float | None = None
    end_time: float | None = None
    attempt_count: int = 0
    latest_attempt_id: str | None = None
    reward: float | None = None
    """Primary reward of the latest attempt, kept in step with its reward spans."""


class Attempt(_Model):
    """One try of a rollout by one worker."""

    attempt_id: str
    rollout_id: str
    sequence_id: int = Field(ge=1)
    worker_id: str | None = None
    status: AttemptStatus = AttemptStatus.PREPARING
    start_time: float = Field(default_factory=now)
    end_time: float | None = None
    last_heartbeat_time: float = Field(default_factory=now)
    resources_version: int | None = None
    error: ErrorInfo | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    reward: float | None = None


class Claim(_Model):
    """What a worker gets when it claims work: the rollout, its new attempt, and (over
    HTTP) a token scoped to this attempt for spans, rewards and model calls."""

    rollout: Rollout
    attempt: Attempt
    token: str | None = None


class ReportAndClaim(_Model):
    """The answer of ``Store.report_and_claim``: the reported attempt, as
    ``update_attempt`` returns it, and the worker's next claims, as ``claim_rollouts``
    returns them (empty when the queue is)."""

    attempt: Attempt
    claims: list[Claim] = Field(default_factory=list)


class SpanStatus(StrEnum):
    UNSET = "unset"
    OK = "ok"
    ERROR = "error"


class SpanEvent(_Model):
    name: str = Field(max_length=1000)
    timestamp: float
    attributes: dict[str, Any] = Field(default_factory=dict)


class Span(_Model):
    """An OpenTelemetry-shaped span, tied to a rollout attempt.

    ``sequence_id`` orders spans within an attempt; the store assigns it when it is not
    given. The identity of a span is ``(rollout_id, attempt_id, span_id)``: a span sent
    twice is stored once.
    """

    rollout_id: str = Field(min_length=1, max_length=200)
    attempt_id: str = Field(min_length=1, max_length=200)
    sequence_id: int | None = Field(default=None, ge=0)
    trace_id: str = Field(default_factory=lambda: uuid.uuid4().hex, min_length=1, max_length=64)
    span_id: str = Field(default_factory=lambda: uuid.uuid4().hex[:16], min_length=1, max_length=64)
    parent_id: str | None = Field(default=None, max_length=64)
    name: str = Field(min_length=1, max_length=1000)
    kind: str = "internal"
    status: SpanStatus = SpanStatus.UNSET
    status_message: str | None = None
    start_time: float = Field(default_factory=now)
    end_time: float | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    events: list[SpanEvent] = Field(default_factory=list)
    resource: dict[str, Any] = Field(default_factory=dict)


class LLM(_Model):
    """An OpenAI-compatible model endpoint the agent should call."""

    resource_type: Literal["llm"] = "llm"
    endpoint: str
    model: str
    api_key: str | None = None
    sampling_parameters: dict[str, Any] = Field(default_factory=dict)

    def get_base_url(self, *_ids: Any, **_named: Any) -> str:
        """The endpoint (Agent Lightning's ``ProxyLLM.get_base_url(rollout_id, attempt_id)``:
        a runner has already scoped a gateway LLM's endpoint to the attempt)."""
        return self.endpoint


class PromptTemplate(_Model):
    """A prompt with ``{placeholders}`` (``str.format`` syntax)."""

    resource_type: Literal["prompt_template"] = "prompt_template"
    template: str
    engine: Literal["f-string"] = "f-string"

    def format(self, **kwargs: Any) -> str:
        return self.template.format(**kwargs)


class JsonResource(_Model):
    """Anything else a rollout needs, as JSON."""

    resource_type: Literal["json"] = "json"
    value: Any = None


Resource = Annotated[LLM | PromptTemplate | JsonResource, Field(discriminator="resource_type")]


class Resources(_Model):
    """A versioned bundle of named resources. Versions start at 1 and only grow."""

    version: int = Field(ge=1)
    resources: dict[str, Resource]
    created_at: float = Field(default_factory=now)
    metadata: dict[str, Any] = Field(default_factory=dict)


class Worker(_Model):
    """A runner or controller known to the store."""

    worker_id: str
    status: WorkerStatus = WorkerStatus.IDLE
    created_at: float = Field(default_factory=now)
    last_heartbeat_time: float = Field(default_factory=now)
    current_rollout_id: str | None = None
    current_attempt_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class StoreStats(_Model):
    rollouts_by_status: dict[str, int]
    attempts_by_status: dict[str, int]
    queue_depth: int
    total_rollouts: int
    total_attempts: int
    total_spans: int
    total_workers: int
    latest_resources_version: int | None


T = TypeVar("T")


class Page(_Model, Generic[T]):
    """One page of a query: its ``items``, and ``next_cursor`` to pass back for the next
    page (``None``: there is none)."""

    items: list[T]
    next_cursor: str | None = None


MetricValue = float | int | None
"""One metric value: a finite number, or None for "no value" (NaN and inf become None)."""

_MAX_METRIC_KEYS = 1000
_MAX_METRIC_INT = 2**63 - 1


class MetricRecord(_Model):
    """The metrics a training run logged at one step (see ``docs/store.md``, "Training metrics").

    ``(run_id, step)`` is the identity: a second record for the same step is merged into
    the stored one (new keys added, same keys overwritten), so train and eval numbers of
    one step may arrive separately. Non-finite floats (NaN, ±inf) are stored as ``None``
    rather than rejected: a diverging loss is worth seeing as a gap, not a crashed run.
    Booleans become 0/1.
    """

    run_id: str = Field(min_length=1, max_length=200)
    step: int = Field(ge=0, le=_MAX_METRIC_INT)
    values: dict[str, MetricValue] = Field(default_factory=dict)
    timestamp: float = Field(default_factory=now, allow_inf_nan=False)

    @field_validator("values", mode="before")
    @classmethod
    def _clean_values(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw  # pydantic reports the type error
        if len(raw) > _MAX_METRIC_KEYS:
            raise ValueError(f"at most {_MAX_METRIC_KEYS} metrics per record, got {len(raw)}: log fewer keys")
        out: dict[Any, Any] = {}
        for key, value in raw.items():
            if not isinstance(key, str) or not 1 <= len(key) <= 200:
                raise ValueError(f"metric names must be strings of 1 to 200 characters, got {key!r}")
            out[key] = _metric_value(key, value)
        return out


def _metric_value(key: str, value: Any) -> Any:
    """Normalise one metric value; anything not a number is left for pydantic to reject."""
    if value is not None and not isinstance(value, (bool, int, float)):
        item = getattr(value, "item", None)  # third-party: numpy / torch scalars
        if callable(item):
            value = item()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int) and abs(value) > _MAX_METRIC_INT:
        raise ValueError(f"metric {key!r} = {value} does not fit in 64 bits: log it as a float")
    return value
