"""Chat completions answered through an engine's token-id completions route.

The gateway (and the local engine itself) render the chat with the policy's chat
template (:mod:`.chat_template`), send the prompt token ids to the engine's
``/v1/completions``, and turn the answer back into a chat completion: ``tool_calls``
parsed from the text (:mod:`.tools`), ``finish_reason: "tool_calls"``, chat-shaped
logprobs, the engine's token ids. Streams become chat chunks, with tool calls sent as
tool-call deltas once complete. With an :class:`~.history.AttemptHistory` the prompt of
a call that continues an earlier call of its attempt reuses that call's token ids. A
prompt that leaves no room in the engine's ``context_length`` is refused (400,
``context_length_exceeded``) before the engine is called.

``parallel_tool_calls: false``: an answer holding several calls is cut right after the
first one — its text, token ids and logprobs alike (:meth:`TokenChat._first_call_cut`) —
so the call served, the ids the next prompt continues from and the ids trained are the
same: the model never sees, in its own history, calls whose results never come. The
kept tokens are a prefix of what was sampled, their logprobs unchanged (on-policy). A
format that writes every call in one block (xlam's JSON list) cannot be cut between
calls: the first call is served and the ids stay whole.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from agentbolt.engines.chat_template import ChatTemplate, ToolMode, keep_first_call
from agentbolt.engines.engine import Engine, EngineError
from agentbolt.engines.history import AttemptHistory, Turn, message_key
from agentbolt.engines.sse import close_stream
from agentbolt.engines.tools import ParsedOutput, ToolCallStream, call_deltas
from agentbolt.semconv import LLM_PROMPT_SOURCE

__all__ = ["TokenChat"]

_PASSED = (
    "model", "max_tokens", "temperature", "top_p", "n", "stop", "seed", "presence_penalty", "frequency_penalty",
    "logit_bias", "user", "return_token_ids", "stream", "stream_options", "top_k", "min_p", "repetition_penalty",
    "stop_token_ids", "ignore_eos", "min_tokens", "priority",
)


@dataclass
class _Call:
    """One chat call on its way: the completions body and what is needed to answer."""

    body: dict[str, Any]
    mode: ToolMode
    keys: list[str]
    attempt: tuple[str, str] | None
    source: str
    want_logprobs: bool
    ids: list[int] = field(default_factory=list)


class TokenChat:
    """Answer chat calls with ``engine.completions`` on token ids (see the module doc).

    ``parser``: the tool-call parser's name (default: read from the chat template);
    ``history``: reuse the token ids of the attempt's earlier calls (the gateway's).
    """

    def __init__(self, engine: Engine, tokenizer: Any, parser: str | None = None,
                 history: AttemptHistory | None = None) -> None:
        self.engine = engine
        self.template = ChatTemplate(tokenizer, parser)
        self.history = history

    # ---- requests --------------------------------------------------------------------------
    def _prepare(self, body: dict[str, Any], attempt: tuple[str, str] | None) -> _Call:
        mode = self.template.tool_mode(body)
        given = body.get("messages")
        messages: list[dict[str, Any]] = given if isinstance(given, list) and all(
            isinstance(m, dict) for m in given) else []
        keys = [message_key(m) for m in messages]
        prompt: list[int] | None = None
        source = "fresh"
        if self.history is not None and attempt is not None and keys:
            turn = self.history.find(attempt, keys, mode.key())
            if turn is not None:
                prompt = self.template.continuation(messages, len(turn.messages), list(turn.prompt_ids),
                                                    list(turn.response_ids), mode)
            source = self.history.count(attempt, keys, turn if prompt is not None else None)
        if prompt is None:
            prompt = self.template.prompt_ids(body, mode)
        limit = self.engine.context_length
        if limit is not None and len(prompt) >= limit:
            raise _too_long(len(prompt), limit)
        out = {k: body[k] for k in _PASSED if k in body}
        if body.get("max_completion_tokens") is not None:
            out["max_tokens"] = body["max_completion_tokens"]
        want = bool(body.get("logprobs"))
        if want:
            out["logprobs"] = int(body.get("top_logprobs") or 0)
        out["prompt"] = prompt
        return _Call(out, mode, keys, attempt, source, want)

    def _remember(self, call: _Call, message: dict[str, Any], prompt_ids: Any, response_ids: Any) -> None:
        if self.history is None or call.attempt is None or not call.keys:
            return
        if not isinstance(prompt_ids, list) or not isinstance(response_ids, list):
            return
        turn = Turn(tuple(call.keys), message_key(message), call.mode.key(), tuple(prompt_ids), tuple(response_ids))
        self.history.remember(call.attempt, turn)

    def _message(self, call: _Call, parsed: ParsedOutput) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": parsed.content}
        calls = keep_first_call(parsed.calls, call.mode.parallel)
        if calls:
            message["tool_calls"] = [c.as_openai() for c in calls]
        return message

    def _decode(self, ids: list[int]) -> str:
        return str(self.template.tokenizer.decode(ids, skip_special_tokens=False))

    def _first_call_cut(self, call: _Call, ids: list[int]) -> int | None:
        """How many leading ``ids`` hold the first call whole: the longest prefix that
        parses to exactly one call before a prefix parses to two (its closing tag
        included), less trailing whitespace; None when no prefix holds one call alone (a
        format that writes all calls in one block, as xlam's JSON list). A scan, not a
        bisection: a prefix that opens a tag or a second call parses to none."""
        texts = [self._decode(ids[:k]) for k in range(len(ids) + 1)]
        best = None
        for k in range(1, len(ids) + 1):
            found = len(self._parse(call, texts[k]).calls)
            if found > 1:
                break
            if found == 1:
                best = k
        while best is not None and best > 1 and not texts[best][len(texts[best - 1]):].strip() and len(
                self._parse(call, texts[best - 1]).calls) == 1:
            best -= 1
        return best

    def _parse(self, call: _Call, text: str) -> ParsedOutput:
        parser = call.mode.parser
        full = call.mode.prefix + text
        if parser is None:
            return ParsedOutput(full)
        parsed = parser.parse(full)
        return parsed if parsed.calls else ParsedOutput(full)

    # ---- non-streaming ---------------------------------------------------------------------
    async def complete(self, body: dict[str, Any], *, replica: int = 0, attempt: tuple[str, str] | None = None,
                       notes: dict[str, Any] | None = None) -> dict[str, Any]:
        """The chat completion for ``body`` (``notes`` gets ``LLM_PROMPT_SOURCE``)."""
        call = self._prepare(body, attempt)
        if notes is not None:
            notes[LLM_PROMPT_SOURCE] = call.source
        answer = await self.engine.completions(call.body, replica=replica)
        choice = (answer.get("choices") or [{}])[0]
        parsed = self._parse(call, choice.get("text") or "")
        cut = (self._first_call_cut(call, choice["token_ids"]) if len(parsed.calls) > 1 and not call.mode.parallel
               and isinstance(choice.get("token_ids"), list) else None)
        if cut is not None:
            k = cut
            kept = choice["token_ids"][:k]
            choice = {**choice, "token_ids": kept, "logprobs": _cut_logprobs(choice.get("logprobs"), k),
                      "text": self._decode(kept)}
            parsed = self._parse(call, choice["text"])
            if isinstance(answer.get("usage"), dict):
                answer = {**answer, "usage": _cut_usage(answer["usage"], k)}
        message = self._message(call, parsed)
        prompt_ids = answer.get("prompt_token_ids", choice.get("prompt_token_ids"))
        out_choice: dict[str, Any] = {
            "index": 0, "message": message,
            "logprobs": _chat_logprobs(choice.get("logprobs")) if call.want_logprobs else None,
            "finish_reason": "tool_calls" if message.get("tool_calls") else choice.get("finish_reason"),
        }
        if "token_ids" in choice:
            out_choice["token_ids"] = choice["token_ids"]
        out: dict[str, Any] = {
            "id": _chat_id(answer), "object": "chat.completion", "created": answer.get("created") or int(time.time()),
            "model": answer.get("model"), "choices": [out_choice], "usage": answer.get("usage"),
        }
        if prompt_ids is not None:
            out["prompt_token_ids"] = prompt_ids
        if answer.get("policy_version") is not None:
            out["policy_version"] = answer["policy_version"]
        self._remember(call, message, prompt_ids, choice.get("token_ids"))
        return out

    # ---- streaming -------------------------------------------------------------------------
    def stream(self, body: dict[str, Any], *, replica: int = 0, attempt: tuple[str, str] | None = None,
               notes: dict[str, Any] | None = None) -> AsyncIterator[dict[str, Any]]:
        """The chat chunks for ``body`` (the request is checked before the first chunk)."""
        call = self._prepare(body, attempt)
        if notes is not None:
            notes[LLM_PROMPT_SOURCE] = call.source
        return self._chunks(call, self.engine.stream_completions(call.body, replica=replica))

    async def _chunks(self, call: _Call, pieces: AsyncIterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        held = ToolCallStream(call.mode.parser, call.mode.prefix)
        base: dict[str, Any] | None = None
        prompt_ids: list[int] | None = None
        sampled: list[int] = []
        # parallel_tool_calls=false: ids and logprobs wait for the end, where the answer may be cut after one call
        cut_at_end = not call.mode.parallel and call.mode.parser is not None
        held_logprobs: dict[str, Any] = {}
        try:
            async for piece in pieces:
                if base is None:
                    base = {"id": _chat_id(piece), "object": "chat.completion.chunk",
                            "created": piece.get("created") or int(time.time()), "model": piece.get("model")}
                    first: dict[str, Any] = {**base, "choices": [
                        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                         "finish_reason": None}]}
                    prompt_ids = _prompt_ids_of(piece)
                    if prompt_ids is not None:
                        first["prompt_token_ids"] = prompt_ids
                    yield first
                extra = {"policy_version": piece["policy_version"]} if piece.get("policy_version") is not None else {}
                if not piece.get("choices"):
                    yield {**base, "choices": [], **{k: v for k, v in piece.items() if k in ("usage",)}, **extra}
                    continue
                c = piece["choices"][0]
                ids = c.get("token_ids")
                if isinstance(ids, list):
                    sampled += ids
                lp = c.get("logprobs")
                if cut_at_end:
                    ids = None
                    if isinstance(lp, dict):
                        _merge_completion_logprobs(held_logprobs, lp)
                    lp = None
                delta: dict[str, Any] = {}
                shown = held.feed(c.get("text") or "")
                finish = c.get("finish_reason")
                tool_calls: list[dict[str, Any]] = []
                if finish is not None:
                    rest, parsed = held.finish()
                    shown += rest
                    if cut_at_end:
                        cut = self._first_call_cut(call, sampled) if len(parsed.calls) > 1 else None
                        if cut is not None:
                            sampled, held_logprobs = sampled[:cut], _cut_logprobs(held_logprobs, cut) or {}
                        ids, lp = list(sampled), held_logprobs or None
                    if parsed.calls:
                        parsed = ParsedOutput(parsed.content, keep_first_call(parsed.calls, call.mode.parallel))
                        tool_calls = call_deltas(parsed)
                        finish = "tool_calls"
                    self._remember(call, self._message(call, parsed), prompt_ids, sampled)
                if shown:
                    delta["content"] = shown
                if tool_calls:
                    delta["tool_calls"] = tool_calls
                out_c: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish,
                                         "logprobs": _chat_logprobs(lp) if call.want_logprobs else None}
                if isinstance(ids, list):
                    out_c["token_ids"] = ids
                yield {**base, "choices": [out_c], **extra}
        finally:
            await close_stream(pieces)


def _too_long(n: int, limit: int) -> EngineError:
    """A 400 for a prompt that leaves the answer no room (worded as Anthropic words it,
    coded as OpenAI codes it, so both kinds of client recognise it)."""
    message = (f"prompt is too long: {n} tokens > {limit - 1} maximum (the model's context window is {limit} tokens "
               "and the answer needs at least one): shorten the conversation, or serve a model with a longer context")
    return EngineError(400, message, {"error": {"message": message, "type": "invalid_request_error",
                                                "param": "messages", "code": "context_length_exceeded"}})


def _chat_id(answer: dict[str, Any]) -> str:
    raw = str(answer.get("id") or "")
    return "chatcmpl-" + (raw.split("-", 1)[1] if raw.startswith("cmpl-") else raw or uuid.uuid4().hex)


def _prompt_ids_of(piece: dict[str, Any]) -> list[int] | None:
    ids = piece.get("prompt_token_ids")
    if ids is None and piece.get("choices"):
        ids = piece["choices"][0].get("prompt_token_ids")
    return ids if isinstance(ids, list) else None


_LOGPROB_LISTS = ("tokens", "token_logprobs", "top_logprobs", "text_offset")


def _cut_logprobs(lp: Any, k: int) -> Any:
    """Completions logprobs of the first ``k`` tokens."""
    if not isinstance(lp, dict):
        return lp
    return {key: value[:k] if key in _LOGPROB_LISTS and isinstance(value, list) else value
            for key, value in lp.items()}


def _merge_completion_logprobs(acc: dict[str, Any], part: dict[str, Any]) -> None:
    for key in _LOGPROB_LISTS:
        if isinstance(part.get(key), list):
            acc.setdefault(key, []).extend(part[key])


def _cut_usage(usage: dict[str, Any], k: int) -> dict[str, Any]:
    prompt = usage.get("prompt_tokens")
    out = {**usage, "completion_tokens": k}
    if isinstance(prompt, int):
        out["total_tokens"] = prompt + k
    return out


def _chat_logprobs(lp: Any) -> dict[str, Any] | None:
    """Completions logprobs (parallel lists) in the chat shape (``content`` entries)."""
    if not isinstance(lp, dict):
        return None
    tokens, values = lp.get("tokens") or [], lp.get("token_logprobs") or []
    tops = lp.get("top_logprobs") or []
    content = []
    for i, (token, value) in enumerate(zip(tokens, values, strict=False)):
        top = tops[i] if i < len(tops) and isinstance(tops[i], dict) else {}
        content.append(
            {
                "token": token,
                "logprob": value,
                "bytes": list(str(token).encode()),
                "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in top.items()],
            }
        )
    return {"content": content}
