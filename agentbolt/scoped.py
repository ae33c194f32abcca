"""What one rollout attempt gets to reach its model: a base URL and a scoped token.

Every part that hands an agent its gateway address — the server when a claim is made,
the gateway's public helper, the harness controller, the runner's ``gateway_llm``
resource, the Agent Lightning compatibility proxy — builds it here, so they all agree:

* **URL** — ``<server>/rollout/<rollout id>/attempt/<attempt id>/v1``. The ids are
  percent-encoded as path segments (a client may choose a rollout id such as
  ``"ro 1?"``; unquoted, it would end the path), and the gateway's routes decode them.
* **Token** — ``ab1.<rollout id>.<attempt id>.<signature>`` (base64url parts), the
  signature an HMAC-SHA256 keyed with the store's persistent secret, so tokens stay valid
  across server restarts and need no table of their own. It names one rollout and one
  attempt; what it may do is decided by the server (:mod:`agentbolt.server.auth`).

This module sits at the bottom of the layers beside :mod:`agentbolt.types`: it imports
nothing of agentbolt, so the gateway, the controller and the runner can all use it
without reaching up into the server.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass
from urllib.parse import quote

__all__ = [
    "NO_TOKEN",
    "TOKEN_PREFIX",
    "TokenScope",
    "mint_scoped_token",
    "rollout_anthropic_base_url",
    "rollout_base_url",
    "verify_token",
]

TOKEN_PREFIX = "ab1"
"""Version tag of the scoped-token format."""

NO_TOKEN = "agentbolt-no-token"
"""API key given to programs when the server requires none (OpenAI clients insist on one)."""


def rollout_base_url(server_url: str, rollout_id: str, attempt_id: str) -> str:
    """The OpenAI base URL that attributes every call made under it to this attempt.

    ``OPENAI_BASE_URL = rollout_base_url("http://127.0.0.1:8000", rid, aid)``; the ids
    are quoted as path segments (``"ro/1"`` becomes ``ro%2F1``).
    """
    rid, aid = quote(rollout_id, safe=""), quote(attempt_id, safe="")
    return f"{server_url.rstrip('/')}/rollout/{rid}/attempt/{aid}/v1"


def rollout_anthropic_base_url(server_url: str, rollout_id: str, attempt_id: str) -> str:
    """The Anthropic base URL of the attempt (Anthropic clients add ``/v1/messages``
    themselves): ``ANTHROPIC_BASE_URL = rollout_anthropic_base_url(server_url, rid, aid)``,
    with the scoped token as ``ANTHROPIC_API_KEY`` (sent as ``x-api-key``) or
    ``ANTHROPIC_AUTH_TOKEN`` (sent as ``Authorization: Bearer``)."""
    return rollout_base_url(server_url, rollout_id, attempt_id).removesuffix("/v1")


@dataclass(frozen=True, slots=True)
class TokenScope:
    """The rollout attempt a scoped token speaks for."""

    rollout_id: str
    attempt_id: str


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(secret: bytes, payload: str) -> bytes:
    return hmac.new(secret, payload.encode("ascii"), hashlib.sha256).digest()


def mint_scoped_token(secret: bytes, rollout_id: str, attempt_id: str) -> str:
    """A token good for one attempt of one rollout (see the module docstring)."""
    payload = f"{TOKEN_PREFIX}.{_b64(rollout_id.encode())}.{_b64(attempt_id.encode())}"
    return f"{payload}.{_b64(_signature(secret, payload))}"


def verify_token(secret: bytes, token: str) -> TokenScope | None:
    """The scope of a genuine scoped token; ``None`` for anything else (forged,
    malformed, or signed by another store)."""
    parts = token.split(".")
    if len(parts) != 4 or parts[0] != TOKEN_PREFIX:
        return None
    try:
        sig = _unb64(parts[3])
        payload = ".".join(parts[:3])
        if not hmac.compare_digest(sig, _signature(secret, payload)):
            return None
        return TokenScope(_unb64(parts[1]).decode(), _unb64(parts[2]).decode())
    except (binascii.Error, ValueError, UnicodeError):
        return None
