"""Every failure becomes one JSON shape: ``{"error": {"code": ..., "message": ...}}``.

* :class:`~agentbolt.store.errors.StoreError` → its own status and code (404, 409, 400...),
  which :class:`~agentbolt.store.http.HttpStore` turns back into the same exception.
* request validation → 422 with pydantic's messages; malformed JSON → 400.
* Starlette's HTTP errors (unknown route, wrong method, body too large) → their status.
* anything else → 500 with a generic message; the traceback goes to the server log.
  A 500 is always a bug.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import orjson
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentbolt.store.errors import StoreError

__all__ = [
    "error_body",
    "error_response",
    "validation_message",
    "validation_details",
    "install_exception_handlers",
    "ErrorGuardMiddleware",
    "INTERNAL_ERROR_MESSAGE",
]

logger = logging.getLogger("agentbolt.server")

INTERNAL_ERROR_MESSAGE = "internal server error: this is a bug in agentbolt; the traceback is in the server log"

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    411: "length_required",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "too_many_requests",
}


def error_body(code: str, message: str, details: list[dict[str, Any]] | None = None) -> bytes:
    err: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        err["details"] = details
    return orjson.dumps({"error": err})


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    return Response(
        error_body(code, message, details), status_code=status, media_type="application/json", headers=headers
    )


def _loc(loc: Sequence[Any]) -> str:
    return ".".join(str(part) for part in loc) or "body"


def validation_details(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """pydantic errors reduced to what is safe and useful to send back."""
    return [
        {
            "loc": [p if isinstance(p, (int, str)) else str(p) for p in e.get("loc", ())],
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in errors
    ]


def validation_message(errors: Sequence[Any], limit: int = 5) -> str:
    """One line per problem: ``body.rollouts.0.mode: Input should be 'train', 'val' or 'test'``."""
    lines = [f"{_loc(e.get('loc', ()))}: {e.get('msg', '')}" for e in errors[:limit]]
    more = len(errors) - limit
    if more > 0:
        lines.append(f"... and {more} more")
    return "invalid request: " + "; ".join(lines)


async def _store_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StoreError)
    return error_response(exc.status_code, exc.code, exc.message)


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    for e in errors:
        if e.get("type") == "json_invalid":
            where = e.get("loc", ())
            pos = f" at character {where[1]}" if len(where) > 1 else ""
            reason = (e.get("ctx") or {}).get("error", "JSON decode error")
            return error_response(400, "invalid_json", f"malformed JSON body{pos}: {reason}")
    return error_response(422, "validation_error", validation_message(errors), details=validation_details(errors))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    code = _HTTP_CODES.get(status, "http_error")
    message = str(exc.detail)
    if status == 404 and exc.detail == "Not Found":
        message = f"no route {request.method} {request.url.path}: the API is listed at /docs and /openapi.json"
    elif status == 405:
        allowed = (exc.headers or {}).get("Allow") or (exc.headers or {}).get("allow")
        message = f"{request.method} is not allowed on {request.url.path}" + (f"; use {allowed}" if allowed else "")
    return error_response(status, code, message, headers=dict(exc.headers) if exc.headers else None)


def install_exception_handlers(app: FastAPI) -> None:
    app.add_exception_handler(StoreError, _store_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)


class ErrorGuardMiddleware:
    """Last line: an unexpected exception becomes a logged 500 JSON answer.

    (Starlette's own error middleware would re-raise it after answering; this one logs it
    once, with the request line, and keeps the server quiet otherwise.)
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, send_tracking)
        except Exception:
            logger.exception("unhandled error in %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise  # the answer is half sent: let the server drop the connection
            response = error_response(500, "internal_error", INTERNAL_ERROR_MESSAGE)
            await response(scope, receive, send)
