"""The textual gradient: a critic says what went wrong, an editor rewrites the prompt.

Everything APO sends to a model is in this file: the critic's and the editor's
prompts (:data:`CRITIC_SYSTEM`, :data:`CRITIC_USER`, :data:`EDITOR_SYSTEM`,
:data:`EDITOR_USER`), how a low-reward rollout is shown to the critic
(:func:`render_trace`), how the editor's reply is read (:func:`parse_template`), and the
two ways to reach a model:

* :class:`HttpChatModel` — any OpenAI-compatible endpoint (``LLM(endpoint, model,
  api_key)``): ``POST {endpoint}/chat/completions`` with httpx, retried with backoff on
  429, 5xx and connection errors;
* :class:`EngineChatModel` — the run's own engine, called in process (no rollout, no
  recorded span).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import httpx
import orjson

from agentbolt.adapters.calls import ModelCall
from agentbolt.algorithms.apo.placeholders import (
    PlaceholderError,
    check_edit,
    placeholders,
)
from agentbolt.types import LLM

if TYPE_CHECKING:
    from agentbolt.engines.engine import Engine

__all__ = [
    "CRITIC_SYSTEM",
    "CRITIC_USER",
    "EDITOR_RETRY",
    "EDITOR_SYSTEM",
    "EDITOR_USER",
    "ChatCallError",
    "ChatModel",
    "EditOutcome",
    "EngineChatModel",
    "HttpChatModel",
    "SupportsChat",
    "TextualGradient",
    "parse_template",
    "render_trace",
]

log = logging.getLogger("agentbolt.algorithms.apo")

T = TypeVar("T")

# ----------------------------------------------------------------------------- the prompts
CRITIC_SYSTEM = """\
You are an expert prompt engineer. An AI agent works from a prompt template, and you \
review how that template performed. You study execution traces of tasks on which the \
agent scored poorly and find which weaknesses of the prompt caused the failures. You do \
not rewrite the prompt yourself: you write precise, actionable feedback that another \
engineer will apply to the template."""

CRITIC_USER = """\
The agent fills the template below with each task's fields (the {name} placeholders, \
filled in by the program) and works from the result.

<current_template>
<<template>>
</current_template>

Below are <<n>> rollouts that received a low reward (higher is better; below \
<<threshold>> counts as a failure). Each shows the task input, the model calls the agent \
made (the messages sent and the model's answer) and the reward.

<<traces>>

Write your feedback in three parts:
1. Diagnosis: for each trace, what went wrong, citing it (e.g. "trace 2: the model \
answered ... although the task asked ...").
2. Causes: what in the template let these failures happen — a missing instruction or \
fact, an ambiguity, wrong emphasis, a missing or unclear output format, a misleading \
example.
3. Changes: a short list of concrete edits to the template that fix those causes \
without hurting the tasks it already handles. Generalise: do not hard-code the answers \
of these particular tasks.
Do not ask to rename, add or remove the {placeholders}. Be specific and concise (at most \
about 300 words)."""

EDITOR_SYSTEM = """\
You are an expert prompt engineer. You revise prompt templates by applying a reviewer's \
feedback, and you reply with the complete revised template and nothing else."""

EDITOR_USER = """\
Revise the prompt template below by applying the feedback.

<current_template>
<<template>>
</current_template>

<feedback>
<<critique>>
</feedback>

Rules:
- <<placeholder_rule>>
- The template uses Python str.format syntax: any other brace must be doubled ({{ and \
}}), e.g. in a JSON example.
- Keep what works; change what the feedback asks for. It stays the same kind of prompt, \
for the same agent, in the same language.
- Reply with the complete new template inside one fenced block (```), and nothing else \
inside the block."""

EDITOR_RETRY = """\
That template was rejected: <<error>>. Reply again with the complete corrected template \
in one fenced block."""


def _fill(text: str, **values: Any) -> str:
    """Put ``values`` at their ``<<name>>`` markers (the prompts contain braces, so no str.format)."""
    for name, value in values.items():
        text = text.replace(f"<<{name}>>", str(value))
    return text


def critic_messages(template: str, traces: Sequence[str], threshold: float) -> list[dict[str, str]]:
    """The critic's conversation: the template and the failing traces."""
    user = _fill(CRITIC_USER, template=template, n=len(traces), threshold=f"{threshold:g}",
                 traces="\n\n".join(traces))
    return [{"role": "system", "content": CRITIC_SYSTEM}, {"role": "user", "content": user}]


def editor_messages(template: str, critique: str) -> list[dict[str, str]]:
    """The editor's conversation: the template and the critique to apply."""
    fields = sorted(placeholders(template))
    if fields:
        rule = ("Keep every placeholder exactly as written, each at least once: "
                + ", ".join(f"{{{f}}}" for f in fields) + ". Do not add any other placeholder.")
    else:
        rule = "The template has no placeholders: do not add any."
    user = _fill(EDITOR_USER, template=template, critique=critique.strip(), placeholder_rule=rule)
    return [{"role": "system", "content": EDITOR_SYSTEM}, {"role": "user", "content": user}]


def parse_template(reply: str) -> str:
    """The template in an editor's reply: the text between the first and the last fence
    line when there are fences (so a template may itself contain fenced blocks), else the
    whole reply; surrounding blank space removed."""
    lines = reply.strip().splitlines()
    fences = [i for i, line in enumerate(lines) if line.lstrip().startswith("```")]
    if len(fences) >= 2:
        return "\n".join(lines[fences[0] + 1 : fences[-1]]).strip()
    return reply.strip()


# ----------------------------------------------------------------------------- traces
def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else orjson.dumps(content).decode()


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(value)


def _cut(text: str, limit: int) -> str:
    """``text`` shortened to ``limit`` characters by cutting its middle (the start says
    what was asked, the end how it ended)."""
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit} characters cut ...]\n"
    keep = max(limit - len(marker), 0)
    head = keep * 3 // 5
    return text[:head] + marker + text[len(text) - (keep - head):]


def render_trace(index: int, task: Any, calls: Sequence[ModelCall], reward: float | None, max_chars: int) -> str:
    """One rollout as the critic reads it: input, each model call (messages and answer),
    reward; the body cut to ``max_chars``."""
    lines = [f"Task input: {_json(task)}"]
    if not calls:
        lines.append("(the agent made no recorded model call)")
    for n, call in enumerate(calls, 1):
        who = f", agent {call.agent_name}" if call.agent_name else ""
        lines.append(f"Model call {n}{who}:")
        if call.messages is not None:
            for m in call.messages:
                text = _content_text(m.get("content"))
                if m.get("tool_calls"):
                    text += " [tool calls: " + _json(m["tool_calls"]) + "]"
                lines.append(f"  [{m.get('role', 'user')}] {text}")
        elif call.prompt is not None:
            lines.append(f"  [prompt] {_content_text(call.prompt)}")
        if call.failed:
            lines.append("  [answer] (the call failed)")
        else:
            answer = call.response_text or ""
            if call.tool_calls:
                answer += " [tool calls: " + _json(call.tool_calls) + "]"
            lines.append(f"  [answer] {answer}")
    lines.append(f"Reward: {'none' if reward is None else f'{reward:g}'}")
    body = _cut("\n".join(lines), max_chars)
    shown = "none" if reward is None else f"{reward:g}"
    return f'<trace index="{index}" reward="{shown}">\n{body}\n</trace>'


# ----------------------------------------------------------------------------- models
class ChatCallError(RuntimeError):
    """A critic or editor call failed for good (after retries, or a non-retryable error)."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


@runtime_checkable
class SupportsChat(Protocol):
    """Messages in, the answer's text out: all a user's own critic or editor needs."""

    async def chat(self, messages: list[dict[str, str]], *, temperature: float | None,
                   max_tokens: int | None) -> str: ...


class ChatModel(SupportsChat, Protocol):
    """What the critic and the editor are: a :class:`SupportsChat` that is closed when the run made it."""

    async def aclose(self) -> None: ...


class _Retryable(Exception):
    def __init__(self, message: str, status_code: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after


async def _with_retries(call: Callable[[], Awaitable[T]], what: str, max_retries: int, backoff: float) -> T:
    """``call()``, retried ``max_retries`` times on :class:`_Retryable` (delay doubling
    from ``backoff``, with jitter; a server's Retry-After wins when longer)."""
    for attempt in range(max_retries + 1):
        try:
            return await call()
        except _Retryable as exc:
            if attempt >= max_retries:
                raise ChatCallError(f"{what} failed after {max_retries + 1} tries: {exc}", exc.status_code) from exc
            delay = backoff * 2**attempt * (1 + random.random() / 4)
            if exc.retry_after is not None:
                delay = max(delay, exc.retry_after)
            log.warning("%s: %s; retrying in %.1f s", what, exc, delay)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


def _answer_text(response: Any, what: str) -> str:
    try:
        message = response["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise ChatCallError(f"{what}: the answer has no choices[0].message: {_json(response)[:300]}") from None
    text = _content_text(message.get("content"))
    if not text.strip():
        raise ChatCallError(f"{what}: the model answered with no text (finish_reason "
                            f"{response['choices'][0].get('finish_reason')!r}); raise max_tokens or use another model")
    return text


class HttpChatModel:
    """An OpenAI-compatible chat endpoint: ``POST {llm.endpoint}/chat/completions``.

    ``llm.sampling_parameters`` are sent with every call; the temperature APO asks for
    (when not None) overrides theirs. 429, 5xx, timeouts and connection errors are
    retried ``max_retries`` times; other errors raise :class:`ChatCallError` at once.
    """

    def __init__(self, llm: LLM, *, timeout: float = 120.0, max_retries: int = 4, retry_backoff: float = 1.0,
                 name: str = "critic") -> None:
        self.llm = llm
        self.name = name
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        headers = {"authorization": f"Bearer {llm.api_key}"} if llm.api_key else {}
        self._client = httpx.AsyncClient(headers=headers, timeout=timeout)
        self.url = llm.endpoint.rstrip("/") + "/chat/completions"

    async def chat(self, messages: list[dict[str, str]], *, temperature: float | None = None,
                   max_tokens: int | None = None) -> str:
        body: dict[str, Any] = {**self.llm.sampling_parameters, "model": self.llm.model, "messages": messages}
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        what = f"{self.name} call to {self.url} (model {self.llm.model})"

        async def once() -> Any:
            try:
                response = await self._client.post(self.url, json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
            if response.status_code == 429 or response.status_code >= 500:
                retry_after = response.headers.get("retry-after")
                raise _Retryable(f"HTTP {response.status_code}: {response.text[:300]}", response.status_code,
                                 float(retry_after) if retry_after and retry_after.isdigit() else None)
            if response.status_code >= 400:
                hint = " (check the api_key)" if response.status_code in (401, 403) else ""
                raise ChatCallError(f"{what}: HTTP {response.status_code}{hint}: {response.text[:500]}",
                                    response.status_code)
            try:
                return response.json()
            except ValueError:
                raise ChatCallError(f"{what}: the answer is not JSON: {response.text[:300]}") from None

        return _answer_text(await _with_retries(once, what, self.max_retries, self.retry_backoff), what)

    async def aclose(self) -> None:
        await self._client.aclose()


class EngineChatModel:
    """The run's own engine (``gateway.engine`` in this process), called directly: the
    call is not part of any rollout and is not recorded."""

    def __init__(self, engine: Engine, *, model: str = "policy", max_retries: int = 4, retry_backoff: float = 1.0,
                 name: str = "critic") -> None:
        self.engine = engine
        self.model = model
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.name = name

    async def chat(self, messages: list[dict[str, str]], *, temperature: float | None = None,
                   max_tokens: int | None = None) -> str:
        from agentbolt.engines.engine import EngineError

        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        what = f"{self.name} call to the run's {self.engine.name} engine"

        async def once() -> Any:
            try:
                return await self.engine.chat_completions(body)
            except EngineError as exc:
                if exc.retryable:
                    raise _Retryable(str(exc), exc.status_code) from exc
                raise ChatCallError(f"{what}: {exc}", exc.status_code) from exc

        return _answer_text(await _with_retries(once, what, self.max_retries, self.retry_backoff), what)

    async def aclose(self) -> None:
        return None


# ----------------------------------------------------------------------------- critic + editor
@dataclass
class EditOutcome:
    """What one critic → editor exchange produced."""

    critique: str
    template: str | None
    """The accepted new template; None when every try broke the placeholders."""
    rejected: list[str] = field(default_factory=list)
    """Why each rejected editor reply was refused, in order."""


class TextualGradient:
    """Critic and editor with their sampling settings: :meth:`critique`, :meth:`edit`, :meth:`step`."""

    def __init__(self, critic: ChatModel, editor: ChatModel, *, critic_temperature: float | None = 1.0,
                 editor_temperature: float | None = 0.0, max_tokens: int | None = None,
                 max_edit_retries: int = 2, failure_threshold: float = 1.0) -> None:
        self.critic = critic
        self.editor = editor
        self.critic_temperature = critic_temperature
        self.editor_temperature = editor_temperature
        self.max_tokens = max_tokens
        self.max_edit_retries = max_edit_retries
        self.failure_threshold = failure_threshold

    async def critique(self, template: str, traces: Sequence[str]) -> str:
        """What went wrong in ``traces`` and what to change in ``template``."""
        messages = critic_messages(template, traces, self.failure_threshold)
        return (await self.critic.chat(messages, temperature=self.critic_temperature,
                                       max_tokens=self.max_tokens)).strip()

    async def edit(self, template: str, critique: str) -> tuple[str | None, list[str]]:
        """``template`` with ``critique`` applied by the editor, or None when each of the
        ``1 + max_edit_retries`` replies changed the placeholders or did not format;
        with the reasons of the rejections."""
        messages = editor_messages(template, critique)
        rejected: list[str] = []
        for _ in range(self.max_edit_retries + 1):
            reply = await self.editor.chat(messages, temperature=self.editor_temperature, max_tokens=self.max_tokens)
            candidate = parse_template(reply)
            try:
                if not candidate:
                    raise PlaceholderError("the reply holds no template")
                check_edit(template, candidate)
            except PlaceholderError as exc:
                rejected.append(str(exc))
                log.info("editor reply rejected: %s", exc)
                messages = [*messages, {"role": "assistant", "content": reply},
                            {"role": "user", "content": _fill(EDITOR_RETRY, error=exc)}]
                continue
            return candidate, rejected
        return None, rejected

    async def step(self, template: str, traces: Sequence[str]) -> EditOutcome:
        """Critique, then edit."""
        critique = await self.critique(template, traces)
        new, rejected = await self.edit(template, critique)
        return EditOutcome(critique=critique, template=new, rejected=rejected)
