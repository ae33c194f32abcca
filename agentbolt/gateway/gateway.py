"""The gateway's core: turn one agent call into one engine call plus one span.

Per call it finds the rollout's mode (cached) and forces that mode's sampling, asks the engine for token ids
and logprobs, sends the call to the rollout's replica (a rollout sticks to one, which keeps the engine's
prefix cache warm; new rollouts go to the least loaded replica and a replica that stops answering is taken
out: :mod:`.placement`), retries engine 429/5xx and timeouts with backoff, and hands a record of the call to
the span recorder. ``pause`` turns new calls away with 429 (or holds them up to ``pause_hold_s``) while calls
in flight finish (``drain`` waits for them), so weights can be swapped between ``pause`` and ``resume``.

The HTTP side (routes, auth, SSE framing) is in :mod:`agentbolt.server.routes.gateway`
(the admin routes: :mod:`agentbolt.server.routes.gateway_admin`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, Literal

from agentbolt.engines.engine import Engine, EngineError
from agentbolt.engines.history import AttemptHistory
from agentbolt.engines.sse import sse_stream
from agentbolt.engines.token_chat import TokenChat
from agentbolt.gateway.admission import Admission, GatewayPausedError
from agentbolt.gateway.config import GatewayConfig
from agentbolt.gateway.inflight import InflightCall
from agentbolt.gateway.origin import CallOrigin
from agentbolt.gateway.placement import ReplicaPlacement
from agentbolt.gateway.recording import CallRecord, SpanRecorder
from agentbolt.gateway.responses.log import ResponseLog
from agentbolt.gateway.streaming import StreamAssembler
from agentbolt.store.base import Store

__all__ = ["CallKind", "Gateway", "GatewayPausedError"]

logger = logging.getLogger("agentbolt.gateway")

CallKind = Literal["chat", "completions"]


class Gateway:
    """An OpenAI-compatible proxy in front of ``engine`` that records every call.

    Mount it in the server with ``create_app(store, gateway=Gateway(engine, config))``;
    the app binds it to its store and starts and closes it with its lifespan.
    """

    def __init__(self, engine: Engine, config: GatewayConfig | None = None) -> None:
        self.engine = engine
        self.config = config or GatewayConfig()
        self._store: Store | None = None
        self._recorder: SpanRecorder | None = None
        self._modes: dict[str, str] = {}
        #: which replica answers each rollout (sticky, load-aware, around dead replicas)
        self.placement = ReplicaPlacement(max(1, engine.n_replicas), cooldown_s=self.config.replica_cooldown_s,
                                          max_rollouts=self.config.mode_cache_size)
        self._probes: set[asyncio.Task[None]] = set()
        #: the pause flag and the calls in flight (every replica's), which a weight swap drains
        self.admission = Admission(self.config)
        self._loop: asyncio.AbstractEventLoop | None = None
        #: the attempts' finished calls, for token-exact prompts (:mod:`agentbolt.engines.history`)
        self.history = AttemptHistory(max_attempts=self.config.mode_cache_size)
        self.token_chat: TokenChat | None = None
        #: the attempts' Responses API conversations, for ``previous_response_id``
        self.responses = ResponseLog(limit=self.config.mode_cache_size)
        if self.config.token_chat and engine.tokenizer is not None:
            self.token_chat = TokenChat(engine, engine.tokenizer, engine.tool_parser, self.history)

    # ------------------------------------------------------------------ lifecycle
    def bind(self, store: Store) -> None:
        """Record spans into ``store`` (and read rollout modes from it). A closed gateway
        may be bound again (the next trainer's store object, for the same engine)."""
        if self._store is not None and self._store is not store and self._recorder is not None:
            raise RuntimeError("this gateway already records into another store: make one gateway per server")
        self._store = store

    @property
    def store(self) -> Store:
        if self._store is None:
            raise RuntimeError("the gateway has no store: mount it with create_app(store, gateway=...) or call bind()")
        return self._store

    @property
    def recorder(self) -> SpanRecorder:
        if self._recorder is None:
            c = self.config
            self._recorder = SpanRecorder(
                self.store, batch_size=c.span_batch_size, flush_interval=c.span_flush_interval
            )
        return self._recorder

    async def start(self) -> None:
        """Start the engine and the span writer (the server's lifespan calls this)."""
        self._loop = asyncio.get_running_loop()
        await self.engine.start()
        self.recorder.start()

    async def close(self) -> None:
        """Store every pending span, then close the engine. The gateway can be started
        again, in another event loop (one Gateway given to two trainers in turn)."""
        if self._recorder is not None:
            await self._recorder.close()
            self._recorder = None  # its events belong to this loop
        self.admission.reset()
        for task in list(self._probes):
            task.cancel()
        await self.engine.close()

    async def flush(self) -> None:
        """Wait until the spans of every finished call are in the store. Callable from
        any event loop (the gateway's own may run in a server thread)."""
        loop = self._loop
        if loop is None or loop is asyncio.get_running_loop() or loop.is_closed():
            await self.recorder.flush()
            return
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.recorder.flush(), loop))

    # ------------------------------------------------------------------ pause / drain
    @property
    def paused(self) -> bool:
        return self.admission.paused

    @property
    def in_flight(self) -> int:
        """Calls in flight, on every replica."""
        return self.admission.in_flight

    @property
    def calls(self) -> int:
        """Calls admitted since the gateway was made."""
        return self.admission.admitted

    def pause(self) -> None:
        """Turn new calls away with 429 + Retry-After; calls in flight go on."""
        self.admission.paused = True

    def resume(self) -> None:
        self.admission.paused = False

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until no call is in flight on any replica (after :meth:`pause`, nothing new starts)."""
        await self.admission.drain(timeout)

    def status(self) -> dict[str, Any]:
        return {
            "paused": self.paused,
            "in_flight": self.in_flight,
            "calls": self.calls,
            "engine": self.engine.name,
            "replicas": self.engine.n_replicas,
            "replica_states": self.placement.status(),
            "policy_version": self.engine.policy_version,
            "pending_spans": self._recorder.pending if self._recorder is not None else 0,
            "prompts": self.history.stats.as_dict(),
            "weight_formats": list(self.engine.weight_formats),
            "weight_streams": self.engine.supports_weight_streams,
            "incomplete_weights": self.engine.incomplete_weights,
            "dtype": _str_or_none(self.engine.dtype),
            "device": _str_or_none(self.engine.device),
        }

    # ------------------------------------------------------------------ routing
    async def mode_of(self, rollout_id: str) -> str:
        """The rollout's mode (``train``/``val``/``test``), read once from the store.
        Raises the store's NotFoundError for an unknown rollout."""
        mode = self._modes.get(rollout_id)
        if mode is None:
            rollout = await self.store.get_rollout(rollout_id)
            mode = str(rollout.mode)
            _remember(self._modes, rollout_id, mode, self.config.mode_cache_size)
        return mode

    def replica_for(self, rollout_id: str) -> int:
        """The engine replica for the rollout's next call (see :mod:`.placement`); raises
        :class:`~agentbolt.gateway.placement.NoHealthyReplicaError` (503) when all are down."""
        for replica in self.placement.due_for_probe():
            task = asyncio.get_running_loop().create_task(self._probe(replica))
            self._probes.add(task)
            task.add_done_callback(self._probes.discard)
        return self.placement.replica_for(rollout_id)

    async def _probe(self, replica: int) -> None:
        """Put a replica whose cool-down has passed back if it answers; else out again."""
        try:
            async with asyncio.timeout(self.config.request_timeout):
                await self.engine.probe(replica)
        except Exception as exc:  # noqa: BLE001 — whatever stops the probe keeps the replica out
            message = exc.message if isinstance(exc, EngineError) else f"{type(exc).__name__}: {exc}"
            self.placement.mark_down(replica, f"probe failed: {message}")
            return
        logger.info("engine replica %d answers again: it takes new rollouts", replica)
        self.placement.mark_up(replica)

    def _place(self, call: InflightCall) -> None:
        """Send ``call`` to its rollout's replica now (counted there until :meth:`_release`)."""
        call.replica = self.replica_for(call.rollout_id)
        self.placement.started(call.replica)
        call.placed = True

    def _release(self, call: InflightCall) -> None:
        if call.placed:
            call.placed = False
            self.placement.finished(call.replica)

    def prepare(self, kind: CallKind, body: dict[str, Any], mode: str, *, stream: bool) -> dict[str, Any]:
        """The body sent to the engine: the agent's, with the mode's sampling forced (a
        ``None`` value removes the field) and token ids / logprobs / usage asked for."""
        out = dict(body)
        for key, value in self.config.sampling.get(mode, {}).items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
        if self.config.logprobs:
            if kind == "chat":
                out["logprobs"] = True
            elif not out.get("logprobs"):
                out["logprobs"] = 1
        if self.config.return_token_ids and self.engine.returns_token_ids:
            out["return_token_ids"] = True
        if stream:
            out["stream"] = True
            if "stream_options" not in body:
                out["stream_options"] = {"include_usage": True}
        else:
            out.pop("stream", None)
            out.pop("stream_options", None)
        return out

    # ------------------------------------------------------------------ calls
    def _begin(
        self, kind: CallKind, body: dict[str, Any], mode: str, rollout_id: str, attempt_id: str, *, stream: bool,
        origin: CallOrigin | None = None,
    ) -> InflightCall:
        return InflightCall(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            request=self.prepare(kind, body, mode, stream=stream),
            version=self.engine.policy_version,
            streamed=stream,
            origin=origin,
        )

    async def _backoff_or_raise(self, call: InflightCall, err: EngineError) -> None:
        """After a failed try: wait before the next one, or record the failure and raise. A
        replica that could not answer is taken out, and the call fails (5xx: retryable)."""
        self._release(call)
        taken_out = err.replica_down and self.placement.mark_down(call.replica, err.message)
        if taken_out:
            logger.warning("engine replica %d taken out: %s", call.replica, err.message)
            err = EngineError(err.status_code, f"engine replica {call.replica} failed and was taken out "
                              f"({err.message}); retry the call: the rollout moves to a healthy replica")
        if taken_out or not err.retryable or call.retries >= self.config.max_retries:
            self._record(call, None, err.status_code, err.message)
            raise err
        await asyncio.sleep(self.config.retry_backoff * 2**call.retries)
        call.retries += 1

    async def complete(self, kind: CallKind, body: dict[str, Any], rollout_id: str, attempt_id: str,
                       origin: CallOrigin | None = None, attributes: dict[str, Any] | None = None) -> dict[str, Any]:
        """Answer a non-streaming call for an attempt; raises :class:`EngineError`
        (after retries) or :class:`GatewayPausedError`. ``origin``: the agent that made
        the call and its span (:mod:`.origin`), recorded on the call's span, as are
        ``attributes``."""
        mode = await self.mode_of(rollout_id)
        await self.admission.admit()
        call: InflightCall | None = None
        try:
            call = self._begin(kind, body, mode, rollout_id, attempt_id, stream=False, origin=origin)
            call.attributes.update(attributes or {})
            send = self._sender(kind, call)
            while True:
                try:
                    self._place(call)
                    async with asyncio.timeout(self.config.request_timeout):
                        response = await send(call.request, replica=call.replica)
                    break
                except TimeoutError:
                    await self._backoff_or_raise(call, _timeout_error(self.config.request_timeout))
                except EngineError as exc:
                    await self._backoff_or_raise(call, exc)
            self._record(call, response, 200, None)
            return response
        finally:
            if call is not None:
                self._release(call)
            self.admission.exit()

    async def open_stream(
        self, kind: CallKind, body: dict[str, Any], rollout_id: str, attempt_id: str, origin: CallOrigin | None = None
    ) -> AsyncIterator[bytes]:
        """Start a streaming call: returns once the engine sent its first chunk (so an
        error before that still gets a proper status), then yields SSE bytes."""
        chunks = await self.open_chunks(kind, body, rollout_id, attempt_id, origin,
                                        hide_usage="stream_options" not in body)
        return sse_stream(chunks)

    async def open_chunks(
        self, kind: CallKind, body: dict[str, Any], rollout_id: str, attempt_id: str,
        origin: CallOrigin | None = None, attributes: dict[str, Any] | None = None, *, hide_usage: bool = False,
    ) -> AsyncIterator[dict[str, Any]]:
        """:meth:`open_stream`, yielding the chunks as dicts (an engine error after the
        first chunk comes as a last ``{"error": ...}`` item); for APIs the gateway
        translates (the Responses API). ``attributes`` go on the call's span."""
        mode = await self.mode_of(rollout_id)
        await self.admission.admit()
        call: InflightCall | None = None
        try:
            call = self._begin(kind, body, mode, rollout_id, attempt_id, stream=True, origin=origin)
            call.attributes.update(attributes or {})
            start = self._sender(kind, call, stream=True)
            while True:
                try:
                    self._place(call)
                    chunks = start(call.request, replica=call.replica)
                except EngineError as exc:  # a request refused before any chunk (e.g. a bad tool_choice)
                    await self._backoff_or_raise(call, exc)
                    continue
                try:
                    async with asyncio.timeout(self.config.request_timeout):
                        first = await anext(chunks)
                    break
                except StopAsyncIteration:
                    first = None
                    break
                except (TimeoutError, EngineError) as exc:
                    await _aclose(chunks)
                    err = exc if isinstance(exc, EngineError) else _timeout_error(self.config.request_timeout)
                    await self._backoff_or_raise(call, err)
        except BaseException:
            if call is not None:
                self._release(call)
            self.admission.exit()
            raise
        return self._relay(call, first, chunks, hide_usage=hide_usage)

    async def _relay(
        self,
        call: InflightCall,
        first: dict[str, Any] | None,
        chunks: AsyncIterator[dict[str, Any]],
        *,
        hide_usage: bool,
    ) -> AsyncIterator[dict[str, Any]]:
        """The chunks for the agent, one by one; the reassembled answer is recorded."""
        assembler = StreamAssembler()
        status, error = 200, None
        try:
            if first is not None:
                assembler.add(first)
                if not (hide_usage and _usage_only(first)):
                    yield first
                while True:
                    try:
                        async with asyncio.timeout(self.config.request_timeout):
                            chunk = await anext(chunks)
                    except StopAsyncIteration:
                        break
                    assembler.add(chunk)
                    if not (hide_usage and _usage_only(chunk)):
                        yield chunk
        except (EngineError, TimeoutError) as exc:
            err = exc if isinstance(exc, EngineError) else _timeout_error(self.config.request_timeout)
            if err.replica_down and self.placement.mark_down(call.replica, err.message):
                logger.warning("engine replica %d taken out mid-stream: %s", call.replica, err.message)
            status, error = err.status_code, err.message
            yield err.body
        except BaseException as exc:  # the agent went away (or we are shutting down)
            status, error = 499, f"stream interrupted: {type(exc).__name__}"
            raise
        finally:
            await _aclose(chunks)
            self._release(call)
            self._record(call, assembler.result(), status, error)
            self.admission.exit()

    def _sender(self, kind: CallKind, call: InflightCall, *, stream: bool = False) -> Callable[..., Any]:
        """What answers a call: the engine, or for chat on an engine with a tokenizer, the
        gateway's own templating over its token-id completions (:mod:`agentbolt.engines.token_chat`)."""
        e, chat = self.engine, self.token_chat
        if kind != "chat":
            return e.stream_completions if stream else e.completions
        if chat is None:
            return e.stream_chat_completions if stream else e.chat_completions
        return functools.partial(chat.stream if stream else chat.complete,
                                 attempt=(call.rollout_id, call.attempt_id), notes=call.attributes)

    async def models(self) -> dict[str, Any]:
        return await self.engine.models()

    def _record(self, call: InflightCall, response: dict[str, Any] | None, status: int, error: str | None) -> None:
        latency = time.perf_counter() - call.t0
        version = call.version
        if response is not None and type(response.get("policy_version")) is int:
            version = response["policy_version"]  # the engine knows best which weights answered
        self.recorder.add(
            CallRecord(
                rollout_id=call.rollout_id,
                attempt_id=call.attempt_id,
                request=call.request,
                response=response,
                status_code=status,
                engine=self.engine.name,
                replica=call.replica,
                policy_version=version,
                start_time=call.wall0,
                end_time=call.wall0 + latency,
                latency_ms=latency * 1000.0,
                streamed=call.streamed,
                retries=call.retries,
                error=error,
                origin=call.origin,
                attributes=call.attributes,
            )
        )


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _remember(cache: dict[str, Any], key: str, value: Any, limit: int) -> None:
    if len(cache) >= limit:
        cache.pop(next(iter(cache)))
    cache[key] = value


def _usage_only(chunk: dict[str, Any]) -> bool:
    return not chunk.get("choices") and chunk.get("usage") is not None


class _GatewayTimeout(EngineError):
    """The gateway's own ``request_timeout``: a slow answer, not a replica that is down."""

    @property
    def replica_down(self) -> bool:
        return False


def _timeout_error(seconds: float) -> EngineError:
    return _GatewayTimeout(504, f"the engine did not answer within {seconds:g} s (GatewayConfig.request_timeout)")


async def _aclose(chunks: AsyncIterator[Any]) -> None:
    if isinstance(chunks, AsyncGenerator):  # an engine's stream; a plain iterator has nothing to close
        try:
            await chunks.aclose()
        except Exception:
            logger.debug("closing an engine stream failed", exc_info=True)
