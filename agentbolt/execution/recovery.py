"""Give back the attempts of a runner that died.

When a runner process crashes, its attempts would sit ``running`` until the store
notices the missing heartbeats (``unresponsive_seconds``, if the rollout has one at
all). The trainer saw the crash, so it says so right away: each active attempt of the
dead worker is marked ``unresponsive``, which requeues its rollout while it has tries
left (or fails it, per the rollout's retry rules).
"""

from __future__ import annotations

import logging

from agentbolt.store.base import Store
from agentbolt.store.errors import StoreError
from agentbolt.types import AttemptStatus, ErrorInfo, RolloutStatus

__all__ = ["release_attempts_of"]

log = logging.getLogger("agentbolt.trainer")

_LIVE = [RolloutStatus.PREPARING, RolloutStatus.RUNNING]


async def release_attempts_of(store: Store, worker_id: str, reason: str) -> int:
    """Mark every active attempt of ``worker_id`` unresponsive; returns how many."""
    released = 0
    cursor: str | None = None
    while True:
        page = await store.query_rollouts(status=_LIVE, limit=500, cursor=cursor)
        for rollout in page.items:
            if rollout.latest_attempt_id is None:
                continue
            try:
                attempt = await store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
                if attempt.worker_id != worker_id or not attempt.status.is_active:
                    continue
                await store.update_attempt(
                    rollout.rollout_id,
                    attempt.attempt_id,
                    status=AttemptStatus.UNRESPONSIVE,
                    error=ErrorInfo(type="RunnerCrashed", message=reason, retryable=True),
                )
                released += 1
            except StoreError as exc:  # it finished or moved on meanwhile
                log.debug("could not release rollout %s: %s", rollout.rollout_id, exc)
        if page.next_cursor is None:
            return released
        cursor = page.next_cursor
