"""Typed errors raised by every store backend.

Each error carries the HTTP status the server answers with, so the same exception is
raised again on the client side by :class:`~agentbolt.store.http.HttpStore`.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "ConflictError",
    "InvalidRequestError",
    "InvalidTransitionError",
    "NotFoundError",
    "PermissionDeniedError",
    "StoreError",
    "StoreUnavailableError",
    "error_from_status",
]


class StoreError(Exception):
    """Base class of store errors."""

    status_code: int = 500
    code: str = "store_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class NotFoundError(StoreError, KeyError):
    """An id (rollout, attempt, resources version, worker) that the store does not know."""

    status_code = 404
    code = "not_found"

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class InvalidTransitionError(StoreError):
    """A status change that the lifecycle does not allow (e.g. succeeded → running)."""

    status_code = 409
    code = "invalid_transition"


class ConflictError(StoreError):
    """The request contradicts what is stored (e.g. a reused id with other content)."""

    status_code = 409
    code = "conflict"


class InvalidRequestError(StoreError, ValueError):
    """Arguments that are well-typed but make no sense (bad cursor, bad sort key...)."""

    status_code = 400
    code = "invalid_request"


class StoreUnavailableError(StoreError):
    """The store could not be reached or gave up after retries."""

    status_code = 503
    code = "unavailable"


class AuthenticationError(StoreError):
    """No valid token was given (HTTP 401): pass the admin token or a scoped token."""

    status_code = 401
    code = "unauthorized"


class PermissionDeniedError(StoreError):
    """The token is valid but not allowed to do this (HTTP 403), e.g. a rollout-scoped
    token touching another rollout."""

    status_code = 403
    code = "forbidden"


_BY_CODE: dict[str, type[StoreError]] = {
    cls.code: cls
    for cls in (
        NotFoundError,
        InvalidTransitionError,
        ConflictError,
        InvalidRequestError,
        StoreUnavailableError,
        AuthenticationError,
        PermissionDeniedError,
    )
}


def error_from_status(status_code: int, code: str | None, message: str) -> StoreError:
    """Rebuild the typed error from an HTTP answer."""
    if code in _BY_CODE:
        return _BY_CODE[code](message)
    if status_code == 401:
        return AuthenticationError(message)
    if status_code == 403:
        return PermissionDeniedError(message)
    if status_code == 404:
        return NotFoundError(message)
    if status_code == 409:
        return ConflictError(message)
    if 400 <= status_code < 500:
        return InvalidRequestError(message)
    err = StoreError(message)
    err.status_code = status_code
    return err
