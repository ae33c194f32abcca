"""The gateway: an OpenAI-compatible proxy inside the server that trains unmodified
programs. Each model call of a rollout goes through it to an engine
(:mod:`agentbolt.engines`: the gateway routes and records, engines generate) and is
recorded as a model-call span (request, response, token ids, logprobs, policy version).

Quick start::

    from agentbolt.engines import VLLMEngine
    from agentbolt.gateway import Gateway, GatewayConfig, rollout_base_url
    from agentbolt.server import create_app

    gateway = Gateway(VLLMEngine("http://127.0.0.1:8000/v1"), GatewayConfig(sampling={"val": {"temperature": 0}}))
    app = create_app(store, gateway=gateway)
    # the program under training gets
    #   OPENAI_BASE_URL = rollout_base_url(server_url, rollout_id, attempt_id)
    #   OPENAI_API_KEY  = the attempt's scoped token (Claim.token)
    # (an Anthropic client: ANTHROPIC_BASE_URL = rollout_anthropic_base_url(...), ANTHROPIC_API_KEY = the token)

In another process (the server the trainer starts, ``agentbolt server --engine ...``) a
gateway is described by a :class:`GatewaySpec` (engine kind, URL or model path, settings)
and built there. A trainer puts new weights into the engine through a
:class:`GatewayControl` (:class:`LocalGatewayControl` here, :class:`RemoteGateway` over
HTTP): pause, drain, load, resume. See ``docs/gateway.md``.
"""

from agentbolt.gateway.config import GatewayConfig
from agentbolt.gateway.control import GatewayControl, LocalGatewayControl, RemoteGateway
from agentbolt.gateway.gateway import Gateway, GatewayPausedError
from agentbolt.gateway.spec import GatewaySpec
from agentbolt.scoped import rollout_anthropic_base_url, rollout_base_url

__all__ = [
    "Gateway",
    "GatewayConfig",
    "GatewayControl",
    "GatewayPausedError",
    "GatewaySpec",
    "LocalGatewayControl",
    "RemoteGateway",
    "rollout_anthropic_base_url",
    "rollout_base_url",
]
