"""Delete old spans: the API behind ``agentbolt store prune-spans``.

Spans are most of a store's bytes (every model call's request and response), and after
training they are only needed for debugging; rollouts, attempts and rewards are small
and stay. :func:`prune_spans` deletes the spans of rollouts that finished before a cut
— never of unfinished ones (see :meth:`~agentbolt.store.base.Store.delete_spans`) — and,
on SQLite, can ``VACUUM`` the file to give the space back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from pydantic import BaseModel

from agentbolt.retention.errors import RetentionError
from agentbolt.retention.times import format_time
from agentbolt.store.base import Store
from agentbolt.store.capabilities import Vacuumable

__all__ = ["PruneResult", "prune_spans"]

log = logging.getLogger("agentbolt.retention")


class PruneResult(BaseModel):
    """What :func:`prune_spans` did (or, with ``dry_run``, would do)."""

    before: float | None
    before_iso: str | None
    deleted: int
    dry_run: bool
    vacuumed: bool


async def prune_spans(
    store: Store,
    *,
    older_than: float | None = None,
    before: float | None = None,
    rollout_ids: Sequence[str] | None = None,
    dry_run: bool = False,
    vacuum: bool = False,
) -> PruneResult:
    """Delete the spans of rollouts that finished more than ``older_than`` seconds ago,
    or before the epoch time ``before`` (give one), optionally only among ``rollout_ids``.

    ``vacuum`` then rewrites a SQLite file to shrink it (other backends: an error, asked
    before anything is deleted). Returns how many spans went.
    """
    if (older_than is None) == (before is None):
        raise RetentionError("give exactly one of older_than (seconds) and before (epoch seconds)")
    if older_than is not None:
        if older_than <= 0:
            raise RetentionError(f"older_than must be positive, got {older_than}")
        before = time.time() - older_than
    assert before is not None  # given, or computed from older_than
    vacuum_fn = store.vacuum if vacuum and isinstance(store, Vacuumable) else None
    if vacuum and vacuum_fn is None:
        raise RetentionError(
            f"vacuum applies to a SQLite store only, not {type(store).__name__}: drop --vacuum "
            "(PostgreSQL reclaims space with its own autovacuum; on a server, vacuum its store file while it is "
            "stopped)"
        )
    deleted = await store.delete_spans(before=before, rollout_ids=rollout_ids, dry_run=dry_run)
    if not dry_run:
        log.info("deleted %d spans of rollouts finished before %s", deleted, format_time(before))
    vacuumed = False
    if vacuum_fn is not None and not dry_run:
        await vacuum_fn()
        vacuumed = True
    return PruneResult(
        before=before,
        before_iso=None if before is None else format_time(before),
        deleted=deleted,
        dry_run=dry_run,
        vacuumed=vacuumed,
    )
