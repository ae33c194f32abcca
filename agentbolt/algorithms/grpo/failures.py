"""A failure reward for rollouts the agent program itself failed (off by default).

A rollout that failed is left out of training: that is right for infrastructure failures
(a timeout, a lost worker, an unreachable engine), which say nothing about the policy. But
an agent whose own code raised — often *because of* the policy's output (malformed tool
JSON, an answer the program cannot parse) — is then excluded rather than penalised, and
the policy never learns to avoid what crashed it (survivorship). With
``GRPOConfig.failure_reward`` set, such a rollout enters its group with that reward.

A failure counts as the program's (:func:`program_failure`) only when all hold:

* the rollout ended ``failed`` (not cancelled) and its latest attempt's status is
  ``failed`` — not ``timeout`` or ``unresponsive``;
* the attempt recorded an error that is not marked retryable (a runner marks
  infrastructure trouble retryable);
* the attempt made at least one successful model call that its samples can be built
  from (a rollout in which no call succeeded is an infrastructure failure).

Everything else stays out of training as before.
"""

from __future__ import annotations

from agentbolt.types import Attempt, AttemptStatus, Rollout, RolloutStatus

__all__ = ["program_failure"]


def program_failure(rollout: Rollout, attempt: Attempt | None) -> bool:
    """Whether ``rollout`` failed because its agent program raised (see the module doc;
    the successful-call condition is the caller's: it holds when samples can be built)."""
    return (
        rollout.status == RolloutStatus.FAILED
        and attempt is not None
        and attempt.status == AttemptStatus.FAILED
        and attempt.error is not None
        and attempt.error.retryable is not True
    )
