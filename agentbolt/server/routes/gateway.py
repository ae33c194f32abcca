"""The gateway's HTTP face inside the server app (mounted when the app has a gateway).

* ``POST /rollout/{rollout_id}/attempt/{attempt_id}/v1/chat/completions`` (and
  ``.../v1/completions``, ``.../v1/responses`` — the Responses API, translated to a chat
  call by :mod:`agentbolt.gateway.responses` —, ``GET``/``DELETE .../v1/responses/{id}``
  — the attempt's stored responses —, ``GET .../v1/models``): what an unmodified program calls with
  ``OPENAI_BASE_URL`` set to :func:`~agentbolt.gateway.rollout_base_url`.
* ``POST .../v1/messages`` and ``.../v1/messages/count_tokens``: Anthropic's Messages API
  (:mod:`agentbolt.gateway.messages`), what ``ANTHROPIC_BASE_URL`` =
  :func:`~agentbolt.gateway.rollout_anthropic_base_url` reaches; its errors are in
  Anthropic's shape (``{"type": "error", "error": {"type", "message"}}``), and ``GET
  .../v1/models`` answers in Anthropic's shape to a call with an ``anthropic-version`` header.
* the same under plain ``/v1/...`` with ``X-Agentbolt-Rollout-Id`` /
  ``X-Agentbolt-Attempt-Id`` headers (or neither, with a scoped token: its attempt).
  Any of them may name the calling agent (``X-Agentbolt-Agent`` header or a
  ``<model>#<agent>`` model name) and its span (``traceparent``): :mod:`agentbolt.gateway.origin`.
* a WebSocket handshake on ``.../v1/responses`` (Codex tries one first when its provider
  says ``supports_websockets``) is refused with 426 Upgrade Required, on which Codex falls
  back to HTTP at once.
* the admin routes under ``/v1/gateway/`` (pause, resume, status, flush, weights, rebase,
  calls straight to the engine): :mod:`agentbolt.server.routes.gateway_admin`.

A scoped token may only call its own attempt's URLs (403 otherwise). Errors are
OpenAI-shaped (``{"error": {"message", "type", "param", "code"}}``) so clients raise
their usual exceptions.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from fastapi import APIRouter, Request, WebSocket
from fastapi.routing import APIRoute
from starlette.responses import Response, StreamingResponse

from agentbolt.engines.engine import EngineError
from agentbolt.gateway.gateway import CallKind, Gateway, GatewayPausedError
from agentbolt.gateway.messages import anthropic_model, anthropic_models, count_tokens, create_message, error_body
from agentbolt.gateway.origin import origin_of
from agentbolt.gateway.request_check import MalformedRequestError, check_request
from agentbolt.gateway.responses import create_response, delete_response, retrieve_response
from agentbolt.server.auth import principal_of
from agentbolt.store.errors import StoreError

__all__ = ["ATTEMPT_HEADER", "PROXY_ROUTES", "ROLLOUT_HEADER", "gateway_of", "gateway_router", "json_object",
           "openai_error", "openai_error_response"]

ROLLOUT_HEADER = "x-agentbolt-rollout-id"
ATTEMPT_HEADER = "x-agentbolt-attempt-id"

_SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def gateway_of(request: Request) -> Gateway:
    gateway: Gateway | None = getattr(request.app.state, "gateway", None)  # third-party: Starlette's app.state
    if gateway is None:
        raise RuntimeError("no gateway on this app: create_app(store, gateway=Gateway(engine))")
    return gateway


def openai_error(
    status: int, message: str, type_: str, code: Any = None, headers: dict[str, str] | None = None,
    param: str | None = None,
) -> Response:
    """An error answer in OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``)."""
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=headers)


def openai_error_response(exc: Exception) -> Response:
    """A gateway, engine or store error as the OpenAI-shaped answer a client expects."""
    if isinstance(exc, GatewayPausedError):
        return Response(
            orjson.dumps(exc.body),
            status_code=429,
            media_type="application/json",
            headers={"retry-after": str(exc.retry_after)},
        )
    if isinstance(exc, EngineError):
        return Response(orjson.dumps(exc.body), status_code=exc.status_code, media_type="application/json")
    if isinstance(exc, StoreError):
        return openai_error(exc.status_code, exc.message, exc.code, exc.code)
    raise exc


class _MissingAttempt(Exception):
    """The call names no rollout attempt (and its token is not a scoped one)."""


def _attempt_of(request: Request, rollout_id: str | None, attempt_id: str | None) -> tuple[str, str]:
    """Which attempt a call is for: path, else headers, else the scoped token's own.
    Raises PermissionDeniedError for another attempt than the token's."""
    principal = principal_of(request.scope)
    if rollout_id is None:
        rollout_id = request.headers.get(ROLLOUT_HEADER)
        attempt_id = request.headers.get(ATTEMPT_HEADER)
    if rollout_id is None or attempt_id is None:
        if principal.scope is not None and rollout_id in (None, principal.scope.rollout_id) and attempt_id is None:
            return principal.scope.rollout_id, principal.scope.attempt_id
        raise _MissingAttempt()
    principal.require_attempt(rollout_id, attempt_id, "calling the model for another rollout attempt")
    return rollout_id, attempt_id


_MISSING = (
    "which rollout attempt is this call for? Use the base URL <server>/rollout/<rollout id>/attempt/<attempt id>/v1, "
    "or send the X-Agentbolt-Rollout-Id and X-Agentbolt-Attempt-Id headers, or a rollout-scoped token"
)


async def _proxy(request: Request, kind: CallKind | Literal["responses"], rollout_id: str | None,
                 attempt_id: str | None) -> Response:
    gateway = gateway_of(request)
    try:
        rid, aid = _attempt_of(request, rollout_id, attempt_id)
    except _MissingAttempt:
        return openai_error(400, _MISSING, "invalid_request_error", "missing_rollout")
    except StoreError as exc:
        return openai_error_response(exc)
    body = json_object(await request.body())
    if isinstance(body, str):
        return openai_error(400, body, "invalid_request_error")
    origin, body = origin_of(request.headers, body)
    if kind != "responses":  # (the Responses translation checks its own body)
        try:
            check_request(kind, body)
        except MalformedRequestError as exc:  # the caller's, before any engine sees it
            return openai_error(400, str(exc), "invalid_request_error", param=exc.param)
    try:
        if kind == "responses":  # translated to a chat call (agentbolt.gateway.responses)
            answer = await create_response(gateway, body, rid, aid, origin)
            if isinstance(answer, dict):
                return Response(orjson.dumps(answer), media_type="application/json")
            return StreamingResponse(answer, media_type="text/event-stream", headers=_SSE_HEADERS)
        if body.get("stream"):
            chunks = await gateway.open_stream(kind, body, rid, aid, origin)
            return StreamingResponse(chunks, media_type="text/event-stream", headers=_SSE_HEADERS)
        response = await gateway.complete(kind, body, rid, aid, origin)
    except (EngineError, GatewayPausedError, StoreError) as exc:
        return openai_error_response(exc)
    return Response(orjson.dumps(response), media_type="application/json")


def _anthropic_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(error_body(status, message)), status_code=status, media_type="application/json",
                    headers=headers)


def _anthropic_error_response(exc: Exception) -> Response:
    """A gateway/store error in Anthropic's shape (the Messages routes)."""
    if isinstance(exc, GatewayPausedError):
        return _anthropic_error(429, str(exc), {"retry-after": str(exc.retry_after)})
    if isinstance(exc, EngineError | StoreError):
        return _anthropic_error(exc.status_code, exc.message)
    raise exc


def json_object(data: bytes) -> dict[str, Any] | str:
    """A request body's JSON object, or what is wrong with it (for the caller's error shape)."""
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return f"the request body is not valid JSON: {exc}"
    return body if isinstance(body, dict) else "the request body must be a JSON object"


async def _json_body(request: Request) -> dict[str, Any] | str:
    return json_object(await request.body())


async def _messages(request: Request, rollout_id: str | None, attempt_id: str | None) -> Response:
    """``POST …/v1/messages``: Anthropic's Messages API (agentbolt.gateway.messages)."""
    gateway = gateway_of(request)
    try:
        rid, aid = _attempt_of(request, rollout_id, attempt_id)
    except _MissingAttempt:
        return _anthropic_error(400, _MISSING)
    except StoreError as exc:
        return _anthropic_error_response(exc)
    body = await _json_body(request)
    if isinstance(body, str):
        return _anthropic_error(400, body)
    origin, body = origin_of(request.headers, body)
    try:
        answer = await create_message(gateway, body, rid, aid, origin)
    except (EngineError, GatewayPausedError, StoreError) as exc:
        return _anthropic_error_response(exc)
    if isinstance(answer, dict):
        return Response(orjson.dumps(answer), media_type="application/json")
    return StreamingResponse(answer, media_type="text/event-stream", headers=_SSE_HEADERS)


async def _count_tokens(request: Request, rollout_id: str | None, attempt_id: str | None) -> Response:
    """``POST …/v1/messages/count_tokens``: the prompt's length in the policy's tokens."""
    try:
        if rollout_id is not None:
            _attempt_of(request, rollout_id, attempt_id)
        body = await _json_body(request)
        if isinstance(body, str):
            return _anthropic_error(400, body)
        _, body = origin_of(request.headers, body)
        answer = count_tokens(gateway_of(request), body)
    except (EngineError, StoreError) as exc:
        return _anthropic_error_response(exc)
    return Response(orjson.dumps(answer), media_type="application/json")


async def _stored(request: Request, action: Literal["get", "delete"], response_id: str, rollout_id: str | None,
                  attempt_id: str | None) -> Response:
    """``GET`` / ``DELETE …/v1/responses/{response_id}`` (agentbolt.gateway.responses.stored)."""
    gateway = gateway_of(request)
    if request.query_params.get("stream", "").lower() in ("true", "1"):
        return openai_error(400, "streamed retrieval of a response is not served: retrieve it without stream",
                             "invalid_request_error", "unsupported_parameter")
    try:
        rid, aid = _attempt_of(request, rollout_id, attempt_id)
        call = retrieve_response if action == "get" else delete_response
        answer = await call(gateway, rid, aid, response_id)
    except _MissingAttempt:
        return openai_error(400, _MISSING, "invalid_request_error", "missing_rollout")
    except (EngineError, StoreError) as exc:
        return openai_error_response(exc)
    return Response(orjson.dumps(answer), media_type="application/json")


async def _models(request: Request, rollout_id: str | None, attempt_id: str | None) -> Response:
    try:
        if rollout_id is not None:
            _attempt_of(request, rollout_id, attempt_id)
        answer = await gateway_of(request).models()
    except (EngineError, StoreError) as exc:
        if "anthropic-version" in request.headers:
            return _anthropic_error_response(exc)
        return openai_error_response(exc)
    if "anthropic-version" in request.headers:  # an Anthropic client lists models in its API's shape
        answer = anthropic_models(answer)
    return Response(orjson.dumps(answer), media_type="application/json")


async def _model(request: Request, model_id: str, rollout_id: str | None, attempt_id: str | None) -> Response:
    """``GET …/v1/models/{model_id}``: one of the engine's models (Anthropic's shape on an
    ``anthropic-version`` header); 404 in the API's shape for a model it does not serve."""
    anthropic = "anthropic-version" in request.headers
    try:
        if rollout_id is not None:
            _attempt_of(request, rollout_id, attempt_id)
        served = (await gateway_of(request).models()).get("data") or []
    except (EngineError, StoreError) as exc:
        return _anthropic_error_response(exc) if anthropic else openai_error_response(exc)
    found = next((m for m in served if isinstance(m, dict) and m.get("id") == model_id), None)
    if found is None:
        names = ", ".join(repr(m.get("id")) for m in served if isinstance(m, dict))
        message = f"model {model_id!r} is not served here; the engine serves {names or 'no model it names'}"
        if anthropic:
            return _anthropic_error(404, message)
        return openai_error(404, message, "invalid_request_error", "model_not_found")
    return Response(orjson.dumps(anthropic_model(found) if anthropic else found), media_type="application/json")


gateway_router = APIRouter(tags=["gateway"])
_prefix = "/rollout/{rollout_id}/attempt/{attempt_id}/v1"


@gateway_router.post(_prefix + "/chat/completions", summary="Chat completion for one rollout attempt (OpenAI API)")
async def rollout_chat(request: Request, rollout_id: str, attempt_id: str) -> Response:
    return await _proxy(request, "chat", rollout_id, attempt_id)


@gateway_router.post(_prefix + "/completions", summary="Text completion for one rollout attempt (OpenAI API)")
async def rollout_completions(request: Request, rollout_id: str, attempt_id: str) -> Response:
    return await _proxy(request, "completions", rollout_id, attempt_id)


@gateway_router.post(_prefix + "/responses", summary="Responses API call for one rollout attempt (OpenAI API)")
async def rollout_responses(request: Request, rollout_id: str, attempt_id: str) -> Response:
    return await _proxy(request, "responses", rollout_id, attempt_id)


_NO_WEBSOCKET = (
    "this gateway serves the Responses API over HTTP only: POST the request to this URL (with stream=true for "
    "events). Codex falls back to HTTP by itself; set supports_websockets = false in its model provider to skip "
    "the attempt"
)


async def _refuse_websocket(websocket: WebSocket) -> None:
    """A Responses WebSocket handshake (Codex's first try): refused with 426 Upgrade
    Required, which Codex answers by falling back to HTTP at once (a 403 it retries)."""
    body = {"error": {"message": _NO_WEBSOCKET, "type": "invalid_request_error", "param": None,
                      "code": "websocket_not_supported"}}
    await websocket.send_denial_response(Response(orjson.dumps(body), status_code=426, media_type="application/json"))


@gateway_router.websocket(_prefix + "/responses")
async def rollout_responses_websocket(websocket: WebSocket, rollout_id: str, attempt_id: str) -> None:
    await _refuse_websocket(websocket)


@gateway_router.websocket("/v1/responses")
async def responses_websocket(websocket: WebSocket) -> None:
    await _refuse_websocket(websocket)


@gateway_router.get(_prefix + "/responses/{response_id}", summary="A stored response of the attempt (Responses API)")
async def rollout_response(request: Request, rollout_id: str, attempt_id: str, response_id: str) -> Response:
    return await _stored(request, "get", response_id, rollout_id, attempt_id)


@gateway_router.delete(_prefix + "/responses/{response_id}", summary="Delete a stored response of the attempt")
async def rollout_response_delete(request: Request, rollout_id: str, attempt_id: str, response_id: str) -> Response:
    return await _stored(request, "delete", response_id, rollout_id, attempt_id)


@gateway_router.post(_prefix + "/messages", summary="Messages API call for one rollout attempt (Anthropic API)")
async def rollout_messages(request: Request, rollout_id: str, attempt_id: str) -> Response:
    return await _messages(request, rollout_id, attempt_id)


@gateway_router.post(_prefix + "/messages/count_tokens", summary="Count a Messages request's tokens (Anthropic API)")
async def rollout_count_tokens(request: Request, rollout_id: str, attempt_id: str) -> Response:
    return await _count_tokens(request, rollout_id, attempt_id)


@gateway_router.get(_prefix + "/models", summary="Models served by the gateway's engine (OpenAI API)")
async def rollout_models(request: Request, rollout_id: str, attempt_id: str) -> Response:
    return await _models(request, rollout_id, attempt_id)


@gateway_router.get(_prefix + "/models/{model_id:path}", summary="One model served by the gateway's engine")
async def rollout_model(request: Request, rollout_id: str, attempt_id: str, model_id: str) -> Response:
    return await _model(request, model_id, rollout_id, attempt_id)


@gateway_router.post("/v1/chat/completions", summary="Chat completion; attempt from headers or scoped token")
async def chat(request: Request) -> Response:
    return await _proxy(request, "chat", None, None)


@gateway_router.post("/v1/completions", summary="Text completion; attempt from headers or scoped token")
async def completions(request: Request) -> Response:
    return await _proxy(request, "completions", None, None)


@gateway_router.post("/v1/responses", summary="Responses API call; attempt from headers or scoped token")
async def responses(request: Request) -> Response:
    return await _proxy(request, "responses", None, None)


@gateway_router.get("/v1/responses/{response_id}", summary="A stored response; attempt from headers or scoped token")
async def response_get(request: Request, response_id: str) -> Response:
    return await _stored(request, "get", response_id, None, None)


@gateway_router.delete("/v1/responses/{response_id}", summary="Delete a stored response; attempt as for POST")
async def response_delete(request: Request, response_id: str) -> Response:
    return await _stored(request, "delete", response_id, None, None)


@gateway_router.post("/v1/messages", summary="Messages API call (Anthropic API); attempt from headers or scoped token")
async def messages(request: Request) -> Response:
    return await _messages(request, None, None)


@gateway_router.post("/v1/messages/count_tokens", summary="Count a Messages request's tokens (Anthropic API)")
async def messages_count_tokens(request: Request) -> Response:
    return await _count_tokens(request, None, None)


@gateway_router.get("/v1/models", summary="Models served by the gateway's engine")
async def models(request: Request) -> Response:
    return await _models(request, None, None)


@gateway_router.get("/v1/models/{model_id:path}", summary="One model served by the gateway's engine")
async def model(request: Request, model_id: str) -> Response:
    return await _model(request, model_id, None, None)


_PROXY_ENDPOINTS = (rollout_chat, rollout_completions, rollout_responses, chat, completions, responses)
PROXY_ROUTES = tuple(r for r in gateway_router.routes if isinstance(r, APIRoute) and r.endpoint in _PROXY_ENDPOINTS)
"""The model-call routes (``POST``): what :class:`agentbolt.server.gateway_fast_path.GatewayFastPath` answers
without the router."""
