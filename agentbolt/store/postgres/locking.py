"""Loading rows for a PostgreSQL write, and writing them back.

Every row that a write changes is read ``FOR UPDATE``, rollout before attempt (and several
rollouts in ``seq`` order), so two servers never apply a transition to the same stale row
and never wait on each other in a cycle. Changed rows go back in one statement
(:func:`~agentbolt.store.postgres.row_changes.run_all`).
"""

from __future__ import annotations

from typing import Any

from agentbolt.store.errors import NotFoundError
from agentbolt.store.postgres.row_changes import Change, run_all, shape
from agentbolt.store.postgres.rows import (
    ROLLOUT_WIDTH,
    PgAttempt,
    PgRollout,
    attempt_columns,
    fetchone,
    rollout_columns,
)
from agentbolt.types import Attempt

__all__ = [
    "PAIR",
    "latest_version",
    "lock_attempt",
    "lock_pair",
    "lock_rollout",
    "release_worker",
    "run_all",
]

Conn = Any  # psycopg.AsyncConnection

# FOR UPDATE on this join locks the rollout row before the attempt row (the order of the
# FROM list), like every other write: two writers never wait on each other in a cycle
PAIR = (
    f"SELECT {rollout_columns('r.', light=True)}, {attempt_columns('a.')} "
    "FROM rollouts r JOIN attempts a ON r.seq = a.rollout_seq"
)


async def lock_rollout(conn: Conn, rollout_id: str, *, light: bool = False) -> PgRollout:
    row = await fetchone(
        conn, f"SELECT {rollout_columns(light=light)} FROM rollouts WHERE rollout_id = %s FOR UPDATE", (rollout_id,)
    )
    if row is None:
        raise NotFoundError(f"rollout {rollout_id!r} not found")
    return PgRollout.from_row(row, light=light)


async def lock_attempt(conn: Conn, rollout: PgRollout, attempt_id: str) -> PgAttempt:
    row = await fetchone(
        conn, f"SELECT {attempt_columns()} FROM attempts WHERE attempt_id = %s FOR UPDATE", (attempt_id,)
    )
    if row is None or row[2] != rollout.model.rollout_id:
        raise NotFoundError(f"attempt {attempt_id!r} of rollout {rollout.model.rollout_id!r} not found")
    return PgAttempt.from_row(row, rollout.model)


async def lock_pair(conn: Conn, rollout_id: str, attempt_id: str) -> tuple[PgRollout, PgAttempt]:
    """The rollout (without input/metadata) and the attempt, both locked, in one query."""
    row = await fetchone(
        conn, f"{PAIR} WHERE a.attempt_id = %s AND a.rollout_id = %s FOR UPDATE", (attempt_id, rollout_id)
    )
    if row is None:
        if await fetchone(conn, "SELECT 1 FROM rollouts WHERE rollout_id = %s", (rollout_id,)) is None:
            raise NotFoundError(f"rollout {rollout_id!r} not found")
        raise NotFoundError(f"attempt {attempt_id!r} of rollout {rollout_id!r} not found")
    lr = PgRollout.from_row(row[:ROLLOUT_WIDTH], light=True)
    return lr, PgAttempt.from_row(row[ROLLOUT_WIDTH:], lr.model)


async def latest_version(conn: Conn) -> int | None:
    row = await fetchone(conn, "SELECT max(version) FROM resources")
    return None if row is None else row[0]


_RELEASE = shape(
    "workers",
    (),
    ("worker_id", "current_attempt_id"),
    "status = 'idle', current_rollout_id = NULL, current_attempt_id = NULL",
)


def release_worker(attempt: Attempt) -> list[Change]:
    """The change that makes a worker idle again once its current attempt finished
    (none while the attempt is active)."""
    if attempt.worker_id is not None and not attempt.status.is_active:
        return [Change(_RELEASE, (attempt.worker_id, attempt.attempt_id))]
    return []
