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
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

from agentbolt.runner.harness.errors import HarnessConfigError
from agentbolt.scoped import NO_TOKEN, mint_scoped_token, rollout_base_url
from agentbolt.tracing.context import AttemptContext

__all__ = ["NO_TOKEN", "Credentials", "attempt_credentials", "ensure_gateway", "program_env", "rollout_base_url"]

log = logging.getLogger("agentbolt.runner.harness")
_warned = False


@dataclass(frozen=True)
class Credentials:
    server_url: str
    token: str


async def attempt_credentials(ctx: AttemptContext, server_url: str | None) -> Credentials:
    """Server URL and token for the program of the attempt ``ctx`` runs."""
    from agentbolt.store.http import HttpStore

    global _warned
    store = ctx.store
    scoped = ctx.token
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


def program_env(ctx: AttemptContext, task_json: str, token: str, server_url: str, reward_file: str,
                base: dict[str, str], overrides: Mapping[str, str]) -> dict[str, str]:
    """The program's environment, on top of ``base`` (changed in place): its gateway
    (``OPENAI_BASE_URL``/``OPENAI_API_KEY`` with ``token``), reward route and file as it
    reaches them (``server_url``, ``reward_file``), and ``task_json``, what it may see of
    the task; ``overrides`` (the harness's ``env``) win."""
    rollout, attempt = quote(ctx.rollout_id, safe=""), quote(ctx.attempt_id, safe="")
    base.update(
        OPENAI_BASE_URL=rollout_base_url(server_url, ctx.rollout_id, ctx.attempt_id),
        OPENAI_API_KEY=token,
        AGENTBOLT_SERVER_URL=server_url,
        AGENTBOLT_ROLLOUT_ID=ctx.rollout_id,
        AGENTBOLT_ATTEMPT_ID=ctx.attempt_id,
        AGENTBOLT_TASK=task_json,
        AGENTBOLT_REWARD_URL=f"{server_url}/v1/rollouts/{rollout}/attempts/{attempt}/reward",
        AGENTBOLT_REWARD_FILE=reward_file,
    )
    base.update(overrides)  # explicit settings win (e.g. another OPENAI_BASE_URL: then calls are not recorded)
    return base
