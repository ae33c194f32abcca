"""One POST to a judge endpoint with retries: what the HTTP judge clients share.

429, 5xx, timeouts and refused connections are retried with exponential backoff
(``retries`` times); any other status fails at once with the endpoint's own message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import httpx

from agentbolt.rewards.judge.errors import JudgeCallError

__all__ = ["post_json"]


async def post_json(url: str, body: Mapping[str, Any], *, headers: Mapping[str, str], timeout: float,
                    retries: int, what: str, backoff: float = 1.0) -> dict[str, Any]:
    """The JSON object ``url`` answers to ``body``; :class:`JudgeCallError` otherwise.
    ``what`` names the endpoint in the error (never with its key); ``backoff`` is the
    first wait between tries (seconds, doubled each time, at most 30)."""
    delay = backoff
    for attempt in range(retries + 1):
        last = attempt == retries
        try:
            async with httpx.AsyncClient(timeout=timeout) as http:
                response = await http.post(url, json=dict(body), headers=dict(headers))
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            if last:
                raise JudgeCallError(f"{what} did not answer ({type(exc).__name__}: {exc}): is it running and "
                                     "reachable from here?", retryable=True) from exc
        else:
            if response.status_code < 300:
                try:
                    data = response.json()
                except ValueError as exc:
                    raise JudgeCallError(f"{what} answered with something that is not JSON: "
                                         f"{response.text[:200]!r}") from exc
                if not isinstance(data, dict):
                    raise JudgeCallError(f"{what} answered with JSON that is not an object: {response.text[:200]!r}")
                return data
            retryable = response.status_code == 429 or response.status_code >= 500
            if last or not retryable:
                raise JudgeCallError(f"{what} answered HTTP {response.status_code}: {response.text[:500]}",
                                     status_code=response.status_code, retryable=retryable)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 30.0)
    raise AssertionError("unreachable")  # the loop returns or raises on its last pass
