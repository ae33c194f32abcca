"""Stop a run that cannot learn: every rollout failed.

A broken agent (a missing package, a wrong endpoint, a bug) fails every rollout the same
way. Without a check, GRPO would log "no group carried signal" step after step and an
evaluation would print "success n/a", and the run would train nothing for half an hour.
So an evaluation in which no rollout succeeded, or ``max_failed_steps`` training steps
in a row without one, stop the run with :class:`NoSuccessfulRolloutsError`, whose
message names the most common failure (type, message, how many of how many), one
rollout that shows it and the command that prints it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentbolt.runner.error_log import error_key
from agentbolt.store.base import Store
from agentbolt.store.capabilities import UrlBacked
from agentbolt.types import Rollout, RolloutStatus

__all__ = [
    "FailedStepsWatch",
    "FailureReport",
    "NoSuccessfulRolloutsError",
    "check_evaluation",
    "failure_report",
    "store_url",
]


@dataclass(frozen=True)
class FailureReport:
    """What went wrong in a batch of rollouts."""

    total: int
    succeeded: int
    error_type: str | None = None
    error_message: str | None = None
    error_count: int = 0
    """Rollouts that failed with the most common error."""
    example_rollout_id: str | None = None
    store: str | None = None
    """The store's URL for ``agentbolt store rollout --store`` (None: an in-memory store)."""

    def describe(self, where: str) -> str:
        if self.total == 0:
            return f"{where}: no rollout finished"
        lines = [f"{where}: none of {self.total} rollouts succeeded."]
        if self.error_type is not None:
            lines.append(
                f"Most common failure ({self.error_count} of {self.total}): {self.error_type}: {self.error_message}"
            )
        else:
            lines.append("They were stopped (timed out, cancelled) without an error from the agent.")
        if self.example_rollout_id is not None:
            where_flag = f" --store {self.store}" if self.store else ""
            lines.append(f"See one: agentbolt store rollout {self.example_rollout_id}{where_flag}")
            if not self.store:
                lines.append("(the store is in memory: read its spans with store.get_spans(rollout_id))")
        lines.append("Fix the agent (run it once by hand, or with Trainer.dev) and start again.")
        return "\n".join(lines)


class NoSuccessfulRolloutsError(RuntimeError):
    """An evaluation or training steps in which no rollout succeeded: the agent is broken."""

    def __init__(self, where: str, report: FailureReport) -> None:
        super().__init__(report.describe(where))
        self.where = where
        self.report = report


def store_url(store: Store) -> str | None:
    """The URL ``agentbolt store ... --store`` takes for this store (None when in memory)."""
    from agentbolt.store.http import HttpStore
    from agentbolt.store.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        return f"sqlite:///{store.path}"
    if isinstance(store, HttpStore):
        return store.base_url
    if isinstance(store, UrlBacked) and store.url.startswith(("postgresql://", "postgres://")):  # PostgresStore
        return _without_password(store.url)
    return None


def _without_password(url: str) -> str:
    scheme, _, rest = url.partition("://")
    auth, at, host = rest.rpartition("@")
    if not at or ":" not in auth:
        return url
    return f"{scheme}://{auth.split(':', 1)[0]}:***@{host}"


async def failure_report(store: Store, rollouts: Sequence[Rollout]) -> FailureReport:
    """Count the rollouts that succeeded and find the most common error of the others
    (read from each failed rollout's latest attempt)."""
    succeeded = sum(r.status == RolloutStatus.SUCCEEDED for r in rollouts)
    errors: Counter[tuple[str, str]] = Counter()
    shown: dict[tuple[str, str], tuple[str, str]] = {}
    example: dict[tuple[str, str], str] = {}
    first_other: str | None = None
    for r in rollouts:
        if r.status == RolloutStatus.SUCCEEDED:
            continue
        first_other = first_other or r.rollout_id
        if r.latest_attempt_id is None:
            continue
        attempt = await store.get_attempt(r.rollout_id, r.latest_attempt_id)
        if attempt.error is None:
            continue
        key = error_key(attempt.error.type, attempt.error.message)
        errors[key] += 1
        shown.setdefault(key, (attempt.error.type, _first_line(attempt.error.message)))
        example.setdefault(key, r.rollout_id)
    location = store_url(store)
    if not errors:
        return FailureReport(len(rollouts), succeeded, example_rollout_id=first_other, store=location)
    key, count = errors.most_common(1)[0]
    error_type, message = shown[key]
    return FailureReport(len(rollouts), succeeded, error_type, message, count, example[key], location)


def _first_line(message: str, limit: int = 300) -> str:
    line = message.strip().splitlines()[0] if message.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


class FailedStepsWatch:
    """Counts training steps in a row in which no rollout succeeded; past the limit,
    raises :class:`NoSuccessfulRolloutsError`. ``limit`` 0 switches the check off."""

    def __init__(self, limit: int, algorithm: str) -> None:
        if limit < 0:
            raise ValueError(f"max_failed_steps must be >= 0 (0 = never stop), got {limit}")
        self.limit = limit
        self.algorithm = algorithm
        self.in_a_row = 0

    async def check(self, store: Store, rollouts: Sequence[Rollout], step: Any) -> None:
        if not rollouts or any(r.status == RolloutStatus.SUCCEEDED for r in rollouts):
            self.in_a_row = 0
            return
        self.in_a_row += 1
        if self.limit and self.in_a_row >= self.limit:
            report = await failure_report(store, rollouts)
            steps = "step" if self.in_a_row == 1 else f"{self.in_a_row} steps in a row"
            raise NoSuccessfulRolloutsError(f"{self.algorithm} stopped after {steps} (step {step})", report)


async def check_evaluation(store: Store, rollouts: Sequence[Rollout], where: str) -> None:
    """Raise :class:`NoSuccessfulRolloutsError` when an evaluation had rollouts and none
    of them succeeded (nothing was scored: the agent is broken, not bad)."""
    if rollouts and not any(r.status == RolloutStatus.SUCCEEDED for r in rollouts):
        raise NoSuccessfulRolloutsError(where, await failure_report(store, rollouts))
