"""The admin routes of an update in parts (:mod:`agentbolt.gateway.weight_stream`): a
trainer elsewhere sends its new weights one group at a time, and the engine serves them
at once (:class:`~agentbolt.gateway.control.RemoteWeightStream` is the client).

* ``POST /v1/gateway/weights/streams?drain_timeout=&idle_s=`` — pause, drain, open the
  stream: ``{"stream": id}``. Waits while another weight update runs (one at a time per
  server, as ``POST /v1/gateway/weights``); 501 for an engine that cannot load an update
  in parts, 504 when calls stay in flight past ``drain_timeout`` (nothing held then).
* ``POST /v1/gateway/weights/streams/{id}/parts`` — one part: safetensors bytes of a
  partial state dict (``application/octet-stream``, up to ``max_weights_bytes``). Answers
  ``{"parts": n}``; 400 for a part the engine refuses (it changes nothing).
* ``POST /v1/gateway/weights/streams/{id}/commit?version=`` — serve the new weights, resume:
  ``{"policy_version": N}``.
* ``DELETE /v1/gateway/weights/streams/{id}`` — abort (``{"incomplete_weights": bool}``:
  whether the engine was left answering no call, see the module above).

A stream that hears nothing for ``idle_s`` (default 600 s: a trainer that went away) is
aborted by the server. 404 for a stream id that is not open.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from agentbolt.engines.engine import EngineError
from agentbolt.gateway.control import WEIGHT_STREAMS_ROUTE, LocalGatewayControl
from agentbolt.gateway.weight_stream import LocalWeightStream
from agentbolt.server.routes.gateway import openai_error, openai_error_response
from agentbolt.server.routes.gateway_admin import admin_gateway, tensors_of, weights_lock

__all__ = ["weight_streams_router"]

weight_streams_router = APIRouter(tags=["gateway"])


@dataclass
class _OpenStream:
    """The stream a server holds open, the weights lock it holds, and its idle timer."""

    id: str
    stream: LocalWeightStream
    lock: asyncio.Lock
    idle_s: float
    timer: asyncio.TimerHandle | None = None
    expiry: asyncio.Task[None] | None = None

    def hold(self) -> None:
        """A request is being served: no idle abort meanwhile."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def wait_idle(self, streams: dict[str, _OpenStream]) -> None:
        """Abort the stream after ``idle_s`` without a request."""
        self.hold()
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(self.idle_s, self._expire, streams)

    def _expire(self, streams: dict[str, _OpenStream]) -> None:
        self.expiry = asyncio.get_running_loop().create_task(self.close(streams, abort=True))  # kept: not collected

    async def close(self, streams: dict[str, _OpenStream], *, abort: bool) -> None:
        if streams.pop(self.id, None) is None:
            return
        self.hold()
        try:
            if abort:
                await self.stream.abort()
        finally:
            self.lock.release()


def _streams(request: Request) -> dict[str, _OpenStream]:
    streams: dict[str, _OpenStream] | None = getattr(request.app.state, "weight_streams", None)  # Starlette's state
    if streams is None:
        streams = request.app.state.weight_streams = {}
    return streams


def _json(body: dict[str, Any]) -> Response:
    return Response(orjson.dumps(body), media_type="application/json")


def _open_one(request: Request, stream_id: str) -> tuple[_OpenStream, dict[str, _OpenStream]] | Response:
    """The open stream a request names (its idle timer stopped while it is served), or the error to answer."""
    gateway = admin_gateway(request, "updating the model's weights")
    if isinstance(gateway, Response):
        return gateway
    streams = _streams(request)
    found = streams.get(stream_id)
    if found is None:
        return openai_error(404, f"no update in parts {stream_id!r} is open here: it was committed, aborted, or "
                                 "aborted by the server after idle_s without a request; open another",
                            "invalid_request_error", "no_weight_stream")
    found.hold()
    return found, streams


@weight_streams_router.post(WEIGHT_STREAMS_ROUTE, summary="Pause, drain, open an update in parts")
async def open_stream(request: Request, drain_timeout: float = 120.0, idle_s: float = 600.0) -> Response:
    gateway = admin_gateway(request, "updating the model's weights")
    if isinstance(gateway, Response):
        return gateway
    lock = weights_lock(request)
    await lock.acquire()
    try:
        stream = await LocalWeightStream.open(gateway, gateway.engine, LocalGatewayControl(gateway).drain,
                                              drain_timeout)
    except TimeoutError as exc:
        lock.release()
        return openai_error(504, str(exc), "timeout", "drain_timeout")
    except EngineError as exc:
        lock.release()
        return openai_error_response(exc)
    except BaseException:
        lock.release()
        raise
    streams = _streams(request)
    held = _OpenStream(uuid.uuid4().hex, stream, lock, idle_s)
    streams[held.id] = held
    held.wait_idle(streams)
    return _json({"stream": held.id, "policy_version": gateway.engine.policy_version})


@weight_streams_router.post(WEIGHT_STREAMS_ROUTE + "/{stream_id}/parts", summary="Load one part of an update")
async def send_part(request: Request, stream_id: str) -> Response:
    found = _open_one(request, stream_id)
    if isinstance(found, Response):
        return found
    held, streams = found
    try:
        tensors = await tensors_of(await request.body())
        if isinstance(tensors, Response):
            return tensors
        try:
            await held.stream.send(tensors)
        except (ValueError, TypeError) as exc:
            return openai_error(400, str(exc), "invalid_request_error")
        except EngineError as exc:
            return openai_error_response(exc)
        return _json({"parts": held.stream.parts})
    finally:
        if stream_id in streams:
            held.wait_idle(streams)


@weight_streams_router.post(WEIGHT_STREAMS_ROUTE + "/{stream_id}/commit", summary="Serve the update in parts")
async def commit_stream(request: Request, stream_id: str, version: int | None = None) -> Response:
    found = _open_one(request, stream_id)
    if isinstance(found, Response):
        return found
    held, streams = found
    try:
        served = await held.stream.commit(version)
    except EngineError as exc:
        return openai_error_response(exc)
    finally:
        await held.close(streams, abort=False)
    return _json({"policy_version": served})


@weight_streams_router.delete(WEIGHT_STREAMS_ROUTE + "/{stream_id}", summary="Abort an update in parts")
async def abort_stream(request: Request, stream_id: str) -> Response:
    found = _open_one(request, stream_id)
    if isinstance(found, Response):
        return found
    held, streams = found
    await held.close(streams, abort=True)
    return _json({"incomplete_weights": held.stream.engine.incomplete_weights})
