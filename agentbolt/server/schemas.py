"""Request and response bodies of the HTTP API that are not store types themselves.

Store types (``Rollout``, ``Span``...) travel as they are; these models only wrap them
(``{"rollouts": [...]}``) or carry the arguments of one store method. Every model
forbids unknown fields, so a typo in a client is a 422, not a silently ignored field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, model_validator

from agentbolt.types import (
    AttemptStatus,
    ErrorInfo,
    Resource,
    RolloutCreate,
    RolloutMode,
    RolloutStatus,
    Span,
    WorkerStatus,
)

__all__ = [
    "MAX_BATCH_OPS",
    "MAX_WAIT_SECONDS",
    "BatchOpName",
    "ErrorDetail",
    "ErrorResponse",
    "Health",
    "EnqueueRequest",
    "RolloutQuery",
    "RolloutCountQuery",
    "RolloutCount",
    "RolloutPatch",
    "WaitRequest",
    "ClaimRequest",
    "AttemptPatch",
    "AttemptRef",
    "AttemptUpdate",
    "ReportAndClaimRequest",
    "ReportAndClaimUpdate",
    "RewardRequest",
    "SpansRequest",
    "ResourcesRequest",
    "WorkerPatch",
    "WorkerUpdate",
    "DeadlineCheck",
    "BatchOp",
    "BatchRequest",
    "TypedBatchRequest",
    "BatchResult",
    "BatchResponse",
]

MAX_BATCH_OPS = 10_000
"""Most operations one ``POST /v1/batch`` may carry."""
MAX_WAIT_SECONDS = 30.0
"""Longest a single ``POST /v1/rollouts/wait`` long-poll holds the connection."""

_Id = Field(min_length=1, max_length=200)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(_Body):
    code: str = Field(description="Stable machine-readable error code, e.g. `not_found`.")
    message: str = Field(description="What went wrong and what to do about it.")
    details: list[dict[str, Any]] | None = Field(
        default=None, description="Per-field problems of a request that failed validation."
    )


class ErrorResponse(_Body):
    """The body of every 4xx/5xx answer."""

    error: ErrorDetail


class Health(_Body):
    status: Literal["ok"] = "ok"
    store: str = Field(description="Class name of the store backend behind this server.")
    version: str


class EnqueueRequest(_Body):
    rollouts: list[RolloutCreate] = Field(max_length=100_000)


class RolloutQuery(_Body):
    """Filters of ``query_rollouts`` sent as a body, so any number of ids fits."""

    status: list[RolloutStatus] | None = None
    mode: RolloutMode | None = None
    rollout_ids: list[str] | None = Field(default=None, max_length=100_000)
    search: str | None = Field(
        default=None, max_length=200, description="Substring of the id or the input's JSON (ASCII case ignored)."
    )
    sort_by: str = "created_at"
    descending: bool = False
    limit: int = Field(default=100, ge=1, le=10_000)
    cursor: str | None = Field(default=None, max_length=10_000)


class RolloutCountQuery(_Body):
    """Filters of ``count_rollouts``."""

    status: list[RolloutStatus] | None = None
    mode: RolloutMode | None = None
    search: str | None = Field(default=None, max_length=200)
    cap: int | None = Field(default=None, ge=1, le=2**62, description="Stop counting here: the answer is min(count, "
                                                                      "cap).")


class RolloutCount(_Body):
    count: int


class RolloutPatch(_Body):
    status: RolloutStatus | None = Field(default=None, description="Only `cancelled` may be set directly.")
    metadata: dict[str, Any] | None = Field(default=None, description="Merged into the stored metadata.")


class WaitRequest(_Body):
    rollout_ids: list[str] = Field(max_length=100_000)
    timeout: float = Field(
        default=10.0,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="Seconds to hold the request open; call again to wait longer.",
    )


class ClaimRequest(_Body):
    worker_id: str | None = Field(default=None, min_length=1, max_length=200)
    limit: int = Field(default=1, ge=1, le=1000)
    request_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Client-chosen id: sending the same request again returns the same claims.",
    )


class AttemptPatch(_Body):
    status: AttemptStatus | None = None
    error: ErrorInfo | None = None
    metadata: dict[str, Any] | None = None


class AttemptRef(_Body):
    rollout_id: str = _Id
    attempt_id: str = _Id


class AttemptUpdate(AttemptPatch):
    """``update_attempt`` arguments in a batch."""

    rollout_id: str = _Id
    attempt_id: str = _Id


class ReportAndClaimRequest(AttemptPatch, ClaimRequest):
    """An attempt's report (as ``PATCH .../attempts/{attempt_id}``) and the worker's next
    claim (as ``POST /v1/claims``) in one body."""


class ReportAndClaimUpdate(ReportAndClaimRequest):
    """``report_and_claim`` arguments in a batch."""

    rollout_id: str = _Id
    attempt_id: str = _Id


class RewardRequest(_Body):
    """Either ``{"value": 0.7}`` or ``{"rewards": {"accuracy": 1.0, "cost": -0.2}, "primary": "accuracy"}``."""

    value: FiniteFloat | None = None
    rewards: dict[str, FiniteFloat] | None = Field(default=None, max_length=1000)
    primary: str | None = Field(default=None, min_length=1, max_length=200)
    span_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="Makes the report idempotent: the same span id is stored once.",
    )

    @model_validator(mode="after")
    def _one_form(self) -> RewardRequest:
        if (self.value is None) == (self.rewards is None):
            raise ValueError('send either "value" or "rewards" (with "primary"), not both and not neither')
        if self.rewards is not None:
            if not self.rewards:
                raise ValueError('"rewards" must name at least one reward')
            if self.primary is None:
                if len(self.rewards) != 1:
                    raise ValueError('several rewards given: say which one counts with "primary"')
            elif self.primary not in self.rewards:
                raise ValueError(
                    f"primary reward {self.primary!r} is not among the rewards {sorted(self.rewards)[:10]}"
                )
        elif self.primary is not None:
            raise ValueError('"primary" only goes with "rewards"')
        return self

    def named(self) -> tuple[dict[str, float], str]:
        """The rewards by name and the primary one's name."""
        if self.rewards is None:
            assert self.value is not None  # _one_form: a value when there are no rewards
            return {"reward": float(self.value)}, "reward"
        primary = self.primary or next(iter(self.rewards))
        return dict(self.rewards), primary


class SpansRequest(_Body):
    spans: list[Span] = Field(max_length=100_000)


class ResourcesRequest(_Body):
    resources: dict[str, Resource]
    metadata: dict[str, Any] | None = None


class WorkerPatch(_Body):
    status: WorkerStatus | None = None
    metadata: dict[str, Any] | None = None


class WorkerUpdate(WorkerPatch):
    """``update_worker`` arguments in a batch."""

    worker_id: str = _Id


class DeadlineCheck(_Body):
    expired: int = Field(description="How many attempts this check expired.")


BatchOpName = Literal[
    "claim_rollouts", "enqueue_rollouts", "add_spans", "update_attempt", "report_and_claim", "heartbeat",
    "update_worker",
]


class BatchOp(_Body):
    op: BatchOpName
    args: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Arguments of the store method: claim_rollouts → ClaimRequest, enqueue_rollouts → "
            "EnqueueRequest, add_spans → SpansRequest, update_attempt → AttemptUpdate, "
            "report_and_claim → ReportAndClaimUpdate, heartbeat → AttemptRef, update_worker → WorkerUpdate."
        ),
    )


class BatchRequest(_Body):
    """A batch with each op's ``args`` still unchecked (checked op by op)."""

    ops: list[BatchOp] = Field(max_length=MAX_BATCH_OPS)


class ClaimRolloutsOp(_Body):
    op: Literal["claim_rollouts"]
    args: ClaimRequest = Field(default_factory=ClaimRequest)


class EnqueueRolloutsOp(_Body):
    op: Literal["enqueue_rollouts"]
    args: EnqueueRequest


class AddSpansOp(_Body):
    op: Literal["add_spans"]
    args: SpansRequest


class UpdateAttemptOp(_Body):
    op: Literal["update_attempt"]
    args: AttemptUpdate


class ReportAndClaimOp(_Body):
    op: Literal["report_and_claim"]
    args: ReportAndClaimUpdate


class HeartbeatOp(_Body):
    op: Literal["heartbeat"]
    args: AttemptRef


class UpdateWorkerOp(_Body):
    op: Literal["update_worker"]
    args: WorkerUpdate


TypedBatchOp = Annotated[
    ClaimRolloutsOp | EnqueueRolloutsOp | AddSpansOp | UpdateAttemptOp | ReportAndClaimOp | HeartbeatOp
    | UpdateWorkerOp,
    Field(discriminator="op"),
]


class TypedBatchRequest(_Body):
    """A batch with every op's arguments typed: the documented body of ``POST /v1/batch``
    (and the server's fast path: one validation of the whole body)."""

    ops: list[TypedBatchOp] = Field(max_length=MAX_BATCH_OPS)


class BatchResult(_Body):
    ok: bool
    result: Any = Field(default=None, description="The method's result when ok.")
    status: int | None = Field(default=None, description="HTTP status the op would have had on its own, when not ok.")
    error: ErrorDetail | None = None


class BatchResponse(_Body):
    results: list[BatchResult] = Field(description="One result per op, in order.")
