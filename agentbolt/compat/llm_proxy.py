"""v0.3's ``LLMProxy`` (a LiteLLM proxy) as agentbolt's model gateway.

The proxy's ``model_list`` (LiteLLM entries) names one upstream: ``hosted_vllm/<model>``
becomes an engine of kind ``vllm`` (token ids and logprobs recorded), anything else
(``openai/<model>``...) one of kind ``openai``, at the entry's ``api_base`` (default
``OPENAI_BASE_URL`` or OpenAI's). :meth:`LLMProxy.start` serves the gateway and the store
on ``host:port`` on the running event loop, so v0.3's URLs work unchanged:
``http://host:port/rollout/<rollout_id>/attempt/<attempt_id>/v1/chat/completions``.
Every call is recorded as a model-call span of that attempt (agentbolt's ``gen_ai.*``
spans, one per call — not LiteLLM's ``raw_gen_ai_request`` and its companions). A call to
the unscoped ``http://host:port/v1/...`` is forwarded to the upstream and recorded nowhere.

Given to ``Trainer(llm_proxy=...)``, the proxy becomes the run's ``gateway``; publish
``proxy.as_resource()`` as the agent's LLM and each attempt gets its own URL.
"""

from __future__ import annotations

import os
from typing import Any, TypedDict

from agentbolt.compat.store import as_store
from agentbolt.compat.store_server import LightningStoreServer
from agentbolt.runner.gateway_llm import gateway_llm
from agentbolt.scoped import rollout_base_url
from agentbolt.types import LLM

__all__ = ["LLMProxy", "ModelConfig", "UnscopedFallback"]


class ModelConfig(TypedDict):
    """One entry of ``LLMProxy(model_list=...)`` (LiteLLM's format):
    ``{"model_name": "gpt-4.1-mini", "litellm_params": {"model": "openai/gpt-4.1-mini", ...}}``."""

    model_name: str
    litellm_params: dict[str, Any]


def _engine(model_list: list[dict[str, Any]]) -> Any:
    from agentbolt.engines.spec import EngineSpec

    upstreams = {
        (str(m.get("litellm_params", {}).get("model", m.get("model_name", ""))),
         m.get("litellm_params", {}).get("api_base"), m.get("litellm_params", {}).get("api_key"))
        for m in model_list
    }
    if len(upstreams) != 1:
        raise ValueError(
            f"agentbolt's gateway forwards to one engine; this model_list names {len(upstreams)} upstreams: "
            "run one LLMProxy per engine"
        )
    target, api_base, api_key = upstreams.pop()
    provider, _, model = target.partition("/")
    kind = "vllm" if provider == "hosted_vllm" else "openai"
    url = api_base or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    if not url.rstrip("/").endswith("/v1"):
        url = url.rstrip("/") + "/v1"
    key = api_key or (os.environ.get("OPENAI_API_KEY") if kind == "openai" else None)
    return EngineSpec(kind=kind, url=url, model=model or target, api_key=key)


_UNSCOPED_PATHS = frozenset({"/v1/chat/completions", "/v1/completions", "/v1/models"})


class UnscopedFallback:
    """ASGI: a model call that names no attempt — no ``/rollout/<id>/attempt/<id>`` prefix,
    no attempt headers, no token — goes to ``plain`` (the upstream, unrecorded); everything
    else, lifespan included, to ``server``."""

    def __init__(self, server: Any, plain: Any) -> None:
        self.server = server
        self.plain = plain

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] in _UNSCOPED_PATHS:
            names = {name.lower() for name, _ in scope.get("headers", ())}
            if not names & {b"authorization", b"x-agentbolt-rollout-id", b"x-agentbolt-attempt-id"}:
                await self.plain(scope, receive, send)
                return
        await self.server(scope, receive, send)


class LLMProxy:
    """An OpenAI-compatible proxy that records every call for its rollout (see the module doc)."""

    def __init__(self, port: int = 4747, model_list: list[dict[str, Any]] | None = None, store: Any = None,
                 host: str = "127.0.0.1", **_options: Any) -> None:
        self.port = port
        self.host = host
        self.model_list = list(model_list or [])
        self.store = as_store(store) if store is not None else None
        self._server: LightningStoreServer | None = None

    def gateway_spec(self) -> Any:
        """The :class:`~agentbolt.gateway.GatewaySpec` this proxy stands for."""
        from agentbolt.gateway.spec import GatewaySpec

        if not self.model_list:
            raise ValueError("LLMProxy needs a model_list (LiteLLM entries) to know where to forward calls")
        return GatewaySpec(engine=_engine(self.model_list))

    def update_model_list(self, model_list: list[dict[str, Any]]) -> None:
        self.model_list = list(model_list)

    def set_store(self, store: Any) -> None:
        self.store = as_store(store)

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def is_running(self) -> bool:
        return self._server is not None

    async def start(self) -> None:
        """Serve the gateway (and the store) on ``host:port``."""
        if self._server is not None:
            return
        if self.store is None:
            raise ValueError("LLMProxy needs a store (LLMProxy(..., store=...)) to record the calls in")
        server = LightningStoreServer(self.store, self.host, self.port)
        server.app_factory = self._app
        await server.start()
        self._server = server

    def _app(self, store: Any) -> Any:
        """agentbolt's server with the gateway, plus v0.3's unscoped ``/v1/...`` routes: a
        call outside any rollout (a smoke test, a helper model call) is forwarded to the
        upstream as it is and recorded nowhere, as v0.3's proxy did with calls it could not
        attribute."""
        from agentbolt.engines.engine_app import engine_app
        from agentbolt.server.app import create_app

        gateway = self.gateway_spec().build()
        return UnscopedFallback(create_app(store, gateway=gateway), engine_app(gateway.engine))

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop()
            self._server = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    def as_resource(self, rollout_id: str | None = None, attempt_id: str | None = None, model: str | None = None,
                    sampling_parameters: dict[str, Any] | None = None) -> LLM:
        """The LLM to hand an agent: for one attempt when the ids are given, else one the
        runner points at each attempt's own URL."""
        name = model or (self.model_list[0].get("model_name") if self.model_list else None) or "policy"
        params = dict(sampling_parameters or {})
        if rollout_id is None or attempt_id is None:
            return gateway_llm(name, **params)
        endpoint = rollout_base_url(self.endpoint, rollout_id, attempt_id)
        return LLM(endpoint=endpoint, model=name, sampling_parameters=params)
