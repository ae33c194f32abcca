"""How an agent's exception becomes a failed attempt: its :class:`ErrorInfo`, and
whether the failure is worth another try.

The store retries a failed attempt only if the rollout's ``retry_on`` lists ``failed``
or the failure says it is retryable. A failure is retryable when the exception says so
(raise :class:`RetryableError`, or set a ``retryable`` attribute on your exception) or
when it is an infrastructure hiccup: a lost connection, a timeout, a rate limit or a
server error from the model API. Infrastructure failure is not the agent's fault, so it
is retried rather than trained on.
"""

from __future__ import annotations

import builtins
import traceback

from agentbolt.store.errors import StoreUnavailableError
from agentbolt.types import ErrorInfo

__all__ = ["RetryableError", "is_retryable", "error_info"]

_TRANSIENT_NAMES = frozenset(
    {
        # openai
        "APIConnectionError",
        "APITimeoutError",
        "RateLimitError",
        "InternalServerError",
        # httpx
        "TransportError",
    }
)
_TRANSIENT_MODULES = ("openai", "httpx")


class RetryableError(Exception):
    """Raise from an agent to fail this attempt and ask the store for another try
    (while the rollout has attempts left)."""

    retryable = True


def is_retryable(exc: BaseException) -> bool | None:
    """True for failures worth another try, False when the exception says no, None
    when nothing is known (the rollout's ``retry_on`` decides)."""
    flag = getattr(exc, "retryable", None)  # third-party: any exception may say if it is retryable
    if isinstance(flag, bool):
        return flag
    if isinstance(exc, (ConnectionError, TimeoutError, StoreUnavailableError)):
        return True
    for cls in type(exc).__mro__:
        if cls.__name__ in _TRANSIENT_NAMES and cls.__module__.startswith(_TRANSIENT_MODULES):
            return True
    return None


def error_info(exc: BaseException) -> ErrorInfo:
    """The record of ``exc`` kept on the failed attempt: type, message, traceback."""
    cls = type(exc)
    builtin = getattr(builtins, cls.__name__, None) is cls  # third-party: the builtins module, by the class's name
    name = cls.__qualname__ if builtin else f"{cls.__module__}.{cls.__qualname__}"
    return ErrorInfo(
        type=name[:500],
        message=str(exc)[:100_000],
        traceback="".join(traceback.format_exception(exc))[-1_000_000:],
        retryable=is_retryable(exc),
    )
