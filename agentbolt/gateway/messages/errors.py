"""Errors in the Anthropic Messages API's shape: ``{"type": "error", "error": {"type", "message"}}``.

The gateway's own errors carry OpenAI-shaped bodies (:class:`~agentbolt.engines.engine.EngineError`);
on the Messages routes they are re-shaped with the error type Anthropic uses for the
status, so Anthropic clients raise their usual exceptions (and retry 429 / 5xx).
"""

from __future__ import annotations

from typing import Any

from agentbolt.engines.engine import EngineError

__all__ = ["anthropic_error", "as_anthropic", "bad_request", "error_body", "error_type"]

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    """Anthropic's error ``type`` for an HTTP status (``api_error`` for other 5xx)."""
    if status in _TYPES:
        return _TYPES[status]
    return "invalid_request_error" if 400 <= status < 500 else "api_error"


def error_body(status: int, message: str) -> dict[str, Any]:
    """The JSON body of an error answer (also the ``data`` of a stream's ``error`` event)."""
    return {"type": "error", "error": {"type": error_type(status), "message": message}}


def anthropic_error(status: int, message: str) -> EngineError:
    """An :class:`EngineError` whose body is in Anthropic's shape."""
    return EngineError(status, message, error_body(status, message))


def bad_request(message: str) -> EngineError:
    """A 400 ``invalid_request_error`` (what Anthropic answers a request it cannot serve)."""
    return anthropic_error(400, message)


def as_anthropic(exc: EngineError) -> EngineError:
    """``exc`` with its body re-shaped (the status and message kept)."""
    if exc.body.get("type") == "error":
        return exc
    return anthropic_error(exc.status_code, exc.message)
