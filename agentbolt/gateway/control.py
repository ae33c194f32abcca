"""What a trainer uses to put new weights into the engine that serves its rollouts.

A weight update is: pause the gateway (new calls get 429 and retry), wait until no call
is in flight, load the weights into the engine (which bumps its policy version, so every
later token carries the new one), resume — always, even when the load fails.

* :class:`LocalGatewayControl` — the :class:`~agentbolt.gateway.Gateway` object is in
  this process (the in-process strategy serves it from a background thread). It may be
  awaited from any event loop: pause/resume are flag writes and draining polls.
* :class:`RemoteGateway` — the gateway is in a server process; the same steps go
  through the admin route ``POST /v1/gateway/weights`` (tensors as safetensors bytes,
  or a LoRA directory the server can read).

A weight update may also come in parts (a sharded trainer's full weights, one group at a
time: :meth:`~GatewayControl.load_weight_stream`, :mod:`agentbolt.gateway.weight_stream`):
paused and drained once, each part loaded, the version bumped at the commit — through
``/v1/gateway/weights/streams`` for a gateway in a server.

Both wait for the gateway's span writer (:meth:`~GatewayControl.flush`: in this process
directly, in a server through ``POST /v1/gateway/flush``), and reach the engine directly
for what a trainer checks before and after it publishes: ``completions`` (a probe, part
of no rollout: ``POST /v1/gateway/completions``) and ``rebase_loras`` (the weights
served now become the base of the next LoRA: ``POST /v1/gateway/rebase``).

::

    control = RemoteGateway(server_url, token=admin_token)   # or LocalGatewayControl(gateway)
    version = await control.update_weights(lora=peft_model)  # paused, drained, loaded, resumed
    await control.aclose()

``policy_version()`` is an async method on both (the remote one asks the server).
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import AsyncIterable, Mapping
from typing import TYPE_CHECKING, Any

from agentbolt.engines.engine import Engine, EngineError
from agentbolt.engines.weight_update import WeightUpdate
from agentbolt.gateway.weight_stream import LocalWeightStream, WeightStream

if TYPE_CHECKING:
    import httpx

    from agentbolt.gateway.gateway import Gateway

__all__ = ["COMPLETIONS_ROUTE", "FLUSH_ROUTE", "REBASE_ROUTE", "WEIGHTS_ROUTE", "WEIGHT_STREAMS_ROUTE",
           "GatewayControl", "LocalGatewayControl", "RemoteGateway", "RemoteWeightStream"]

WEIGHTS_ROUTE = "/v1/gateway/weights"
WEIGHT_STREAMS_ROUTE = "/v1/gateway/weights/streams"
REBASE_ROUTE = "/v1/gateway/rebase"
COMPLETIONS_ROUTE = "/v1/gateway/completions"
FLUSH_ROUTE = "/v1/gateway/flush"

_POLL_MIN, _POLL_MAX = 0.005, 0.05


class GatewayControl(abc.ABC):
    """Pause, drain, update weights, resume — for a gateway here or in a server."""

    #: the server the gateway is mounted in (``None`` when unknown / not served)
    server_url: str | None = None

    @property
    def engine(self) -> Engine | None:
        """The engine object, when it is in this process (an algorithm may then copy its
        weights or call it directly); ``None`` when it serves from another process."""
        return None

    @abc.abstractmethod
    async def status(self) -> dict[str, Any]:
        """The gateway's status: ``paused``, ``in_flight``, ``engine``, ``policy_version``..."""

    async def policy_version(self) -> int | None:
        """The version of the weights the engine serves now (``None`` if it does not know)."""
        return (await self.status()).get("policy_version")

    @abc.abstractmethod
    async def load_weights(self, update: WeightUpdate, *, version: int | None = None,
                           drain_timeout: float = 120.0) -> int:
        """Pause, wait up to ``drain_timeout`` s for calls in flight, load ``update`` into the
        engine, resume (always); return the policy version now served.

        Raises TimeoutError when calls are still in flight after ``drain_timeout`` (nothing
        is loaded), ValueError for weights the engine refuses, EngineError(501) for an
        engine that cannot load weights.
        """

    async def update_weights(
        self,
        *,
        state_dict: Mapping[str, Any] | None = None,
        lora: Any = None,
        lora_scale: float | None = None,
        lora_path: str | None = None,
        version: int | None = None,
        drain_timeout: float = 120.0,
    ) -> int:
        """:meth:`load_weights` spelled with keywords: the fields of the
        :class:`~agentbolt.engines.weight_update.WeightUpdate` it loads."""
        update = WeightUpdate(state_dict, lora=lora, lora_scale=lora_scale, lora_path=lora_path)
        return await self.load_weights(update, version=version, drain_timeout=drain_timeout)

    async def open_weight_stream(self, *, drain_timeout: float = 120.0) -> WeightStream:
        """Pause, wait up to ``drain_timeout`` s for calls in flight, and open an update in
        parts (:mod:`agentbolt.gateway.weight_stream`): the gateway holds every call until
        the stream is committed or aborted."""
        raise NotImplementedError(f"{type(self).__name__} cannot send an update in parts: publish the whole update "
                                  "with load_weights")

    async def load_weight_stream(self, parts: AsyncIterable[Mapping[str, Any]], *, version: int | None = None,
                                 drain_timeout: float = 120.0) -> int:
        """Load an update in parts (partial state dicts, each loaded as it comes and not
        kept) and serve it as ``version``; return the version now served. No call is
        answered from the first part to the commit. When a part is refused or ``parts``
        raises, the stream is aborted and the error raised: with no part loaded the engine
        serves its old weights; with some, it answers no call until an update completes
        (see :mod:`agentbolt.gateway.weight_stream`)."""
        stream = await self.open_weight_stream(drain_timeout=drain_timeout)
        try:
            async for part in parts:
                await stream.send(part)
                del part  # not held while the next part is made
            return await stream.commit(version)
        except BaseException:
            await stream.abort()
            raise

    async def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        """A ``/v1/completions`` call straight to the engine, part of no rollout and not
        recorded: a trainer's probe of what the engine serves (token ids in, logprobs out)."""
        engine = self.engine
        if engine is None:
            raise NotImplementedError(f"{type(self).__name__} reaches no engine for a direct call")
        return await engine.completions(body)

    async def rebase_loras(self) -> None:
        """Make the weights the engine serves now the base of the next LoRA (see
        :meth:`~agentbolt.engines.engine.Engine.rebase_loras`); EngineError(501) for an
        engine that cannot."""
        engine = self.engine
        if engine is None:
            raise NotImplementedError(f"{type(self).__name__} reaches no engine to rebase")
        engine.rebase_loras()

    @abc.abstractmethod
    async def flush(self) -> None:
        """Wait until the span of every call finished so far is in the store (the gateway
        writes them in the background): a reader of the store waits on this, not on a timer."""

    async def aclose(self) -> None:
        """Release connections. Idempotent."""


class LocalGatewayControl(GatewayControl):
    """Control a :class:`Gateway` of this process, from any event loop.

    The gateway's own loop may be another thread's (a server in a background thread):
    pause/resume are plain flag writes, draining polls ``gateway.in_flight``, and the
    engines' ``load_weights`` are safe to await from another loop. Run one update at a
    time per gateway (the HTTP route serialises the updates it receives).
    """

    def __init__(self, gateway: Gateway, *, server_url: str | None = None) -> None:
        self.gateway = gateway
        self.server_url = server_url

    @property
    def engine(self) -> Engine:
        return self.gateway.engine

    async def status(self) -> dict[str, Any]:
        return self.gateway.status()

    async def policy_version(self) -> int | None:
        return self.gateway.engine.policy_version

    async def flush(self) -> None:
        await self.gateway.flush()

    async def drain(self, timeout: float) -> None:
        """Wait until no call is in flight (seen twice, a poll apart: a call that passed the
        pause check just before the flag was written is counted by then)."""
        deadline = time.monotonic() + timeout
        delay, idle_seen = _POLL_MIN, False
        while True:
            if self.gateway.in_flight == 0:
                if idle_seen:
                    return
                idle_seen = True
            else:
                idle_seen = False
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"{self.gateway.in_flight} model call(s) still in flight after {timeout:g} s: the weights were "
                    "not updated and the gateway is resumed; raise drain_timeout, or lower the agents' max_tokens"
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, _POLL_MAX)

    async def open_weight_stream(self, *, drain_timeout: float = 120.0) -> WeightStream:
        return await LocalWeightStream.open(self.gateway, self.gateway.engine, self.drain, drain_timeout)

    async def load_weights(self, update: WeightUpdate, *, version: int | None = None,
                           drain_timeout: float = 120.0) -> int:
        engine = self.gateway.engine
        if not engine.supports_weight_updates:  # say so before turning calls away
            return await engine.load_weights(update, version=version)
        self.gateway.pause()
        try:
            await self.drain(drain_timeout)
            return await engine.load_weights(update, version=version)
        finally:
            self.gateway.resume()


class RemoteGateway(GatewayControl):
    """Control the gateway of the agentbolt server at ``server_url`` (admin ``token``).

    Tensors travel as one safetensors body (a 135M-parameter model in fp32 is ~540 MB;
    the server accepts up to its ``max_weights_bytes``); ``lora_path`` is sent as a path
    the server reads (for vLLM: a path the vLLM servers can read). ``timeout`` is per
    request, upload and swap included.
    """

    server_url: str  # always known: the server this controls

    def __init__(self, server_url: str, token: str | None = None, *, timeout: float = 600.0) -> None:
        self.server_url = server_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        import httpx

        if self._client is None:
            headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
            self._client = httpx.AsyncClient(base_url=self.server_url, headers=headers, timeout=self.timeout)
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def status(self) -> dict[str, Any]:
        response = await self._http().get("/v1/gateway/status")
        _raise_for(response)
        return response.json()

    async def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        response = await self._http().post(COMPLETIONS_ROUTE, json=body)
        _raise_for(response)
        return dict(response.json())

    async def rebase_loras(self) -> None:
        _raise_for(await self._http().post(REBASE_ROUTE))

    async def flush(self) -> None:
        response = await self._http().post(FLUSH_ROUTE)
        if response.status_code == 404:  # a server without a gateway: none of its spans can be on their way
            return
        _raise_for(response)

    async def open_weight_stream(self, *, drain_timeout: float = 120.0) -> WeightStream:
        status = await self.status()
        if not status.get("weight_streams"):
            raise EngineError(501, f"the server's {status.get('engine')} engine cannot load an update in parts (or "
                                   "the server predates them): a sharded policy's full weights can only be published "
                                   "to the transformers engine of an agentbolt server that takes them")
        response = await self._http().post(WEIGHT_STREAMS_ROUTE, params={"drain_timeout": drain_timeout})
        _raise_for(response)
        return RemoteWeightStream(self._http(), str(response.json()["stream"]))

    async def load_weights(self, update: WeightUpdate, *, version: int | None = None,
                           drain_timeout: float = 120.0) -> int:
        state_dict, lora, lora_scale, lora_path = update.state_dict, update.lora, update.lora_scale, update.lora_path
        given = list(update.formats)
        if len(given) != 1:
            raise ValueError(
                "RemoteGateway.update_weights takes exactly one of state_dict=, lora=, lora_path= (got "
                f"{given or 'none'})"
            )
        params: dict[str, Any] = {"drain_timeout": drain_timeout}
        if version is not None:
            params["version"] = version
        if lora_path is not None:
            response = await self._http().post(
                WEIGHTS_ROUTE, params=params, json={"lora_path": str(lora_path), "version": version}
            )
        else:
            if lora is not None:
                from agentbolt.engines.local.weights import lora_from

                tensors, scale = lora_from(lora, lora_scale)
                params.update(kind="lora", lora_scale=scale)
            else:
                assert state_dict is not None
                tensors = dict(state_dict)
                params["kind"] = "full"
            body = await asyncio.to_thread(safetensors_bytes, tensors)
            response = await self._http().post(
                WEIGHTS_ROUTE, params=params, content=body, headers={"content-type": "application/octet-stream"}
            )
        _raise_for(response)
        return int(response.json()["policy_version"])


class RemoteWeightStream(WeightStream):
    """An update in parts held open by the server (``POST /v1/gateway/weights/streams``):
    each part travels as one safetensors body (``.../streams/{id}/parts``), then
    ``.../commit`` or ``DELETE .../streams/{id}``. The server aborts a stream that hears
    nothing for its ``idle_s`` (a trainer that went away)."""

    def __init__(self, http: httpx.AsyncClient, stream_id: str) -> None:
        super().__init__()
        self.http = http
        self.id = stream_id

    async def send(self, state_dict: Mapping[str, Any]) -> None:
        self._check_open()
        body = await asyncio.to_thread(safetensors_bytes, state_dict)
        response = await self.http.post(f"{WEIGHT_STREAMS_ROUTE}/{self.id}/parts", content=body,
                                        headers={"content-type": "application/octet-stream"})
        del body
        _raise_for(response)
        self.parts += 1

    async def commit(self, version: int | None = None) -> int:
        self._check_open()
        self.closed = True
        params = {} if version is None else {"version": version}
        response = await self.http.post(f"{WEIGHT_STREAMS_ROUTE}/{self.id}/commit", params=params)
        _raise_for(response)
        return int(response.json()["policy_version"])

    async def abort(self) -> None:
        if self.closed:
            return
        self.closed = True
        response = await self.http.delete(f"{WEIGHT_STREAMS_ROUTE}/{self.id}")
        if response.status_code != 404:  # 404: the server closed it already (idle)
            _raise_for(response)


def safetensors_bytes(tensors: Mapping[str, Any]) -> bytes:
    """``tensors`` as one safetensors blob: detached, on CPU, contiguous, and tied
    weights (one storage under two names, which safetensors refuses) copied apart."""
    from safetensors.torch import save

    out, storages = {}, set()
    for name, tensor in tensors.items():
        t = tensor.detach().to("cpu").contiguous()
        ptr = t.untyped_storage().data_ptr()
        if ptr in storages or t.untyped_storage().nbytes() != t.numel() * t.element_size():
            t = t.clone()
        storages.add(t.untyped_storage().data_ptr())
        out[name] = t
    return save(out)


def _raise_for(response: httpx.Response) -> None:
    """The server's answer as the exception a local update would raise."""
    if response.status_code < 400:
        return
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    message = str(error.get("message")) if isinstance(error, dict) else response.text[:500]
    code = error.get("code") if isinstance(error, dict) else None
    status = response.status_code
    if status in (401, 403):
        from agentbolt.store.errors import error_from_status

        raise error_from_status(status, code if isinstance(code, str) else None, message)
    if status == 400:
        raise ValueError(message)
    if status == 504 and code == "drain_timeout":
        raise TimeoutError(message)
    raise EngineError(status, message, body if isinstance(error, dict) else None)
