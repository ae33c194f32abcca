"""Who may call the API, and what a rollout-scoped token may do.

The token comes as ``Authorization: Bearer <token>`` or, as Anthropic clients send
their key, ``x-api-key: <token>`` (``Authorization`` wins when both are sent).

Two kinds of caller:

* **admin** — holds the server's admin token (or anyone, when the server has none and
  therefore only listens on loopback). Drives the whole store.
* **scoped** — holds a token minted when a rollout was claimed. It names one rollout and
  one attempt and may only read that rollout and report that attempt's spans, reward
  and heartbeat: what an agent process needs, nothing more.

The token itself (its format, minting and checking) is in :mod:`agentbolt.scoped`, the
low-level module that every part handing an agent its gateway URL and token shares.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from agentbolt.scoped import TOKEN_PREFIX, TokenScope, mint_scoped_token, verify_token
from agentbolt.store.errors import (
    AuthenticationError,
    PermissionDeniedError,
    StoreError,
)

__all__ = [
    "TOKEN_PREFIX",
    "TokenScope",
    "Principal",
    "ADMIN",
    "mint_scoped_token",
    "verify_token",
    "authenticate",
    "AuthMiddleware",
    "PUBLIC_PATHS",
    "principal_of",
]

PUBLIC_PATHS = frozenset({"/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
"""Paths served without any token."""

PRINCIPAL_KEY = "agentbolt.principal"
"""Where the authenticated caller is kept in the ASGI scope."""

VERIFIED_TOKENS = 4096
"""How many verified scoped tokens :class:`AuthMiddleware` remembers (one per attempt calling)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated caller of one request."""

    kind: Literal["admin", "scoped"]
    scope: TokenScope | None = None

    @property
    def is_admin(self) -> bool:
        return self.kind == "admin"

    def _deny(self, action: str) -> PermissionDeniedError:
        assert self.scope is not None
        return PermissionDeniedError(
            f"this token is scoped to rollout {self.scope.rollout_id!r} attempt {self.scope.attempt_id!r}: "
            f"it may read that rollout and post that attempt's spans, reward and heartbeat; "
            f"{action} needs the admin token"
        )

    def require_admin(self, action: str) -> None:
        """Refuse unless this caller drives the whole store."""
        if not self.is_admin:
            raise self._deny(action)

    def require_rollout(self, rollout_id: str, action: str) -> None:
        """Refuse unless the caller is admin or scoped to ``rollout_id`` (reads)."""
        if not self.is_admin and self.scope is not None and self.scope.rollout_id != rollout_id:
            raise self._deny(action)

    def require_attempt(self, rollout_id: str, attempt_id: str, action: str) -> None:
        """Refuse unless the caller is admin or scoped to exactly this attempt (writes)."""
        if self.is_admin:
            return
        assert self.scope is not None
        if self.scope.rollout_id != rollout_id or self.scope.attempt_id != attempt_id:
            raise self._deny(action)


ADMIN = Principal("admin")


def authenticate(authorization: str | None, admin_token: str | None, secret: bytes) -> Principal:
    """Turn an ``Authorization`` header into a :class:`Principal`, or raise 401/403.

    Without an admin token configured the API is open: no header means admin. A token
    that is sent is always checked, so a stale or forged one fails loudly either way.
    """
    if not authorization:
        if admin_token is None:
            return ADMIN
        raise AuthenticationError(
            "this server needs a token: send 'Authorization: Bearer <token>' with the admin token "
            "(or with the rollout-scoped token a claim returned)"
        )
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise AuthenticationError("malformed Authorization header: use 'Authorization: Bearer <token>'")
    if admin_token is not None and hmac.compare_digest(token.encode(), admin_token.encode()):
        return ADMIN
    scope = verify_token(secret, token)
    if scope is not None:
        return Principal("scoped", scope)
    if admin_token is None:
        raise PermissionDeniedError(
            "invalid token: it is not a rollout-scoped token of this store, and this server has no "
            "admin token (send no Authorization header for full access)"
        )
    raise PermissionDeniedError(
        "invalid token: it is neither this server's admin token nor a rollout-scoped token it issued"
    )


class AuthMiddleware:
    """Authenticates every request except :data:`PUBLIC_PATHS` before any body is read.

    Only *who* is calling is decided here; *what* they may do is checked by each route
    with the :class:`Principal` left in the scope.
    """

    def __init__(self, app: ASGIApp, *, admin_token: str | None, secret: Callable[[], Awaitable[bytes]]) -> None:
        self.app = app
        self.admin_token = admin_token
        self._secret = secret
        #: scoped tokens already verified, by ``Authorization`` value: an agent sends the same
        #: token with each of its calls, and its HMAC need not be checked again (the secret
        #: never changes while the app runs); bounded, the oldest forgotten first
        self._verified: dict[str, Principal] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        authorization = api_key = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"x-api-key":  # how Anthropic clients send their key (ANTHROPIC_API_KEY)
                api_key = value.decode("latin-1").strip()
        if authorization is None and api_key:
            authorization = f"Bearer {api_key}"
        if authorization is None and self.admin_token is None:
            scope[PRINCIPAL_KEY] = ADMIN
            await self.app(scope, receive, send)
            return
        principal = self._verified.get(authorization) if authorization is not None else None
        if principal is not None:
            scope[PRINCIPAL_KEY] = principal
            await self.app(scope, receive, send)
            return
        try:
            secret = await self._secret()
            scope[PRINCIPAL_KEY] = principal = authenticate(authorization, self.admin_token, secret)
        except StoreError as exc:
            headers = [(b"content-type", b"application/json")]
            if exc.status_code == 401:
                headers.append((b"www-authenticate", b"Bearer"))
            if _anthropic_path(scope["path"]):  # Anthropic clients read {"type": "error", "error": {...}}
                kind = "authentication_error" if exc.status_code == 401 else "permission_error"
                body = orjson.dumps({"type": "error", "error": {"type": kind, "message": exc.message}})
            else:
                body = orjson.dumps({"error": exc.to_dict()})
            headers.append((b"content-length", str(len(body)).encode()))
            await send({"type": "http.response.start", "status": exc.status_code, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        if principal.scope is not None and authorization is not None:
            if len(self._verified) >= VERIFIED_TOKENS:
                del self._verified[next(iter(self._verified))]
            self._verified[authorization] = principal
        await self.app(scope, receive, send)


def _anthropic_path(path: str) -> bool:
    """A route of Anthropic's Messages API (its errors take that API's shape)."""
    return path.endswith(("/v1/messages", "/v1/messages/count_tokens"))


def principal_of(scope: Scope) -> Principal:
    """The caller :class:`AuthMiddleware` authenticated for this request."""
    principal = scope.get(PRINCIPAL_KEY)
    if principal is None:  # a route outside the middleware's reach: never serve it open
        raise AuthenticationError("this request was not authenticated")
    return principal
