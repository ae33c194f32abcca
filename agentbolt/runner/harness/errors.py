"""How a harness run fails, and whether the store should try again.

Infrastructure trouble is retried, never scored: the program could not start
(:class:`HarnessStartError`), ran past its timeout (:class:`HarnessTimeoutError`), was
killed by a signal it did not send itself (:class:`HarnessKilledError`), or the evaluator
broke (:class:`EvaluatorError`). These carry ``retryable = True``, so the failed attempt is
requeued while the rollout has attempts left. A program none of whose model calls
succeeded at the gateway (:class:`GatewayRefusedError`) fails with the gateway's reason,
retried when some refusal was transient (429, 5xx), never scored.

A program that exits non-zero (or exits 0) without reporting any reward is the
program's own failure (:class:`ProgramFailedError`): its ``retryable`` is left unset, so
the rollout's ``RolloutConfig.retry_on`` decides (by default: not retried — list
``failed`` there to retry such programs). It is never trained on as a zero.
"""

from __future__ import annotations

__all__ = [
    "EvaluatorError",
    "GatewayRefusedError",
    "HarnessConfigError",
    "HarnessError",
    "HarnessKilledError",
    "HarnessStartError",
    "HarnessTimeoutError",
    "ProgramFailedError",
]


class HarnessError(Exception):
    """Base class of harness failures."""

    retryable: bool | None = None


class HarnessConfigError(HarnessError):
    """The harness cannot run here as configured (no server to reach, bad template...)."""

    retryable = False


class HarnessStartError(HarnessError):
    """The program (or the evaluator) could not be started."""

    retryable = True


class HarnessTimeoutError(HarnessError):
    """The program ran past the harness timeout; its process group was killed."""

    retryable = True


class HarnessKilledError(HarnessError):
    """A signal killed the program (e.g. the out-of-memory killer)."""

    retryable = True


class EvaluatorError(HarnessError):
    """The evaluator failed, timed out or printed no reward: not the agent's fault."""

    retryable = True


class ProgramFailedError(HarnessError):
    """The program ended without a reward (non-zero exit, or nothing reported)."""

    retryable = None


class GatewayRefusedError(HarnessError):
    """Every model call the program made failed at the gateway (a 4xx or 5xx on each): an
    infrastructure failure with the gateway's reason, whatever the evaluator would score.
    ``retryable`` when some of those failures were transient (429, 5xx)."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable
