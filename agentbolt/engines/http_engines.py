"""Engines that forward to a model server over HTTP.

* :class:`OpenAIEngine` — any OpenAI-compatible server (OpenAI, Azure's OpenAI-style
  endpoints, LiteLLM, llama.cpp, Ollama...). They return no token ids, so spans say
  ``token_ids_source = "none"`` and RL adapters refuse such calls (APO and SFT can use them).
* :class:`VLLMEngine` — vLLM's OpenAI server, asked for token ids with
  ``"return_token_ids": true``. vLLM answers in the format the gateway records:
  top-level ``prompt_token_ids``, ``choices[i].token_ids``, standard logprobs; streams
  carry ``prompt_token_ids`` on the first chunk and each chunk's ``choices[i].token_ids``.
  This is the GPU path; it is tested here against a fake of that format, not against a
  running vLLM. It loads LoRAs at runtime (:meth:`VLLMEngine.load_weights`
  with ``lora_path=``), through vLLM's ``/v1/load_lora_adapter`` API.

Several base URLs make several replicas: the gateway pins each rollout to one, places
new rollouts by load and takes a replica that stops answering out until :meth:`probe`
finds it back (:mod:`agentbolt.gateway.placement`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Coroutine, Sequence
from typing import Any, TypeVar

import aiohttp
import orjson

from agentbolt.engines.chat_template import load_tokenizer
from agentbolt.engines.engine import Engine, EngineError
from agentbolt.engines.http1 import ConnectionFailedError, Http1Client, HttpAnswer
from agentbolt.engines.served_lora import ServedLora, lora_directory
from agentbolt.engines.served_names import ServedNames
from agentbolt.engines.sse import iter_sse_data
from agentbolt.engines.weight_update import WeightUpdate

__all__ = ["OpenAIEngine", "VLLMEngine"]

logger = logging.getLogger("agentbolt.gateway")

T = TypeVar("T")


class OpenAIEngine(Engine):
    """An OpenAI-compatible server at ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``),
    or one replica per URL in a list.

    ``model`` — when given, every call is sent for this model whatever the agent named
    (agents often hard-code a model name). ``api_key`` — sent as a bearer token.
    ``max_tokens`` — sent with a call that sets no limit (None: the server's default,
    for vLLM what the context leaves).
    """

    name = "openai"
    returns_token_ids = False

    def __init__(
        self,
        base_url: str | Sequence[str],
        *,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = 300.0,
        max_connections: int = 256,
        headers: dict[str, str] | None = None,
        max_tokens: int | None = None,
    ) -> None:
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if not urls:
            raise ValueError("give at least one base URL, e.g. 'http://127.0.0.1:8000/v1'")
        self.base_urls = [u.rstrip("/") for u in urls]
        self.model = model
        self.default_max_tokens = max_tokens
        self.timeout = timeout
        self.max_connections = max_connections
        self._headers = {"content-type": "application/json", **(headers or {})}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._sessions: list[aiohttp.ClientSession] | None = None  # streams
        self._callers: list[Http1Client] | None = None  # whole answers
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def n_replicas(self) -> int:
        return len(self.base_urls)

    async def start(self) -> None:
        # whole answers through the lean Http1Client (the proxy's hot path: a fifth of
        # aiohttp's CPU per call), streams through aiohttp (its C parser and simple pool
        # cost a fraction of httpx's)
        if self._sessions is None:
            self._loop = asyncio.get_running_loop()
            self._callers = [Http1Client(u, headers=self._headers, max_connections=self.max_connections)
                             for u in self.base_urls]
            self._sessions = [
                aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=self.max_connections),
                    timeout=aiohttp.ClientTimeout(total=self.timeout),
                    headers=self._headers,
                    auto_decompress=True,
                )
                for _ in self.base_urls
            ]

    async def close(self) -> None:
        sessions, self._sessions = self._sessions, None
        callers, self._callers = self._callers, None
        for session in sessions or ():
            await session.close()
        for caller in callers or ():
            await caller.close()

    def _client(self, replica: int) -> tuple[aiohttp.ClientSession, str]:
        if self._sessions is None:
            raise RuntimeError(f"{type(self).__name__} is not started: await engine.start() first")
        i = replica % len(self._sessions)
        return self._sessions[i], self.base_urls[i]

    async def _call(self, method: str, path: str, body: bytes, replica: int) -> HttpAnswer:
        """A whole answer from ``replica``; raises EngineError 504 after ``timeout``, 502 when
        the server cannot be reached."""
        if self._callers is None:
            raise RuntimeError(f"{type(self).__name__} is not started: await engine.start() first")
        i = replica % len(self._callers)
        try:
            async with asyncio.timeout(self.timeout):
                return await self._callers[i].request(method, path, body)
        except TimeoutError as exc:
            raise EngineError(504, f"the engine at {self.base_urls[i]} timed out after {self.timeout:g} s") from exc
        except ConnectionFailedError as exc:
            raise EngineError(502, f"could not reach the engine at {self.base_urls[i]}: {exc}") from exc

    def _served_model(self) -> str | None:
        """The model name every call is sent for (``None``: the agent's)."""
        return self.model

    def _body(self, body: dict[str, Any]) -> bytes:
        model = self._served_model()
        if model is not None and body.get("model") != model:
            body = {**body, "model": model}
        if self.default_max_tokens is not None and body.get("max_tokens") is None and body.get(
                "max_completion_tokens") is None:
            body = {**body, "max_tokens": self.default_max_tokens}
        return orjson.dumps(body)

    async def _on_own_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop the sessions belong to (aiohttp sessions are bound to
        one loop), so control calls may be awaited from another thread's loop."""
        loop = self._loop
        if loop is None or loop is asyncio.get_running_loop() or loop.is_closed():
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    # --------------------------------------------------------------- non-streaming
    async def _post(self, path: str, body: dict[str, Any], replica: int) -> dict[str, Any]:
        status, content = await self._call("POST", path, self._body(body), replica)
        base = self.base_urls[replica % self.n_replicas]
        if status >= 400:
            raise self._error(status, content, base)
        try:
            data = orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            raise EngineError(502, f"the engine at {base} sent invalid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise EngineError(502, f"the engine at {base} sent {type(data).__name__}, not a JSON object")
        return data

    async def chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        return await self._post("/chat/completions", body, replica)

    async def completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        return await self._post("/completions", body, replica)

    # --------------------------------------------------------------- streaming
    async def _stream(self, path: str, body: dict[str, Any], replica: int) -> AsyncIterator[dict[str, Any]]:
        session, base = self._client(replica)
        try:
            async with session.post(base + path, data=self._body({**body, "stream": True})) as resp:
                if resp.status >= 400:
                    raise self._error(resp.status, await resp.read(), base)
                async for payload in iter_sse_data(_lines(resp.content)):
                    failed = self._stream_error(payload, base)
                    if failed is not None:
                        raise failed
                    yield payload
        except TimeoutError as exc:
            raise EngineError(504, f"the engine at {base} timed out after {self.timeout:g} s") from exc
        except aiohttp.ClientError as exc:
            raise EngineError(502, f"lost the engine at {base}: {exc!r}") from exc

    def stream_chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        return self._stream("/chat/completions", body, replica)

    def stream_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        return self._stream("/completions", body, replica)

    async def models(self) -> dict[str, Any]:
        return await self._models(0)

    async def probe(self, replica: int) -> None:
        """``GET /models`` on ``replica``: it answers, or an EngineError says why not."""
        await self._on_own_loop(self._models(replica))

    async def _models(self, replica: int) -> dict[str, Any]:
        status, content = await self._call("GET", "/models", b"", replica)
        if status >= 400:
            raise self._error(status, content, self.base_urls[replica % self.n_replicas])
        return orjson.loads(content)

    async def _send(self, replica: int, path: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
        """POST ``body`` (JSON as is) to ``path`` on ``replica``: the status and the answer;
        a server that cannot be reached is EngineError(502)."""
        session, base = self._client(replica)
        try:
            async with session.post(base + path, data=None if body is None else orjson.dumps(body)) as resp:
                return resp.status, await resp.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise EngineError(502, f"could not reach the {self.name} server at {base}: {exc!r}") from exc

    def _error(self, status: int, content: bytes, where: str) -> EngineError:
        """The EngineError for an HTTP error answer of the server at ``where``."""
        return _error_of(status, content, where)

    def _stream_error(self, payload: dict[str, Any], where: str) -> EngineError | None:
        """The EngineError a streamed event stands for (None: a chunk of the answer)."""
        if "error" in payload and "choices" not in payload:
            return _error_of(_status_of(payload), orjson.dumps(payload), where)
        return None


class VLLMEngine(OpenAIEngine):
    """vLLM's OpenAI server (``vllm serve <model>``), returning token ids and logprobs.

    Weight updates are LoRAs loaded at runtime: :meth:`load_weights` with
    ``lora_path=`` (a peft LoRA directory every vLLM replica can read) calls
    ``POST /v1/load_lora_adapter`` on each replica, sends later calls for that LoRA
    (``model = <lora name>``), unloads the previous LoRA and bumps ``policy_version``.
    The vLLM servers must run with ``--enable-lora`` (and ``--max-lora-rank`` >= the
    LoRA's rank) and the environment ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``.
    ``lora_name`` prefixes the LoRA names (``<lora_name>-v<version>``).
    Weights loaded by other means: call :meth:`set_policy_version` so spans record the
    version that answered.

    ``tokenizer`` (the served model's tokenizer, or its directory / Hub name): the gateway
    then renders chat calls with it, sends the prompt token ids to vLLM's
    ``/v1/completions``, parses tool calls with ``tool_parser`` (default: read from the chat
    template) and builds each prompt from the attempt's earlier token ids. Without it,
    chat calls go to vLLM's ``/v1/chat/completions`` as sent (vLLM templates and parses).
    ``context_length`` (the server's ``--max-model-len``; with ``tokenizer``): a prompt
    that leaves no room in it is refused by the gateway (400) without a call to vLLM.
    """

    name = "vllm"
    returns_token_ids = True
    supports_weight_updates = True
    weight_formats = ("lora_path",)

    def __init__(self, base_url: str | Sequence[str], *, policy_version: int | None = None,
                 lora_name: str = "agentbolt-lora", tokenizer: Any = None, tool_parser: str | None = None,
                 context_length: int | None = None, **kw: Any) -> None:
        super().__init__(base_url, **kw)
        self.context_length = context_length
        # with the policy's tokenizer the gateway templates chats itself and sends token ids to
        # /v1/completions (tool calls parsed by agentbolt, token-exact history)
        self.tokenizer = load_tokenizer(tokenizer) if tokenizer is not None else None
        self.tool_parser = tool_parser
        self._policy_version = policy_version
        #: the runtime LoRA the replicas serve, loaded on all of them together
        self.loras = ServedLora(self, lora_name, "vLLM")
        self._names: ServedNames | None = None
        self._names_retry_at = 0.0

    @property
    def policy_version(self) -> int | None:
        return self._policy_version

    @property
    def lora_name(self) -> str | None:
        """The runtime LoRA calls are now sent for (``None``: the base model)."""
        return self.loras.name

    def where(self, replica: int) -> str:
        return self.base_urls[replica % self.n_replicas]

    def set_policy_version(self, version: int | None) -> None:
        self._policy_version = version

    def _served_model(self) -> str | None:
        return self.loras.name if self.loras.name is not None else self.model

    # An engine built without model= serves agents that name any model ("policy", the
    # default of gateway_llm(), or a hard-coded "gpt-4o"): a name vLLM does not serve is
    # sent for the server's own base model, learnt once from /v1/models.
    def _body(self, body: dict[str, Any]) -> bytes:
        names = self._names
        if self.loras.name is None and self.model is None and names is not None:
            body = names.route(body)
        return super()._body(body)

    async def _learn_names(self) -> None:
        """Read ``/v1/models`` once; if it cannot be read, pass names through and ask
        again after 30 s (a server still starting), with a warning the first time."""
        if self.model is not None or self._names is not None:
            return
        now = time.monotonic()
        if now < self._names_retry_at:
            return
        try:
            self._names = ServedNames.of(await self.models())
        except (EngineError, ValueError) as exc:
            if self._names_retry_at == 0.0:
                logger.warning("could not read the models %s serves (%s): model names are passed through as "
                               "the agent sends them; give the engine model=<served name> to fix one",
                               self.base_urls[0], exc)
            self._names_retry_at = now + 30.0
            return
        logger.info("vLLM at %s serves %s; calls for other model names go to %r", self.base_urls[0],
                    sorted(self._names.names), self._names.base)

    async def chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        await self._learn_names()
        self.loras.check_current(replica)
        return await super().chat_completions(body, replica=replica)

    async def completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        await self._learn_names()
        self.loras.check_current(replica)
        return await super().completions(body, replica=replica)

    async def stream_chat_completions(self, body: dict[str, Any], *, replica: int = 0,
                                      ) -> AsyncIterator[dict[str, Any]]:
        await self._learn_names()
        self.loras.check_current(replica)
        async for chunk in super().stream_chat_completions(body, replica=replica):
            yield chunk

    async def stream_completions(self, body: dict[str, Any], *, replica: int = 0,
                                 ) -> AsyncIterator[dict[str, Any]]:
        await self._learn_names()
        self.loras.check_current(replica)
        async for chunk in super().stream_completions(body, replica=replica):
            yield chunk

    async def load_weights(self, update: WeightUpdate, *, version: int | None = None) -> int:
        """Load the LoRA at ``update.lora_path`` on every replica and serve it.

        ``state_dict`` / ``lora`` objects raise EngineError(501): vLLM reads LoRAs from
        a directory, and full-weight sync (NCCL) is not implemented. If a replica refuses
        the LoRA, it is unloaded from the others and the previous one stays served. A
        replica that cannot be reached (while others load it) is skipped and takes no calls
        until :meth:`probe` finds it back and loads the LoRA there.
        """
        path = lora_directory(update, self.name, "vLLM", "NCCL")
        return await self._on_own_loop(self._load_lora(path, version))

    async def _load_lora(self, path: str, version: int | None) -> int:
        new_version = version if version is not None else (self._policy_version or 0) + 1
        await self.loras.load(path, new_version)
        self._policy_version = new_version
        return new_version

    async def probe(self, replica: int) -> None:
        """``GET /models`` on ``replica``; if it does not list the LoRA now served (it was
        restarted, or missed the load), load the LoRA there first."""
        await self._on_own_loop(self._probe(replica % self.n_replicas))

    async def _probe(self, replica: int) -> None:
        listed = {m.get("id") for m in (await self._models(replica)).get("data") or () if isinstance(m, dict)}
        name, path = self.loras.name, self.loras.path
        if name is not None and path is not None and name not in listed:
            await self.load_lora(replica, name, path)
        self.loras.restored(replica)

    async def load_lora(self, replica: int, name: str, path: str) -> None:
        await self._lora_call(replica, "/load_lora_adapter", {"lora_name": name, "lora_path": path})

    async def unload_lora(self, replica: int, name: str) -> None:
        await self._lora_call(replica, "/unload_lora_adapter", {"lora_name": name})

    async def _lora_call(self, replica: int, path: str, body: dict[str, Any]) -> None:
        status, content = await self._send(replica, path, body)
        base = self.where(replica)
        if status == 404 and content.replace(b" ", b"") == b'{"detail":"NotFound"}':  # FastAPI: no such route
            raise EngineError(
                501,
                f"the vLLM server at {base} has no {path} route: start it with --enable-lora and the environment "
                "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True",
            )
        if status >= 400:
            err = _error_of(status, content, base)
            raise EngineError(err.status_code, f"vLLM at {base} refused {path} {body}: {err.message}", err.body)


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[str]:
    async for line in content:
        yield line.decode("utf-8")


def _status_of(payload: dict[str, Any]) -> int:
    code = (payload.get("error") or {}).get("code") if isinstance(payload.get("error"), dict) else None
    return code if isinstance(code, int) and 400 <= code < 600 else 500


def _error_of(status: int, content: bytes, where: str) -> EngineError:
    """An EngineError carrying the server's OpenAI-style error body when it sent one."""
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = str(body["error"].get("message") or f"HTTP {status}")
        return EngineError(status, message, body)
    if isinstance(body, dict) and isinstance(body.get("message"), str):  # vLLM's older error shape
        return EngineError(status, body["message"])
    text = content[:500].decode("utf-8", "replace")
    return EngineError(status, f"the engine at {where} answered HTTP {status}: {text}")
