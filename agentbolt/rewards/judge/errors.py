"""What can go wrong when a judge scores: each a typed error that says what to do.

A judge that fails never produces a reward: the rollouts it was asked about keep the
rewards they had, and GRPO leaves their group out of the step (see
:mod:`agentbolt.rewards.group`)."""

from __future__ import annotations

from agentbolt.rewards.judge.client import JudgeCall

__all__ = ["JudgeCallError", "JudgeError", "MalformedJudgeAnswerError"]


class JudgeError(Exception):
    """A judge could not score (its endpoint failed, or its answer was unusable).

    ``call`` is the judge call that failed, when one was made (it is recorded)."""

    call: JudgeCall | None = None


class JudgeCallError(JudgeError):
    """The judge's endpoint did not answer: unreachable, an HTTP error, a timeout.

    ``status_code`` is the HTTP status when there was one; ``retryable`` says whether
    asking again may help (429, 5xx, timeouts)."""

    def __init__(self, message: str, *, status_code: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retryable = retryable


class MalformedJudgeAnswerError(JudgeError):
    """The judge answered, but not in the shape asked for (no JSON, a missing or extra
    trajectory id, a score outside [0, 1], ...). ``answer`` is what it wrote."""

    def __init__(self, reason: str, answer: str) -> None:
        preview = answer if len(answer) <= 300 else answer[:300] + "…"
        super().__init__(
            f"the judge's answer is not usable: {reason}. It wrote: {preview!r}. A judge model too small to follow "
            "the output format gives this; use a stronger judge, or raise the judge's retries="
        )
        self.reason = reason
        self.answer = answer
