"""HTTP plumbing for ``HttpStore``: connection lanes per event loop, retries, failover across servers, batching glue."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import ssl
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import httpx
import orjson
from pydantic import BaseModel, TypeAdapter

from agentbolt.store.errors import StoreError, StoreUnavailableError, error_from_status
from agentbolt.store.http.batching import Batcher

__all__ = ["HttpTransport"]

T = TypeVar("T")

log = logging.getLogger("agentbolt.store.http")  # the store's logger: failover warnings are the store's news

_NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""Transport errors that guarantee the server never saw the request."""
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_FAILOVER_STATUS = frozenset({502, 503, 504})
"""Answers that say "this server cannot serve now": another one may."""


def _json_default(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    raise TypeError(f"cannot send {type(obj).__name__} as JSON")


def _dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, default=_json_default)


@functools.cache
def _shared_ssl_context() -> ssl.SSLContext:
    """One TLS context for every client: building one costs milliseconds."""
    return httpx.create_ssl_context()


def _error_of(response: httpx.Response) -> StoreError:
    try:
        err = orjson.loads(response.content)["error"]
        code, message = err.get("code"), str(err.get("message") or "")
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        code, message = None, f"HTTP {response.status_code}: {response.text[:300]}"
    return error_from_status(response.status_code, code, message or f"HTTP {response.status_code}")


class _Lanes:
    """Up to ``size`` single-connection httpx clients, each lent to one request at a time.

    httpx's own pool rescans every connection on each request; with dozens of
    connections that costs more CPU than the request itself. One connection per client
    keeps the bookkeeping constant; the most recently used client is lent first, so a
    light load keeps few connections open.
    """

    def __init__(self, make: Callable[[], httpx.AsyncClient], size: int) -> None:
        self._make = make
        self._free: list[httpx.AsyncClient] = []
        self._all: list[httpx.AsyncClient] = []
        self._slots = asyncio.Semaphore(size)
        self._closing: set[asyncio.Task[None]] = set()

    @contextlib.asynccontextmanager
    async def lease(self) -> AsyncIterator[httpx.AsyncClient]:
        async with self._slots:
            if self._free:
                client = self._free.pop()
            else:
                client = self._make()
                self._all.append(client)
            try:
                yield client
            except BaseException:
                # a request cut short (cancelled long-poll, transport error) can leave the
                # client's one connection marked busy, and httpcore would never lend it
                # again (PoolTimeout on every later request): drop the client instead
                self._all.remove(client)
                task = asyncio.ensure_future(client.aclose())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
                raise
            self._free.append(client)

    async def aclose(self) -> None:
        clients, self._all, self._free = self._all, [], []
        for client in clients:
            await client.aclose()


class _LoopState:
    """The connections (and batcher) of one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, lanes: _Lanes, batcher: Batcher | None) -> None:
        self.loop = loop
        self.lanes = lanes
        self.batcher = batcher
        self.learning = asyncio.Lock()
        """Held by the one call that finds out whether the server has a call older servers
        lack; the calls behind it wait for the answer."""


class HttpTransport:
    """Talks to the agentbolt server(s) for :class:`~agentbolt.store.http.HttpStore`, which sets
    the attributes below: one API call with retries and failover (``_request``), one batchable
    call (``_op``), and the per-event-loop connections (``_state``)."""

    base_urls: tuple[str, ...]
    _current: int
    token: str | None
    timeout: float
    max_retries: int
    batching: bool
    max_connections: int
    _states: dict[asyncio.AbstractEventLoop, _LoopState]
    _states_lock: threading.Lock

    batch_concurrency: int = 2
    """Batch requests in flight at once per event loop; more calls wait for the next one."""
    backoff_base: float = 0.05
    """First retry delay in seconds; doubles each retry (with full jitter)."""
    backoff_max: float = 2.0

    @property
    def base_url(self) -> str:
        """The server in use (the first of ``base_urls`` until a failover)."""
        return self.base_urls[self._current]

    def _fail_over(self, failed_url: str, why: str) -> None:
        """Move on to the next server if ``failed_url`` is still the one in use (many
        concurrent calls fail together: only the first moves)."""
        if len(self.base_urls) > 1 and self.base_urls[self._current] == failed_url:
            self._current = (self._current + 1) % len(self.base_urls)
            log.warning("store server %s failed (%s): switching to %s", failed_url, why, self.base_url)

    # ------------------------------------------------------------------ plumbing
    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is not None:
            return state
        with self._states_lock:
            for old in [lp for lp in self._states if lp.is_closed()]:
                del self._states[old]  # its sockets died with its loop
            headers = {"content-type": "application/json", "accept": "application/json"}
            if self.token:
                headers["authorization"] = f"Bearer {self.token}"
            ssl_context = _shared_ssl_context()

            def make_client() -> httpx.AsyncClient:
                return httpx.AsyncClient(  # no base_url: requests name their server (failover)
                    headers=headers,
                    timeout=httpx.Timeout(self.timeout),
                    limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
                    verify=ssl_context,
                )

            batcher = Batcher(self._send_batch, concurrency=self.batch_concurrency) if self.batching else None
            state = self._states[loop] = _LoopState(loop, _Lanes(make_client, self.max_connections), batcher)
            return state

    def _backoff(self, attempt: int, response: httpx.Response | None = None) -> float:
        delay = random.uniform(0, min(self.backoff_max, self.backoff_base * 2**attempt))
        if response is not None:
            retry_after = response.headers.get("retry-after")
            if retry_after:
                try:
                    delay = max(delay, min(float(retry_after), 10.0))
                except ValueError:
                    pass
        return delay

    async def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        idempotent: bool = True,
        timeout: float | None = None,
        raw_body: bytes | None = None,
    ) -> Any:
        """One API call with retries; returns the decoded JSON answer."""
        state = self._state()
        content = raw_body if raw_body is not None else (None if body is None else _dumps(body))
        last = ""
        retry_response: httpx.Response | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                await asyncio.sleep(self._backoff(attempt - 1, retry_response))
            retry_response = None
            url = self.base_url
            try:
                async with state.lanes.lease() as http:
                    response = await http.request(
                        method,
                        url + path,
                        content=content,
                        params=params,
                        timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
                    )
            except _NEVER_SENT as exc:
                last = f"{type(exc).__name__}: {exc}"
                if not isinstance(exc, httpx.PoolTimeout):  # that one is our own congestion
                    self._fail_over(url, last)
                continue
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
                self._fail_over(url, last)
                if idempotent:
                    continue
                raise StoreUnavailableError(
                    f"{method} {url}{path} failed after it was sent ({last}); it was not retried "
                    "because repeating it could apply it twice: check the store before trying again"
                ) from exc
            status = response.status_code
            if status < 400:
                return orjson.loads(response.content) if response.content else None
            if status in _RETRY_STATUS and idempotent:
                last = f"HTTP {status}: {_error_of(response).message}"
                retry_response = response
                if status in _FAILOVER_STATUS:
                    self._fail_over(url, last)
                continue
            raise _error_of(response)
        raise StoreUnavailableError(
            f"the store at {', '.join(self.base_urls)} did not answer {method} {path} after {self.max_retries + 1} "
            "tries "
            f"(last: {last or 'no answer'}); is the server running?"
        )

    async def _send_batch(self, body: bytes, n_ops: int) -> list[dict[str, Any]]:
        answer = await self._request("POST", "/v1/batch", raw_body=body)
        return answer["results"]

    async def _op(self, op: str, args: bytes, result: TypeAdapter[T], method: str, path: str, body: bytes | None) -> T:
        """Run one batchable store call: through the batcher, or as its REST route
        (``method path`` with ``body``). ``args`` is the op's arguments as JSON."""
        state = self._state()
        if state.batcher is None:
            return result.validate_python(await self._request(method, path, raw_body=body))
        payload = b'{"op":"' + op.encode() + b'","args":' + args + b"}"
        for attempt in range(self.max_retries + 1):
            answer = await state.batcher.submit(payload)
            if answer.get("ok"):
                return result.validate_python(answer.get("result"))
            status = int(answer.get("status") or 500)
            err = answer.get("error") or {}
            error = error_from_status(status, err.get("code"), str(err.get("message") or f"HTTP {status}"))
            if status not in _RETRY_STATUS:
                raise error
            if attempt < self.max_retries:
                await asyncio.sleep(self._backoff(attempt))
        raise StoreUnavailableError(
            f"the store at {self.base_url} kept failing {op} after {self.max_retries + 1} tries (last: {error.message})"
        )
