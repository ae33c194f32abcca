"""The local engine's continuous scheduler: requests join the running batch at the next
step, a group's shared prompt is prefilled once, a call that extends an earlier prompt +
answer prefills only its new tokens — and the logprobs stay those of a plain forward pass
of the served weights. Tiny random Llama models; real engine, no mocks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the transformers engine needs the [torch] extra")
pytest.importorskip("transformers", reason="the transformers engine needs the [torch] extra")

from agentbolt.engines.transformers_engine import TransformersEngine  # noqa: E402
from agentbolt.models import tiny_model  # noqa: E402

USER = [{"role": "user", "content": "Tell me about cats."}]


def _forward_logprobs(model: Any, prompt_ids: list[int], token_ids: list[int]) -> list[float]:
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([prompt_ids + token_ids])).logits[0].float()
    lp = torch.log_softmax(logits, dim=-1)
    start = len(prompt_ids) - 1
    return [lp[start + i, t].item() for i, t in enumerate(token_ids)]


def _completion_logprobs(answer: dict[str, Any]) -> list[float]:
    return answer["choices"][0]["logprobs"]["token_logprobs"]


async def test_requests_arriving_while_rows_decode_join_the_running_batch() -> None:
    model, tokenizer = tiny_model(seed=0)
    eng = TransformersEngine(model, tokenizer, batch_window_ms=1)
    try:
        assert eng.scheduler_kind == "continuous"
        stream = eng.stream_chat_completions({"messages": USER, "max_tokens": 150, "ignore_eos": True})
        await stream.__anext__()
        await stream.__anext__()  # the long row is decoding
        short = await asyncio.gather(*(eng.chat_completions({"messages": USER, "max_tokens": 3, "ignore_eos": True,
                                                             "seed": i}) for i in range(3)))
        assert all(len(a["choices"][0]["token_ids"]) == 3 for a in short)
        rest = [c async for c in stream]
        assert len(rest) > 10  # the short requests were answered while the long one kept going
        assert rest[-1]["choices"][0]["finish_reason"] == "length"
        # one pass per token of the long row (+ its prefill): the short ones rode along
        assert eng.stats.forward_passes <= 150 + 1
    finally:
        await eng.close()


async def test_a_groups_shared_prompt_is_prefilled_once_and_every_row_keeps_exact_logprobs() -> None:
    model, tokenizer = tiny_model(seed=0)
    eng = TransformersEngine(model, tokenizer, batch_window_ms=200)
    try:
        prompt = tokenizer("A group of rollouts shares this prompt:")["input_ids"]
        answers = await asyncio.gather(*(eng.completions({"prompt": prompt, "max_tokens": 6, "ignore_eos": True,
                                                          "logprobs": 0, "seed": i}) for i in range(8)))
        assert eng.stats.batch_sizes == [8]
        assert eng.stats.prompt_tokens_computed == len(prompt)
        assert eng.stats.prompt_tokens_reused == 7 * len(prompt)
        assert len({tuple(a["choices"][0]["token_ids"]) for a in answers}) > 1  # each row has its own RNG
        for a in answers:
            assert _completion_logprobs(a) == pytest.approx(
                _forward_logprobs(model, prompt, a["choices"][0]["token_ids"]), abs=1e-4)
    finally:
        await eng.close()


async def test_a_call_extending_the_previous_prompt_and_answer_prefills_only_its_new_tokens() -> None:
    model, tokenizer = tiny_model(seed=0)
    eng = TransformersEngine(model, tokenizer, batch_window_ms=1)
    try:
        first_prompt = tokenizer("The first turn of an agent.")["input_ids"]
        first = await eng.completions({"prompt": first_prompt, "max_tokens": 5, "ignore_eos": True, "seed": 1})
        computed = eng.stats.prompt_tokens_computed
        turn = tokenizer(" And its tool result.")["input_ids"]
        second_prompt = first_prompt + first["choices"][0]["token_ids"] + turn
        second = await eng.completions({"prompt": second_prompt, "max_tokens": 5, "ignore_eos": True, "seed": 2,
                                        "logprobs": 0})
        # every position of the first call (its prompt and all but its last sampled token) is reused
        reused = len(first_prompt) + len(first["choices"][0]["token_ids"]) - 1
        assert eng.stats.prompt_tokens_computed - computed == len(second_prompt) - reused
        assert _completion_logprobs(second) == pytest.approx(
            _forward_logprobs(model, second_prompt, second["choices"][0]["token_ids"]), abs=1e-4)
    finally:
        await eng.close()


async def test_a_weight_swap_drops_the_cached_prefixes() -> None:
    served, tokenizer = tiny_model(seed=0)
    new_model, _ = tiny_model(seed=1)
    eng = TransformersEngine(served, tokenizer, batch_window_ms=1)
    try:
        prompt = tokenizer("Same prompt before and after the swap.")["input_ids"]
        await eng.completions({"prompt": prompt, "max_tokens": 3, "ignore_eos": True})
        await eng.update_weights(new_model.state_dict())
        computed = eng.stats.prompt_tokens_computed
        after = await eng.completions({"prompt": prompt, "max_tokens": 4, "ignore_eos": True, "logprobs": 0})
        assert eng.stats.prompt_tokens_computed - computed == len(prompt)  # nothing reused across weights
        assert after["policy_version"] == 1
        assert _completion_logprobs(after) == pytest.approx(
            _forward_logprobs(new_model, prompt, after["choices"][0]["token_ids"]), abs=1e-4)
    finally:
        await eng.close()


async def test_with_two_threads_a_lone_sequence_keeps_exact_logprobs_across_a_swap() -> None:
    served, tokenizer = tiny_model(seed=0)
    new_model, _ = tiny_model(seed=1)
    eng = TransformersEngine(served, tokenizer, batch_window_ms=1, num_threads=2)  # the one-row step on 1 of them
    try:
        prompt = tokenizer("One sequence, two threads.")["input_ids"]
        for version, model in enumerate((served, new_model)):
            if version:
                await eng.update_weights(new_model.state_dict())  # written into the served model in place
            answer = await eng.completions({"prompt": prompt, "max_tokens": 6, "ignore_eos": True, "logprobs": 0})
            assert _completion_logprobs(answer) == pytest.approx(
                _forward_logprobs(model, prompt, answer["choices"][0]["token_ids"]), abs=1e-4)
    finally:
        await eng.close()


async def test_the_per_batch_scheduler_stays_available_and_serves_other_architectures() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    llama, tokenizer = tiny_model(seed=0)
    per_batch = TransformersEngine(llama, tokenizer, scheduler="per-batch")
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=1, n_head=2,
                                      n_positions=512, eos_token_id=tokenizer.eos_token_id)).eval()
    other = TransformersEngine(gpt2, tokenizer)
    try:
        assert per_batch.scheduler_kind == "per-batch" and other.scheduler_kind == "per-batch"
        prompt = tokenizer("Hello there")["input_ids"]
        for eng, model in ((per_batch, llama), (other, gpt2)):
            answer = await eng.completions({"prompt": prompt, "max_tokens": 4, "ignore_eos": True, "logprobs": 0})
            assert _completion_logprobs(answer) == pytest.approx(
                _forward_logprobs(model, prompt, answer["choices"][0]["token_ids"]), abs=1e-4)
        with pytest.raises(ValueError, match="scheduler"):
            TransformersEngine(llama, tokenizer, scheduler="paged")  # type: ignore[arg-type]
    finally:
        await per_batch.close()
        await other.close()
