"""Token-exact history closes an earlier answer's turn by token ids: the template's
end-of-turn token is dropped after the answer only when the model sampled that very token,
whatever the last sampled token decodes to. An answer cut right after a token that decodes
to ``<`` keeps the template's ``<|im_end|>`` (before: the next prompt carried ``|im_end|>``
as plain text), in every template family whose turn end starts with ``<``."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from agentbolt.engines.chat_template import ChatTemplate, closes_turn  # noqa: E402
from agentbolt.models import CHATML_TEMPLATE, byte_tokenizer  # noqa: E402

LLAMA3_TEMPLATE = (
    "{{ '<|begin_of_text|>' }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
GEMMA_TEMPLATE = (
    "{{ '<bos>' }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)
FAMILIES = {  # template, its special tokens, the end-of-turn token a model samples to stop
    "chatml": (CHATML_TEMPLATE, [], "<|im_end|>"),
    "llama3": (LLAMA3_TEMPLATE, ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
               "<|eot_id|>"),
    "gemma": (GEMMA_TEMPLATE, ["<bos>", "<start_of_turn>", "<end_of_turn>"], "<end_of_turn>"),
}
MESSAGES = [{"role": "user", "content": "Which tag opens a tool call?"}]
FOLLOW_UP = {"role": "user", "content": "Go on."}


def _template(family: str) -> tuple[ChatTemplate, Any, int]:
    """A byte-level tokenizer (every character its own token: ``<`` is one) with the family's
    special tokens and chat template; and the id of its end-of-turn token."""
    template, specials, end = FAMILIES[family]
    tok = byte_tokenizer()
    if specials:
        tok.add_special_tokens({"additional_special_tokens": specials})
    tok.chat_template = template
    return ChatTemplate(tok), tok, tok.convert_tokens_to_ids(end)


def _next_prompt(chat: ChatTemplate, answer: str, sampled: list[int]) -> tuple[list[int], list[int]]:
    """The ids the continuing call's prompt puts after the sampled ones, and the ids of what
    the template writes after the answer's text when it renders the whole conversation."""
    mode = chat.tool_mode({})
    earlier = chat.prompt_ids({"messages": MESSAGES}, mode)
    messages = [*MESSAGES, {"role": "assistant", "content": answer}, FOLLOW_UP]
    ids = chat.continuation(messages, len(MESSAGES), earlier, sampled, mode)
    assert ids is not None
    assert ids[: len(earlier) + len(sampled)] == earlier + sampled  # the sampled ids, as sampled
    text = chat.render_text(chat.template_messages(messages, mode), mode, generation=True)
    rendered_after = chat.encode(text[text.rindex(answer) + len(answer):])
    return ids[len(earlier) + len(sampled):], rendered_after


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_an_answer_cut_right_after_a_lt_sign_still_gets_the_end_of_turn_token(family: str) -> None:
    chat, tok, end = _template(family)
    sampled = tok.encode("Use <", add_special_tokens=False)  # cut at max_tokens right after "<"
    assert tok.decode(sampled[-1:]) == "<"
    after, rendered_after = _next_prompt(chat, "Use <", sampled)
    assert after[0] == end  # before the fix: the end-of-turn text less its "<", as plain characters
    assert after == rendered_after  # the turn closes as the template closes it


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_an_answer_closed_by_the_models_end_of_turn_token_is_not_closed_twice(family: str) -> None:
    chat, tok, end = _template(family)
    sampled = [*tok.encode("Use <", add_special_tokens=False), end]  # "<" then the model's own stop
    after, rendered_after = _next_prompt(chat, "Use <", sampled)
    assert rendered_after[0] == end and after == rendered_after[1:]


def test_closes_turn_compares_ids_not_text() -> None:
    assert closes_turn([5, 7], [7, 9])
    assert not closes_turn([5, 60], [7, 9])  # 60 decodes to "<", 7 is "<|im_end|>": not the same token
    assert not closes_turn([], [7])
    assert not closes_turn([7], [])
