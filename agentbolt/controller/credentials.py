"""How a harness learns where the gateway is and which token its program gets.

* The runner's store is an :class:`~agentbolt.store.http.HttpStore`: the server is its
  ``base_url``. The token is the attempt's scoped token (``Claim.token``) when the
  runner makes it known (``AttemptContext.token``); until then the runner's own token
  is used, with a warning, because it can do more than one rollout needs.
* The runner's store is a local one (MemoryStore, SQLite) that a server in this process
  also serves: pass ``Harness(server_url=...)``; the scoped token is minted here from the
  store's secret, exactly as the server would.
* A local store and no ``server_url``: there is no gateway for the program to call, so
  :class:`HarnessConfigError` says what to do.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agentbolt.controller.errors import HarnessConfigError
from agentbolt.server.auth import mint_scoped_token
from agentbolt.tracing.context import AttemptContext

__all__ = ["Credentials", "attempt_credentials", "ensure_gateway", "rollout_base_url"]

log = logging.getLogger("agentbolt.controller")
_warned = False

NO_TOKEN = "agentbolt-no-token"
"""API key given to programs when the server requires none (OpenAI clients insist on one)."""


@dataclass(frozen=True)
class Credentials:
    server_url: str
    token: str


def rollout_base_url(server_url: str, rollout_id: str, attempt_id: str) -> str:
    """The OpenAI base URL that attributes every call to this attempt."""
    try:  # the gateway's own helper, when present, is the authority on its routes
        from agentbolt.gateway import rollout_base_url as gateway_url  # type: ignore[attr-defined]
    except ImportError:
        from urllib.parse import quote

        return f"{server_url.rstrip('/')}/rollout/{quote(rollout_id, safe='')}/attempt/{quote(attempt_id, safe='')}/v1"
    return str(gateway_url(server_url, rollout_id, attempt_id))


async def attempt_credentials(ctx: AttemptContext, server_url: str | None) -> Credentials:
    """Server URL and token for the program of the attempt ``ctx`` runs."""
    from agentbolt.store.http import HttpStore

    global _warned
    store = ctx.store
    scoped = getattr(ctx, "token", None)
    if isinstance(store, HttpStore):
        url = server_url or store.base_url
        if scoped:
            return Credentials(url, scoped)
        if store.token and not _warned:
            _warned = True
            log.warning(
                "the runner does not pass the claim's scoped token to agents yet, so harness programs get the "
                "runner's own token, which can do more than one rollout needs"
            )
        return Credentials(url, store.token or NO_TOKEN)
    if server_url is None:
        raise HarnessConfigError(
            f"a harness program calls its model through the gateway of an agentbolt server, but this runner uses a "
            f"{type(store).__name__} in this process, which no server serves: give the trainer the engine "
            "(Trainer(..., gateway=EngineSpec(...)), any strategy, e.g. strategy='multiprocess'), run the runner "
            "against an HttpStore, or serve this store (agentbolt.server.testing.serve_in_thread) and pass "
            "Harness(..., server_url=that URL)"
        )
    if scoped:
        return Credentials(server_url, scoped)
    secret = await store.get_secret()
    return Credentials(server_url, mint_scoped_token(secret, ctx.rollout_id, ctx.attempt_id))


async def ensure_gateway(creds: Credentials, base_url: str, checked: set[str]) -> None:
    """Fail early, and say why, when the server has no gateway mounted (every model call
    of the program would get 404). Checked once per server per process; any answer but
    404 (an engine hiccup, say) lets the program run. ``checked``: servers already seen."""
    if creds.server_url in checked:
        return
    import httpx

    try:
        async with httpx.AsyncClient(timeout=10.0) as client:
            response = await client.get(f"{base_url}/models", headers={"authorization": f"Bearer {creds.token}"})
    except httpx.HTTPError as exc:
        log.warning("could not check the gateway at %s (%s); starting the program anyway", creds.server_url, exc)
        return
    if response.status_code == 404:
        raise HarnessConfigError(
            f"the agentbolt server at {creds.server_url} has no model gateway, so the program's model calls would "
            "fail: start the server with a gateway in front of your model (`agentbolt server --engine ...`, "
            "Trainer(..., gateway=EngineSpec(...)) or create_app(store, gateway=Gateway(engine)) — see "
            "docs/gateway.md) and point the runners at it"
        )
    checked.add(creds.server_url)
