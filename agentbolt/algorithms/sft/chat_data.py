"""Chat records → token ids and labels, with the model's own chat template.

A record (``{"messages": [...], "tools": [...]}``, OpenAI's chat fine-tuning format, as
:class:`~agentbolt.adapters.MessagesAdapter` writes it) is rendered with
the gateway's own chat templating (:class:`agentbolt.engines.chat_template.ChatTemplate`)
— the same rendering the gateway applies to a request, so the model learns in the exact
context it will be asked in. With tools that includes a template that ignores them
(SmolLM2's): the tools are described in the system prompt and each assistant's
``tool_calls`` written into its turn in the tool-call parser's format (``tool_parser``,
default: read from the template, as the gateway does), so the model learns to write a
call the way the gateway parses it. Labels are
``-100`` (no loss) everywhere except on the tokens of the assistant messages to train:

* every assistant message, unless it says ``"weight": 0`` (the adapter marks turns that
  were already in a call's request that way: they are context, and a record of their own);
* its tokens are found by rendering twice: the messages before it with the generation
  prompt (where the engine starts generating) and the messages up to it; the tokens in
  between are the answer, **including the end-of-turn token** (so the model learns to
  stop) but not what a template writes after it (a newline);
* rendering must be prefix-consistent — the conversation up to a message renders as the
  start of the whole conversation. A template that rewrites earlier turns (one that
  drops the reasoning of past turns, say) is not, and :class:`ChatTemplateError` says so.

Records longer than ``max_seq_len`` are skipped or truncated (``overlong``); both are counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentbolt.engines.chat_template import ChatTemplate, ToolMode

__all__ = ["IGNORE_INDEX", "ChatData", "ChatSample", "ChatTemplateError", "encode_record", "encode_records"]

IGNORE_INDEX = -100
"""Label of tokens that carry no loss."""

_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "</s>")
"""End-of-turn tokens of common templates, used when they are special tokens of the tokenizer."""


class ChatTemplateError(ValueError):
    """The tokenizer's chat template cannot give assistant-only labels for a record."""


@dataclass(frozen=True, slots=True)
class ChatSample:
    """One record as token ids, with ``labels[t] = input_ids[t]`` on trained tokens, else -100."""

    input_ids: list[int]
    labels: list[int]

    @property
    def num_trained(self) -> int:
        return sum(label != IGNORE_INDEX for label in self.labels)

    @property
    def token_ids(self) -> list[int]:
        """``input_ids``: a :class:`~agentbolt.training.batch.TokenSequence`."""
        return self.input_ids

    @property
    def loss_mask(self) -> list[int]:
        """1 on the trained (labelled) tokens."""
        return [int(label != IGNORE_INDEX) for label in self.labels]

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass
class ChatData:
    """The samples of a set of records, and what became of the others."""

    samples: list[ChatSample] = field(default_factory=list)
    skipped_overlong: int = 0
    truncated: int = 0
    no_target: int = 0
    """Records with no assistant token to train (none, all ``weight: 0``, or cut away)."""

    @property
    def num_tokens(self) -> int:
        return sum(len(s) for s in self.samples)

    @property
    def num_trained(self) -> int:
        return sum(s.num_trained for s in self.samples)


def _template_name(tokenizer: Any) -> str:
    name = getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__  # third-party: tokenizers vary by model
    return f"the chat template of {name!r}"


def _clean(message: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in message.items() if k != "weight"}
    if out.get("content") is None:  # an assistant's tool call: templates concatenate content
        out["content"] = ""
    return out


def _end_of_turn_ids(tokenizer: Any) -> set[int]:
    eos = getattr(tokenizer, "eos_token_id", None)  # third-party: tokenizers vary by model
    ids = {eos} if isinstance(eos, int) else set()
    special = set(getattr(tokenizer, "all_special_ids", []) or [])  # third-party: tokenizers vary by model
    for token in _END_OF_TURN:
        tid = tokenizer.convert_tokens_to_ids(token)
        if isinstance(tid, int) and tid in special:
            ids.add(tid)
    return ids


class _Renderer:
    """Token ids of a conversation as the gateway renders it (tools and calls included)."""

    def __init__(self, tokenizer: Any, tools: Any, tool_parser: str | None = None) -> None:
        if not getattr(tokenizer, "chat_template", None):  # third-party: tokenizers vary by model
            raise ChatTemplateError(
                f"{_template_name(tokenizer)} is missing: SFT renders records with the model's chat template; "
                "set tokenizer.chat_template (the serving engine needs it too)"
            )
        self.tokenizer = tokenizer
        self.template = ChatTemplate(tokenizer, tool_parser)
        self.mode = ToolMode(tools, self.template.parser) if tools else ToolMode(None, None)

    def __call__(self, messages: Sequence[Mapping[str, Any]], generation_prompt: bool) -> list[int]:
        if not messages:
            return []
        try:
            prepared = self.template.template_messages([_clean(m) for m in messages], self.mode)
            text = self.template.render_text(prepared, self.mode, generation=generation_prompt)
        except Exception as exc:
            raise ChatTemplateError(f"{_template_name(self.tokenizer)} rejected a record: {exc}") from exc
        return self.template.encode(text)


def _trained(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "assistant" and message.get("weight", 1) != 0


def encode_record(record: Mapping[str, Any], tokenizer: Any, *, end_of_turn: set[int] | None = None,
                  tool_parser: str | None = None) -> ChatSample:
    """The token ids and labels of one record (no length limit; see :func:`encode_records`);
    ``tool_parser``: the format the serving gateway writes and parses tool calls in."""
    messages: list[Mapping[str, Any]] = list(record["messages"])
    render = _Renderer(tokenizer, record.get("tools"), tool_parser)
    stops = _end_of_turn_ids(tokenizer) if end_of_turn is None else end_of_turn
    full = render(messages, False)
    labels = [IGNORE_INDEX] * len(full)
    for i, message in enumerate(messages):
        if not _trained(message):
            continue
        start = render(messages[:i], True)
        upto = render(messages[: i + 1], False)
        if full[: len(start)] != start or full[: len(upto)] != upto or len(upto) <= len(start):
            raise ChatTemplateError(
                f"{_template_name(tokenizer)} is not prefix-consistent: message {i} (assistant) rendered after "
                f"the {i} messages before it does not start where their rendering with the generation prompt ends, "
                "or the whole conversation does not start with it (the template rewrites earlier turns). "
                "Assistant-only labels need a template that renders a conversation turn by turn; use another "
                "chat template, or give records whose only trained message is the last one"
            )
        end = len(upto)
        last_stop = max((t for t in range(len(start), end) if full[t] in stops), default=None)
        if last_stop is not None:
            end = last_stop + 1  # the end-of-turn token is learned; the newline after it is not
        labels[len(start) : end] = full[len(start) : end]
    return ChatSample(full, labels)


def encode_records(records: Iterable[Mapping[str, Any]], tokenizer: Any, *, max_seq_len: int,
                   overlong: Literal["skip", "truncate"] = "skip", tool_parser: str | None = None) -> ChatData:
    """Encode ``records``; those over ``max_seq_len`` tokens are skipped or truncated, and
    those with no trained token left out (all counted)."""
    data = ChatData()
    stops = _end_of_turn_ids(tokenizer)
    for record in records:
        sample = encode_record(record, tokenizer, end_of_turn=stops, tool_parser=tool_parser)
        if len(sample) > max_seq_len:
            if overlong == "skip":
                data.skipped_overlong += 1
                continue
            data.truncated += 1
            sample = ChatSample(sample.input_ids[:max_seq_len], sample.labels[:max_seq_len])
        if sample.num_trained == 0:
            data.no_target += 1
            continue
        data.samples.append(sample)
    return data
