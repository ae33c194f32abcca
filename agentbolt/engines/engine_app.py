"""Serve any :class:`~agentbolt.engines.engine.Engine` as a plain OpenAI-compatible app
(``/v1/chat/completions``, ``/v1/completions``, ``/v1/models``), without a store.

For running a local engine as a model server of its own, and as the fake engine of
tests and benchmarks. No auth: bind it to loopback.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from fastapi import FastAPI, Request
from starlette.responses import Response, StreamingResponse

from agentbolt.engines.engine import Engine, EngineError
from agentbolt.engines.sse import SSE_DONE, sse_event

__all__ = ["engine_app"]


def _json(payload: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(payload), status_code=status, media_type="application/json")


def _bad_request(message: str) -> Response:
    return _json({"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}, 400)


async def _sse(first: dict[str, Any] | None, chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    try:
        if first is not None:
            yield sse_event(first)
            async for chunk in chunks:
                yield sse_event(chunk)
        yield SSE_DONE
    except EngineError as exc:
        yield sse_event(exc.body)


def engine_app(engine: Engine) -> FastAPI:
    """An OpenAI-compatible FastAPI app over ``engine`` (started/closed with the app)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await engine.start()
        try:
            yield
        finally:
            await engine.close()

    app = FastAPI(title=f"agentbolt engine ({engine.name})", lifespan=lifespan)

    async def serve(
        request: Request,
        call: Callable[[dict[str, Any]], Any],
        stream: Callable[[dict[str, Any]], AsyncIterator[dict[str, Any]]],
    ) -> Response:
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError as exc:
            return _bad_request(f"the request body is not valid JSON: {exc}")
        if not isinstance(body, dict):
            return _bad_request("the request body must be a JSON object")
        try:
            if body.get("stream"):
                chunks = stream(body)
                try:
                    first = await anext(chunks)
                except StopAsyncIteration:
                    first = None
                return StreamingResponse(_sse(first, chunks), media_type="text/event-stream")
            return _json(await call(body))
        except EngineError as exc:
            return _json(exc.body, exc.status_code)

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        return await serve(request, engine.chat_completions, engine.stream_chat_completions)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await serve(request, engine.completions, engine.stream_completions)

    @app.get("/v1/models")
    async def models() -> Response:
        return _json(await engine.models())

    @app.get("/healthz")
    async def healthz() -> Response:
        return _json({"status": "ok", "engine": engine.name, "policy_version": engine.policy_version})

    app.state.engine = engine
    return app
