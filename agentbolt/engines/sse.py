"""Server-sent events: the framing of streamed chat and completions calls.

An engine over HTTP reads a server's events (:func:`iter_sse_data`); an engine served as
an app (:mod:`.engine_app`) and the gateway write them (:func:`sse_event`,
:func:`sse_stream`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import orjson

__all__ = ["SSE_DONE", "close_stream", "iter_sse_data", "sse_event", "sse_stream"]

SSE_DONE = b"data: [DONE]\n\n"


def sse_event(payload: dict[str, Any]) -> bytes:
    """One ``data:`` event carrying ``payload`` as JSON."""
    return b"data: " + orjson.dumps(payload) + b"\n\n"


async def sse_stream(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    """SSE framing of a chat/completions stream: ``data:`` events, then ``[DONE]`` unless
    the last item was an error body (``{"error": ...}``)."""
    failed = False
    try:
        async for chunk in chunks:
            failed = "error" in chunk and "choices" not in chunk
            yield sse_event(chunk)
        if not failed:
            yield SSE_DONE
    finally:
        await close_stream(chunks)


async def close_stream(chunks: AsyncIterator[Any]) -> None:
    """Close a stream left early, so its ``finally`` blocks run now (an engine's stream is
    an async generator; a plain iterator has nothing to close)."""
    if isinstance(chunks, AsyncGenerator):
        await chunks.aclose()


async def iter_sse_data(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """The JSON payloads of an SSE stream's ``data:`` lines, up to ``[DONE]``."""
    async for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        if data:
            yield orjson.loads(data)
