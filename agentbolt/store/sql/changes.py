"""The model-level steps of the SQL stores' write ops, shared by
:mod:`~agentbolt.store.sqlite.writes` and :mod:`~agentbolt.store.postgres.writes`.

Each backend loads (and, in PostgreSQL, locks) rows its own way and writes back what
changed its own way; in between, both apply the same edits to the loaded models through
:mod:`agentbolt.store.lifecycle`. Those edits live here so the two backends cannot drift.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, Protocol

import orjson

from agentbolt import semconv
from agentbolt.store import lifecycle
from agentbolt.store.errors import InvalidTransitionError, NotFoundError
from agentbolt.store.sql.rows import dumps
from agentbolt.types import (
    Attempt,
    AttemptStatus,
    ErrorInfo,
    Rollout,
    RolloutCreate,
    RolloutStatus,
    Span,
    Worker,
    now,
)

__all__ = [
    "LoadedModels",
    "RolloutTexts",
    "WriteNotes",
    "apply_attempt_update",
    "apply_new_spans",
    "apply_rollout_metadata",
    "is_cancel",
    "new_rollout",
    "note_finish",
    "worker_values",
]


class RolloutTexts(NamedTuple):
    """A new rollout's JSON columns."""

    input: str
    config: str
    metadata: str


class WriteNotes(Protocol):
    """What a write transaction remembers for after its commit."""

    finished_rollout: bool


class LoadedModels(Protocol):
    """A loaded rollout or attempt: the model it carries."""

    @property
    def model(self) -> Any: ...


def new_rollout(spec: RolloutCreate, rollout_id: str, t: float, latest_version: int) -> tuple[Rollout, RolloutTexts]:
    """The rollout ``spec`` enqueues, and its input, config and metadata as the JSON text
    to store. The model is read back from that text, so it is what a later read returns.
    A resources version above ``latest_version`` (none published: 0) is not found."""
    if spec.resources_version is not None and not 1 <= spec.resources_version <= latest_version:
        raise NotFoundError(f"resources version {spec.resources_version} not found")
    texts = RolloutTexts(dumps(spec.input), dumps(spec.config.__dict__), dumps(spec.metadata))
    rollout = Rollout.model_validate(
        {
            "rollout_id": rollout_id,
            "input": orjson.loads(texts.input),
            "mode": spec.mode,
            "resources_version": spec.resources_version,
            "config": orjson.loads(texts.config),  # its own copy, as stored (a deep copy costs 5x more)
            "metadata": orjson.loads(texts.metadata),
            "created_at": t,
            "updated_at": t,
        }
    )
    return rollout, texts


def note_finish(tx: WriteNotes, before: RolloutStatus, rollout: Rollout) -> None:
    """Mark ``tx`` when this op moved ``rollout`` into a terminal status (waiters wake)."""
    if rollout.status.is_terminal and not before.is_terminal:
        tx.finished_rollout = True


def is_cancel(rollout: Rollout, status: RolloutStatus | None) -> bool:
    """Whether ``update_rollout(status=...)`` asks to cancel; cancelling is the only status
    a client may set directly, anything else is an :class:`InvalidTransitionError`."""
    if status is None or status == rollout.status:
        return False
    if status != RolloutStatus.CANCELLED:
        raise InvalidTransitionError(
            f"a rollout's status can only be set to cancelled directly (asked {status.value}); "
            "other changes happen by reporting attempts"
        )
    return True


def apply_rollout_metadata(rollout: Rollout, metadata: dict[str, Any] | None) -> None:
    """Merge ``metadata`` into the rollout's (an update, so ``updated_at`` moves)."""
    if metadata:
        rollout.metadata.update(metadata)
        rollout.updated_at = now()


def apply_attempt_update(
    rollout: Rollout,
    attempt: Attempt,
    status: AttemptStatus | None,
    error: ErrorInfo | None,
    metadata: dict[str, Any] | None,
) -> None:
    """A client's report on an attempt: a final status (which may finish the rollout), an
    error, metadata to merge."""
    if status is not None:
        lifecycle.finish_attempt(rollout, attempt, status, now(), error)
    elif error is not None:
        attempt.error = error
    if metadata:
        attempt.metadata.update(metadata)


def apply_new_spans(new: Iterable[tuple[Any, Span]], targets: Mapping[Any, tuple[LoadedModels, LoadedModels]]) -> None:
    """Each newly stored span is a sign of life of its attempt; a reward span sets the reward.

    ``new`` pairs a target key with the span; ``targets`` maps the key to the loaded
    (rollout, attempt)."""
    t = now()
    touched: set[Any] = set()
    for key, s in new:
        lr, la = targets[key]
        if key not in touched:  # one sign of life per attempt: touching again at the same t changes nothing
            touched.add(key)
            lifecycle.touch_attempt(lr.model, la.model, t)
        reward = semconv.primary_reward(s.name, s.attributes)
        if reward is not None:
            lifecycle.record_reward(lr.model, la.model, reward, t)


def worker_values(w: Worker) -> tuple[Any, ...]:
    """The values of a worker row, in the order of ``sql_rows.WORKER_COLUMNS``."""
    return (
        w.worker_id,
        w.status.value,
        w.created_at,
        w.last_heartbeat_time,
        w.current_rollout_id,
        w.current_attempt_id,
        dumps(w.metadata),
    )
