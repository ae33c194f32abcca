"""Engines that forward to a model server over HTTP.

* :class:`OpenAIEngine` — any OpenAI-compatible server (OpenAI, Azure's OpenAI-style
  endpoints, LiteLLM, llama.cpp, Ollama...). They return no token ids, so spans say
  ``token_ids_source = "none"`` and RL adapters refuse such calls (APO and SFT can use them).
* :class:`VLLMEngine` — vLLM's OpenAI server, asked for token ids with
  ``"return_token_ids": true``. vLLM answers in the format the gateway records:
  top-level ``prompt_token_ids``, ``choices[i].token_ids``, standard logprobs; streams
  carry ``prompt_token_ids`` on the first chunk and each chunk's ``choices[i].token_ids``.
  This is the GPU path; it is tested here against a fake of that format, not against a
  running vLLM.

Several base URLs make several replicas (a rollout sticks to one).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import orjson

try:
    import aiohttp
except ImportError:  # pragma: no cover - a core dependency; checked when an engine starts
    aiohttp = None  # type: ignore[assignment]

from agentbolt.gateway.engine import Engine, EngineError
from agentbolt.gateway.streaming import iter_sse_data

__all__ = ["OpenAIEngine", "VLLMEngine"]


class OpenAIEngine(Engine):
    """An OpenAI-compatible server at ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``),
    or one replica per URL in a list.

    ``model`` — when given, every call is sent for this model whatever the agent named
    (agents often hard-code a model name). ``api_key`` — sent as a bearer token.
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
    ) -> None:
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if not urls:
            raise ValueError("give at least one base URL, e.g. 'http://127.0.0.1:8000/v1'")
        self.base_urls = [u.rstrip("/") for u in urls]
        self.model = model
        self.timeout = timeout
        self.max_connections = max_connections
        self._headers = {"content-type": "application/json", **(headers or {})}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._sessions: list[aiohttp.ClientSession] | None = None

    @property
    def n_replicas(self) -> int:
        return len(self.base_urls)

    async def start(self) -> None:
        # aiohttp rather than httpx here: on the proxy's hot path its C parser and
        # simpler pool cost a fraction of httpx's per-request CPU
        if aiohttp is None:
            raise RuntimeError("the HTTP engines need aiohttp: pip install aiohttp")
        if self._sessions is None:
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
        for session in sessions or ():
            await session.close()

    def _client(self, replica: int) -> tuple[aiohttp.ClientSession, str]:
        if self._sessions is None:
            raise RuntimeError(f"{type(self).__name__} is not started: await engine.start() first")
        i = replica % len(self._sessions)
        return self._sessions[i], self.base_urls[i]

    def _body(self, body: dict[str, Any]) -> bytes:
        if self.model is not None and body.get("model") != self.model:
            body = {**body, "model": self.model}
        return orjson.dumps(body)

    # --------------------------------------------------------------- non-streaming
    async def _post(self, path: str, body: dict[str, Any], replica: int) -> dict[str, Any]:
        session, base = self._client(replica)
        try:
            async with session.post(base + path, data=self._body(body)) as resp:
                status, content = resp.status, await resp.read()
        except TimeoutError as exc:
            raise EngineError(504, f"the engine at {base} timed out after {self.timeout:g} s") from exc
        except aiohttp.ClientError as exc:
            raise EngineError(502, f"could not reach the engine at {base}: {exc!r}") from exc
        if status >= 400:
            raise _error_of(status, content, base)
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
                    raise _error_of(resp.status, await resp.read(), base)
                async for payload in iter_sse_data(_lines(resp.content)):
                    if "error" in payload and "choices" not in payload:
                        raise _error_of(_status_of(payload), orjson.dumps(payload), base)
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
        session, base = self._client(0)
        try:
            async with session.get(base + "/models") as resp:
                status, content = resp.status, await resp.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise EngineError(502, f"could not reach the engine at {base}: {exc!r}") from exc
        if status >= 400:
            raise _error_of(status, content, base)
        return orjson.loads(content)  # type: ignore[no-any-return]


class VLLMEngine(OpenAIEngine):
    """vLLM's OpenAI server (``vllm serve <model>``), returning token ids and logprobs.

    vLLM does not know about weight versions: after loading new weights into it, call
    :meth:`set_policy_version` so spans record the version that answered.
    """

    name = "vllm"
    returns_token_ids = True

    def __init__(self, base_url: str | Sequence[str], *, policy_version: int | None = None, **kw: Any) -> None:
        super().__init__(base_url, **kw)
        self._policy_version = policy_version

    @property
    def policy_version(self) -> int | None:
        return self._policy_version

    def set_policy_version(self, version: int | None) -> None:
        self._policy_version = version


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
