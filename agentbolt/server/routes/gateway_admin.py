"""The gateway's admin routes (admin token only; mounted with the gateway's own routes,
:mod:`agentbolt.server.routes.gateway`).

* ``POST /v1/gateway/pause`` (``?drain=true`` waits for in-flight calls),
  ``POST /v1/gateway/resume``, ``GET /v1/gateway/status``.
* ``POST /v1/gateway/flush``: answers (the status) once the span of every call finished
  before it is in the store — what a reader of spans in another process waits on
  (:meth:`~agentbolt.gateway.RemoteGateway.flush`) instead of a timer.
* ``POST /v1/gateway/weights``: pause, drain, load new weights into the engine, resume.
  The body is raw safetensors (``Content-Type: application/octet-stream``,
  ``?kind=full|lora&lora_scale=&version=&drain_timeout=``) or JSON
  ``{"lora_path": <LoRA directory the server can read>, "version": N}``.
  Answers ``{"policy_version": N}``; 400 for a body the engine refuses, 501 for an
  engine that cannot load weights, 504 when calls stay in flight past ``drain_timeout``.
  An update in parts has routes of its own (``/v1/gateway/weights/streams``:
  :mod:`.gateway_weight_streams`).
* ``POST /v1/gateway/chat/completions``, ``POST /v1/gateway/completions``: a call
  straight to the engine, part of no rollout and not recorded (an algorithm using the
  run's model as a helper, e.g. APO's critic; a trainer probing what the engine serves).
  No streaming.
* ``POST /v1/gateway/rebase``: the weights served now (any LoRA merged in) become the
  base of the next LoRA (a trainer that starts from them); 501 for an engine that
  cannot. Answers the status.

Errors are OpenAI-shaped (``{"error": {"message", "type", "param", "code"}}``): 401/403
for a token that is not the admin's, 404 ``no_gateway`` on an app without a gateway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from agentbolt.engines.engine import EngineError
from agentbolt.engines.weight_update import WeightUpdate
from agentbolt.gateway.control import FLUSH_ROUTE, REBASE_ROUTE, WEIGHTS_ROUTE, LocalGatewayControl
from agentbolt.gateway.gateway import Gateway
from agentbolt.server.auth import principal_of
from agentbolt.server.routes.gateway import json_object, openai_error, openai_error_response
from agentbolt.store.errors import StoreError

__all__ = ["admin_gateway", "gateway_admin_router", "tensors_of", "weights_lock"]

_NO_GATEWAY = ("this server has no gateway: start it with one (create_app(store, gateway=...), "
               "agentbolt server --engine ...)")

gateway_admin_router = APIRouter(tags=["gateway"])


def admin_gateway(request: Request, action: str) -> Gateway | Response:
    """The app's gateway for an admin call (``action`` names what a non-admin token is
    refused), or the error to answer: 401/403 for such a token, 404 when the app has no
    gateway."""
    try:
        principal_of(request.scope).require_admin(action)
    except StoreError as exc:
        return openai_error_response(exc)
    gateway: Gateway | None = getattr(request.app.state, "gateway", None)  # third-party: Starlette's app.state
    if gateway is None:
        return openai_error(404, _NO_GATEWAY, "invalid_request_error", "no_gateway")
    return gateway


async def _admin_status(request: Request, action: str,
                        change: Callable[[Gateway], Awaitable[Response | None]] | None = None) -> Response:
    """What the status-answering admin routes share: admin only (``action`` names what was
    refused), then ``change`` the gateway (it may answer an error instead), then answer its
    status."""
    gateway = admin_gateway(request, action)
    if isinstance(gateway, Response):
        return gateway
    if change is not None:
        failed = await change(gateway)
        if failed is not None:
            return failed
    return Response(orjson.dumps(gateway.status()), media_type="application/json")


@gateway_admin_router.post("/v1/gateway/pause", summary="Pause the gateway (new calls get 429); optionally drain")
async def pause(request: Request, drain: bool = False, timeout: float | None = None) -> Response:
    """Pause before a weight update; with ``drain=true`` answer once no call is in flight."""

    async def pause_and_drain(gateway: Gateway) -> Response | None:
        gateway.pause()
        if drain:
            try:
                await gateway.drain(timeout)
            except TimeoutError:
                return openai_error(504, f"calls still in flight after {timeout} s", "timeout", "drain_timeout")
        return None

    return await _admin_status(request, "pausing the gateway", pause_and_drain)


async def _resume(gateway: Gateway) -> None:
    gateway.resume()


@gateway_admin_router.post("/v1/gateway/resume", summary="Resume the gateway")
async def resume(request: Request) -> Response:
    return await _admin_status(request, "resuming the gateway", _resume)


@gateway_admin_router.get("/v1/gateway/status", summary="Paused?, calls in flight, engine, policy version")
async def status(request: Request) -> Response:
    return await _admin_status(request, "reading the gateway status")


async def _flush(gateway: Gateway) -> None:
    await gateway.flush()


@gateway_admin_router.post(FLUSH_ROUTE, summary="Answer once every finished call's span is in the store")
async def flush(request: Request) -> Response:
    """For readers of the gateway's spans in another process (an algorithm reading a
    step's rollouts): answers the status once the span writer has stored the span of
    every call finished before this request, however far behind it was."""
    return await _admin_status(request, "flushing the gateway's spans", _flush)


def weights_lock(request: Request) -> asyncio.Lock:
    """One weight update at a time per server (a second one waits for the first)."""
    lock: asyncio.Lock | None = getattr(request.app.state, "weights_lock", None)  # third-party: Starlette's app.state
    if lock is None:
        lock = request.app.state.weights_lock = asyncio.Lock()
    return lock


def _read_safetensors(data: bytes) -> dict[str, Any]:
    from safetensors.torch import load

    return load(data)


async def tensors_of(data: bytes) -> dict[str, Any] | Response:
    """The tensors of a safetensors request body, or the 400 to answer (an empty body, or not safetensors)."""
    if not data:
        return openai_error(400, "the request body is empty: send the weights as safetensors bytes",
                            "invalid_request_error")
    try:
        return await asyncio.to_thread(_read_safetensors, data)
    except Exception as exc:  # noqa: BLE001 - any parse failure is the client's body
        return openai_error(
            400,
            f"the body is not a safetensors blob ({exc}): serialise the tensors with safetensors.torch.save",
            "invalid_request_error",
        )


@gateway_admin_router.post(WEIGHTS_ROUTE, summary="Pause, drain, load new weights into the engine, resume")
async def weights(
    request: Request,
    kind: Literal["full", "lora"] = "full",
    lora_scale: float | None = None,
    version: int | None = None,
    drain_timeout: float = 120.0,
) -> Response:
    """Body: safetensors bytes (``application/octet-stream``; ``kind``: ``full`` = a full or
    partial state dict, ``lora`` = a peft LoRA state dict with ``lora_scale`` = alpha / r)
    or JSON ``{"lora_path": ..., "version": ...}``. Answers ``{"policy_version": N}``."""
    gateway = admin_gateway(request, "updating the model's weights")
    if isinstance(gateway, Response):
        return gateway
    if not gateway.engine.supports_weight_updates:
        try:
            await gateway.engine.load_weights(WeightUpdate(), version=version)
        except EngineError as exc:
            return openai_error_response(exc)
        return openai_error(501, f"the {gateway.engine.name} engine cannot load weights", "not_implemented")
    data = await request.body()
    update = WeightUpdate()
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json":
        body = json_object(data)
        if isinstance(body, str) or not isinstance(body.get("lora_path"), str) or not body["lora_path"]:
            problem = body if isinstance(body, str) else "lora_path is missing"
            return openai_error(
                400,
                f'{problem}: a JSON body must be {{"lora_path": "<LoRA directory this server can read>", '
                '"version": N}; send tensors as safetensors bytes with Content-Type: application/octet-stream',
                "invalid_request_error",
            )
        update = WeightUpdate(lora_path=body["lora_path"])
        if body.get("version") is not None:
            if type(body["version"]) is not int:
                return openai_error(400, "version must be an integer", "invalid_request_error")
            version = body["version"]
    else:
        tensors = await tensors_of(data)
        if isinstance(tensors, Response):
            return tensors
        del data
        update = WeightUpdate(lora=tensors, lora_scale=lora_scale) if kind == "lora" else WeightUpdate(tensors)
    async with weights_lock(request):
        try:
            new_version = await LocalGatewayControl(gateway).load_weights(update, version=version,
                                                                          drain_timeout=drain_timeout)
        except TimeoutError as exc:
            return openai_error(504, str(exc), "timeout", "drain_timeout")
        except (ValueError, TypeError) as exc:
            return openai_error(400, str(exc), "invalid_request_error")
        except EngineError as exc:
            return openai_error_response(exc)
    return Response(orjson.dumps({"policy_version": new_version}), media_type="application/json")


@gateway_admin_router.post("/v1/gateway/chat/completions",
                           summary="Chat completion straight to the engine, in no rollout")
async def admin_chat(request: Request) -> Response:
    """For algorithms that use the served model as a helper (APO's ``critic="gateway"``):
    the call is forwarded to the engine as is, part of no rollout, and not recorded."""
    return await _admin_call(request, "chat")


@gateway_admin_router.post("/v1/gateway/completions", summary="Completion straight to the engine, in no rollout")
async def admin_completions(request: Request) -> Response:
    """For trainers that probe what the engine serves (token ids in, logprobs out): part of
    no rollout, not recorded."""
    return await _admin_call(request, "completions")


async def _admin_call(request: Request, kind: Literal["chat", "completions"]) -> Response:
    gateway = admin_gateway(request, "calling the engine outside a rollout")
    if isinstance(gateway, Response):
        return gateway
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError as exc:
        return openai_error(400, f"the request body is not valid JSON: {exc}", "invalid_request_error")
    if not isinstance(body, dict):
        return openai_error(400, "the request body must be a JSON object", "invalid_request_error")
    if body.get("stream"):
        return openai_error(400, "this route does not stream: send stream=false", "invalid_request_error")
    engine = gateway.engine
    try:
        response = await (engine.chat_completions(body) if kind == "chat" else engine.completions(body))
    except EngineError as exc:
        return openai_error_response(exc)
    return Response(orjson.dumps(response), media_type="application/json")


@gateway_admin_router.post(REBASE_ROUTE, summary="Make the served weights the base of the next LoRA")
async def rebase(request: Request) -> Response:
    async def change(gateway: Gateway) -> Response | None:
        try:
            gateway.engine.rebase_loras()
        except EngineError as exc:
            return openai_error_response(exc)
        return None

    return await _admin_status(request, "rebasing the engine's LoRAs", change)
