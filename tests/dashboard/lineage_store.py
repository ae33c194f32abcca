"""Store content for the lineage and row-accounting pages: a rollout whose calls a real
harness would make — a main agent, a sub-agent (the "explorer", Task-tool style) running
its own conversation in between, and a context compaction that rewrites the main agent's
history (hand-built gateway spans with token ids) — and the metric records of a GRPO run
whose second step trained nothing (every group had zero reward variance)."""

from __future__ import annotations

from typing import Any

from adapters.test_lineage import MAIN_SYSTEM, SUB_SYSTEM, chat
from adapters.test_samples import reward

from agentbolt.metrics.rows import DROP_REASONS
from agentbolt.types import AttemptStatus, MetricRecord, RolloutConfig

ROWS_RUN = "rows-fixture"
TASK = [*MAIN_SYSTEM, 10, 11]
COMPACTED = [*MAIN_SYSTEM, 90, 91, 92]  # the system prompt stays, the history becomes a summary
SUB = [*SUB_SYSTEM, 12]


def lineage_spans(rollout_id: str, attempt_id: str) -> list[Any]:
    """main m1 → explorer s1 → main m2 → explorer s2 → (compaction) main m3 → m4, then the reward."""
    spans = [
        chat("m1", TASK, [20, 21], t=0, system="You are the main agent.", agent="main"),
        chat("s1", SUB, [40], t=1, system="You search the code.", agent="explorer"),
        chat("m2", [*TASK, 20, 21, 30], [22], t=2, system="You are the main agent.", agent="main"),
        chat("s2", [*SUB, 40, 41], [42], t=3, system="You search the code.", agent="explorer"),
        chat("m3", COMPACTED, [50], t=4, system="You are the main agent.", agent="main"),
        chat("m4", [*COMPACTED, 50, 51], [52], t=5, system="You are the main agent.", agent="main"),
        reward(1.0, t=6),
    ]
    return [s.model_copy(update={"rollout_id": rollout_id, "attempt_id": attempt_id}) for s in spans]


async def add_lineage_rollout(store: Any) -> str:
    """A succeeded rollout with the spans of :func:`lineage_spans`; returns its id."""
    rollout = await store.enqueue_rollout({"task": "fix the bug"}, config=RolloutConfig(max_attempts=1))
    claim = await store.claim_rollout("runner-lineage")
    assert claim is not None and claim.rollout.rollout_id == rollout.rollout_id
    await store.add_spans(lineage_spans(rollout.rollout_id, claim.attempt.attempt_id))
    await store.update_attempt(rollout.rollout_id, claim.attempt.attempt_id, status=AttemptStatus.SUCCEEDED)
    return str(rollout.rollout_id)


def row_records() -> list[MetricRecord]:
    """Step 1 trained 6 of 8 rollouts (2 failed); step 2 trained none: both groups had equal rewards."""
    zero = {f"rows/dropped/{r}": 0 for r in DROP_REASONS}
    return [
        MetricRecord(run_id=ROWS_RUN, step=1, values={**zero, "rows/in": 8, "rows/trained": 6, "rows/dropped/failed": 2,
                                                      "reward/mean": 0.5, "groups/dropped_equal": 0}),
        MetricRecord(run_id=ROWS_RUN, step=2, values={**zero, "rows/in": 8, "rows/trained": 0,
                                                      "rows/dropped/zero_variance": 8, "reward/mean": 1.0,
                                                      "groups/dropped_equal": 2}),
    ]
