"""Chat records → token ids with loss on assistant tokens only, on SmolLM2's real
tokenizer and chat template and on the tiny model's byte tokenizer."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("transformers")

from agentbolt.algorithms.sft import ChatTemplateError, encode_record, encode_records
from agentbolt.algorithms.sft.chat_data import IGNORE_INDEX
from agentbolt.models import byte_tokenizer, smollm2_tokenizer


@pytest.fixture(scope="module", params=["smollm2", "bytes"])
def tokenizer(request: pytest.FixtureRequest) -> Any:
    return smollm2_tokenizer() if request.param == "smollm2" else byte_tokenizer()


def calc_record(history_weight: int | None = 0) -> dict[str, Any]:
    call: dict[str, Any] = {"role": "assistant", "content": "CALC(41 * 23 - 15)"}
    if history_weight is not None:
        call["weight"] = history_weight
    return {"messages": [
        {"role": "system", "content": "You solve math problems."},
        {"role": "user", "content": "Ann buys 41 packs of 23 pens and loses 15. How many?"},
        call,
        {"role": "user", "content": "Result: 928. Now give the final answer as ANSWER: <number>."},
        {"role": "assistant", "content": "ANSWER: 928"},
    ]}


def trained_spans(tokenizer: Any, ids: list[int], labels: list[int]) -> list[str]:
    """The decoded runs of consecutive trained tokens."""
    spans, current = [], []
    for tid, label in zip(ids, labels, strict=True):
        if label != IGNORE_INDEX:
            assert label == tid
            current.append(tid)
        elif current:
            spans.append(tokenizer.decode(current))
            current = []
    if current:
        spans.append(tokenizer.decode(current))
    return spans


def test_only_the_final_answer_and_its_end_of_turn_token_are_trained(tokenizer: Any) -> None:
    record = calc_record()
    sample = encode_record(record, tokenizer)
    assert sample.input_ids == tokenizer.apply_chat_template(record["messages"], tokenize=True, return_dict=False)
    assert trained_spans(tokenizer, sample.input_ids, sample.labels) == ["ANSWER: 928<|im_end|>"]
    # the context is exactly the prompt the engine renders for the call that produced the answer
    prompt = tokenizer.apply_chat_template(record["messages"][:-1], add_generation_prompt=True, tokenize=True,
                                           return_dict=False)
    first = next(i for i, label in enumerate(sample.labels) if label != IGNORE_INDEX)
    assert sample.input_ids[:first] == prompt
    # what the template writes after the end-of-turn token (a newline) is not learned
    assert sample.labels[-1] == IGNORE_INDEX and tokenizer.decode(sample.input_ids[-1:]) == "\n"


def test_history_turns_are_trained_unless_weighted_zero(tokenizer: Any) -> None:
    sample = encode_record(calc_record(history_weight=None), tokenizer)
    assert trained_spans(tokenizer, sample.input_ids, sample.labels) == [
        "CALC(41 * 23 - 15)<|im_end|>", "ANSWER: 928<|im_end|>"]
    weighted = encode_record(calc_record(history_weight=1), tokenizer)
    assert weighted.labels == sample.labels
    assert encode_record(calc_record(history_weight=0), tokenizer).num_trained < sample.num_trained


def test_tools_are_rendered_and_tool_calls_without_content_work() -> None:
    tok = byte_tokenizer()
    tok.chat_template = (
        "{% if tools %}{{ 'TOOLS:' + (tools | map(attribute='function') | map(attribute='name') | join(',')) + '\n' }}"
        "{% endif %}{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] }}"
        "{% if m.get('tool_calls') %}{{ 'CALL ' + m['tool_calls'][0]['function']['name'] }}{% endif %}"
        "{{ '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    )
    record = {
        "messages": [{"role": "user", "content": "2+2?"},
                     {"role": "assistant", "content": None, "tool_calls": [
                         {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}]}],
        "tools": [{"type": "function", "function": {"name": "add", "parameters": {}}}],
    }
    sample = encode_record(record, tok)
    assert tok.decode(sample.input_ids).startswith("TOOLS:add\n")
    assert trained_spans(tok, sample.input_ids, sample.labels) == ["CALL add<|im_end|>"]


def test_a_template_that_rewrites_earlier_turns_is_refused_by_name() -> None:
    tok = byte_tokenizer()
    tok.name_or_path = "reasoning-model"
    tok.chat_template = (  # like templates that drop the reasoning of past turns
        "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' }}"
        "{% if m['role'] == 'assistant' and not loop.last %}[earlier answer]{% else %}{{ m['content'] }}{% endif %}"
        "{{ '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    )
    with pytest.raises(ChatTemplateError, match="'reasoning-model' is not prefix-consistent"):
        encode_record(calc_record(history_weight=None), tok)


def test_a_tokenizer_without_chat_template_is_refused() -> None:
    tok = byte_tokenizer()
    tok.chat_template = None
    with pytest.raises(ChatTemplateError, match="set tokenizer.chat_template"):
        encode_record(calc_record(), tok)


def test_overlong_records_are_skipped_or_truncated_and_counted() -> None:
    tok = byte_tokenizer()
    short = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    long = {"messages": [{"role": "user", "content": "x" * 200}, {"role": "assistant", "content": "y" * 50}]}
    no_target = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "weight": 0},
                              {"role": "user", "content": "c"}]}
    limit = len(encode_record(long, tok)) - 20

    skipped = encode_records([short, long, no_target], tok, max_seq_len=limit)
    assert (len(skipped.samples), skipped.skipped_overlong, skipped.truncated, skipped.no_target) == (1, 1, 0, 1)

    cut = encode_records([short, long], tok, max_seq_len=limit, overlong="truncate")
    assert (len(cut.samples), cut.truncated) == (2, 1)
    assert len(cut.samples[1]) == limit and 0 < cut.samples[1].num_trained < 50

    nothing_left = encode_records([long], tok, max_seq_len=210, overlong="truncate")  # cut inside the prompt
    assert (len(nothing_left.samples), nothing_left.no_target) == (0, 1)


def bash_record() -> dict[str, Any]:
    """A call of a harness's ``bash`` tool, as a teacher's rollout gives it (OpenAI format)."""
    call = {"id": "call_1", "type": "function",
            "function": {"name": "bash", "arguments": '{"command": "echo hello > limit.txt"}'}}
    return {
        "messages": [{"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
                     {"role": "user", "content": "Please solve this issue: create limit.txt containing hello."},
                     {"role": "assistant", "content": None, "tool_calls": [call]}],
        "tools": [{"type": "function", "function": {
            "name": "bash", "description": "Execute a bash command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}],
    }


def test_a_tool_call_is_trained_as_the_gateway_serves_and_parses_it_on_a_template_without_tools() -> None:
    from agentbolt.engines.chat_template import ChatTemplate

    tok = smollm2_tokenizer()  # its template ignores tools: the gateway describes them and writes calls itself
    record = bash_record()
    served = ChatTemplate(tok)
    sample = encode_record(record, tok)
    first = next(i for i, label in enumerate(sample.labels) if label != IGNORE_INDEX)
    # the context is the prompt the gateway sends the engine for this request (tools described in it)
    request = {"messages": record["messages"][:-1], "tools": record["tools"]}
    assert sample.input_ids[:first] == served.prompt_ids(request, served.tool_mode(request))
    assert "<tools>" in tok.decode(sample.input_ids[:first])
    # the answer learned is the call in the gateway's format, which its parser reads back as that call
    [answer] = trained_spans(tok, sample.input_ids, sample.labels)
    assert answer.endswith("<|im_end|>")
    parsed = served.parser.parse(answer.removesuffix("<|im_end|>"))
    assert [(c.name, c.arguments) for c in parsed.calls] == [("bash", '{"command": "echo hello > limit.txt"}')]
