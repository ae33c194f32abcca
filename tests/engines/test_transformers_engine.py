"""The local transformers engine: OpenAI shapes with token ids and raw logprobs, dynamic
batching, stops, seeds, streaming and weight hot-swaps — on a tiny random model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the transformers engine needs the [torch] extra")
pytest.importorskip("transformers", reason="the transformers engine needs the [torch] extra")

from agentbolt.engines.engine import EngineError
from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.models import tiny_model

USER = [{"role": "user", "content": "Tell me about cats."}]


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    return tiny_model(seed=0)


@pytest.fixture
async def engine(tiny):
    model, tokenizer = tiny
    eng = TransformersEngine(model, tokenizer, batch_window_ms=5)
    yield eng
    await eng.close()


def _chat(messages=USER, **kw: Any) -> dict[str, Any]:
    return {"model": "tiny", "messages": messages, "max_tokens": 8, **kw}


def _forward_logprobs(model, prompt_ids: list[int], token_ids: list[int]) -> list[float]:
    """Log-softmax of a plain full-sequence forward pass, at the chosen tokens."""
    ids = torch.tensor([prompt_ids + token_ids])
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0].float()
    lp = torch.log_softmax(logits, dim=-1)
    start = len(prompt_ids) - 1
    return [lp[start + i, t].item() for i, t in enumerate(token_ids)]


async def test_prompt_token_ids_are_the_chat_template_applied(engine, tiny) -> None:
    _, tokenizer = tiny
    answer = await engine.chat_completions(_chat())
    expected = tokenizer.apply_chat_template(USER, add_generation_prompt=True, tokenize=True, return_dict=False)
    assert answer["prompt_token_ids"] == list(expected)
    assert answer["object"] == "chat.completion"
    assert answer["usage"]["prompt_tokens"] == len(expected)


async def test_logprobs_equal_a_separate_forward_pass_even_when_batched(engine, tiny) -> None:
    model, _ = tiny
    prompts = [[{"role": "user", "content": "x" * n}] for n in (1, 7, 30)]  # different lengths: left padding
    answers = await asyncio.gather(*(engine.chat_completions(_chat(p, logprobs=True, seed=i, ignore_eos=True))
                                     for i, p in enumerate(prompts)))
    for answer in answers:
        choice = answer["choices"][0]
        got = [c["logprob"] for c in choice["logprobs"]["content"]]
        assert len(choice["token_ids"]) == len(got) == 8
        expected = _forward_logprobs(model, answer["prompt_token_ids"], choice["token_ids"])
        assert got == pytest.approx(expected, abs=1e-3)


async def test_concurrent_requests_share_forward_passes(tiny) -> None:
    model, tokenizer = tiny
    eng = TransformersEngine(model, tokenizer, batch_window_ms=300, max_batch_size=8)
    try:
        answers = await asyncio.gather(*(eng.chat_completions(_chat(max_tokens=6, ignore_eos=True, seed=i))
                                         for i in range(4)))
        assert all(len(a["choices"][0]["token_ids"]) == 6 for a in answers)
        assert eng.stats.batch_sizes == [4]
        assert eng.stats.forward_passes == 6  # one prefill + five decode steps for all four rows
    finally:
        await eng.close()


async def test_per_batch_scheduler_requests_arriving_while_a_batch_runs_form_the_next_batch(tiny) -> None:
    # (the continuous scheduler lets them join the running batch: test_continuous_batching.py)
    model, tokenizer = tiny
    eng = TransformersEngine(model, tokenizer, batch_window_ms=1, scheduler="per-batch")
    try:
        stream = eng.stream_chat_completions(_chat(max_tokens=150, ignore_eos=True))
        await stream.__anext__()
        await stream.__anext__()  # the first batch is decoding
        later = asyncio.gather(*(eng.chat_completions(_chat(max_tokens=3, seed=i)) for i in range(3)))
        rest = [c async for c in stream]
        await later
        assert rest[-1]["choices"][0]["finish_reason"] == "length"
        assert eng.stats.batch_sizes == [1, 3]
    finally:
        await eng.close()


async def test_batches_are_capped_at_max_batch_size(tiny) -> None:
    model, tokenizer = tiny
    eng = TransformersEngine(model, tokenizer, batch_window_ms=300, max_batch_size=2)
    try:
        await asyncio.gather(*(eng.chat_completions(_chat(max_tokens=2, seed=i)) for i in range(5)))
        assert sorted(eng.stats.batch_sizes, reverse=True) == [2, 2, 1]
    finally:
        await eng.close()


async def test_max_tokens_ends_with_length(engine) -> None:
    answer = await engine.chat_completions(_chat(max_tokens=3, ignore_eos=True))
    assert len(answer["choices"][0]["token_ids"]) == 3
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] == 3


async def test_stop_string_ends_generation_and_is_not_returned(engine) -> None:
    free = await engine.chat_completions(_chat(temperature=0, max_tokens=12, ignore_eos=True))
    text = free["choices"][0]["message"]["content"]
    stop = text[6:9]
    assert len(stop) == 3
    stopped = await engine.chat_completions(_chat(temperature=0, max_tokens=12, ignore_eos=True, stop=[stop, "\x00"]))
    choice = stopped["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["content"] == text[: text.index(stop)]
    assert choice["token_ids"] == free["choices"][0]["token_ids"][: len(choice["token_ids"])]
    body = _chat(temperature=0, max_tokens=12, ignore_eos=True, stop=[stop], stream=True)
    streamed = [c async for c in engine.stream_chat_completions(body)]
    deltas = [c["choices"][0]["delta"].get("content") or "" for c in streamed]
    assert "".join(deltas) == choice["message"]["content"]  # no piece of the stop string leaked
    assert streamed[-1]["choices"][0]["finish_reason"] == "stop"


async def test_stop_token_ids_end_generation(engine) -> None:
    free = await engine.chat_completions(_chat(temperature=0, max_tokens=8, ignore_eos=True))
    ids = free["choices"][0]["token_ids"]
    stop_at = ids.index(ids[3])
    stopped = await engine.chat_completions(_chat(temperature=0, max_tokens=8, ignore_eos=True, stop_token_ids=[ids[3]]))
    assert stopped["choices"][0]["token_ids"] == ids[: stop_at + 1]  # the stop token is kept in the ids
    assert stopped["choices"][0]["finish_reason"] == "stop"


async def test_eos_ends_generation_unless_ignored(tiny) -> None:
    model, tokenizer = tiny
    probe = TransformersEngine(model, tokenizer)
    try:
        ids = (await probe.chat_completions(_chat(temperature=0, ignore_eos=True)))["choices"][0]["token_ids"]
    finally:
        await probe.close()
    original = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, ids[2]]  # pretend ids[2] is an EOS
    try:
        eng = TransformersEngine(model, tokenizer)
    finally:
        model.generation_config.eos_token_id = original
    try:
        ended = await eng.chat_completions(_chat(temperature=0))
        assert ended["choices"][0]["token_ids"] == ids[: ids.index(ids[2]) + 1]
        assert ended["choices"][0]["finish_reason"] == "stop"
        ignored = await eng.chat_completions(_chat(temperature=0, ignore_eos=True))
        assert ignored["choices"][0]["token_ids"] == ids
    finally:
        await eng.close()


async def test_same_seed_same_answer_other_seed_other_answer(engine) -> None:
    a = await engine.chat_completions(_chat(seed=7, ignore_eos=True))
    b = await engine.chat_completions(_chat(seed=7, ignore_eos=True))
    c = await engine.chat_completions(_chat(seed=8, ignore_eos=True))
    assert a["choices"][0]["token_ids"] == b["choices"][0]["token_ids"]
    assert a["choices"][0]["message"] == b["choices"][0]["message"]
    assert a["choices"][0]["token_ids"] != c["choices"][0]["token_ids"]


async def test_top_p_keeps_only_the_nucleus(engine) -> None:
    greedy = await engine.chat_completions(_chat(temperature=0, ignore_eos=True))
    tiny_nucleus = await engine.chat_completions(_chat(temperature=1.0, top_p=1e-9, seed=3, ignore_eos=True))
    assert tiny_nucleus["choices"][0]["token_ids"] == greedy["choices"][0]["token_ids"]


async def test_streaming_chunks_reassemble_to_the_non_streaming_answer(engine) -> None:
    body = _chat(seed=11, logprobs=True, max_tokens=10, ignore_eos=True)
    whole = await engine.chat_completions(body)
    chunks = [c async for c in engine.stream_chat_completions({**body, "stream": True,
                                                               "stream_options": {"include_usage": True}})]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[0]["prompt_token_ids"] == whole["prompt_token_ids"]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    token_ids = [t for c in chunks if c["choices"] for t in c["choices"][0].get("token_ids", [])]
    logprobs = [e["logprob"] for c in chunks if c["choices"] and c["choices"][0]["logprobs"]
                for e in c["choices"][0]["logprobs"]["content"]]
    assert content == whole["choices"][0]["message"]["content"]
    assert token_ids == whole["choices"][0]["token_ids"]
    assert logprobs == pytest.approx([e["logprob"] for e in whole["choices"][0]["logprobs"]["content"]], abs=1e-5)
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "length" and set(finishes[:-1]) == {None}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 10


async def test_completions_and_their_stream_agree(engine, tiny) -> None:
    _, tokenizer = tiny
    body = {"prompt": "Once upon a time", "max_tokens": 6, "logprobs": 2, "seed": 5, "ignore_eos": True}
    whole = await engine.completions(body)
    choice = whole["choices"][0]
    assert whole["object"] == "text_completion"
    assert whole["prompt_token_ids"] == tokenizer("Once upon a time")["input_ids"]
    assert len(choice["logprobs"]["token_logprobs"]) == len(choice["token_ids"]) == 6
    assert all(len(top) <= 2 for top in choice["logprobs"]["top_logprobs"])
    chunks = [c async for c in engine.stream_completions({**body, "stream": True})]
    assert "".join(c["choices"][0]["text"] for c in chunks) == choice["text"]
    assert [t for c in chunks for t in c["choices"][0]["token_ids"]] == choice["token_ids"]
    assert chunks[0]["prompt_token_ids"] == whole["prompt_token_ids"]


async def test_completions_accept_token_id_prompts(engine) -> None:
    answer = await engine.completions({"prompt": [1, 2, 3, 4], "max_tokens": 2})
    assert answer["prompt_token_ids"] == [1, 2, 3, 4]


@pytest.mark.parametrize("bad", [{"n": 2}, {"temperature": -1}, {"top_p": 0}, {"max_tokens": 0}])
async def test_invalid_requests_are_400_engine_errors(engine, bad) -> None:
    with pytest.raises(EngineError) as info:
        await engine.chat_completions(_chat(**bad))
    assert info.value.status_code == 400
    assert not info.value.retryable
    assert info.value.body["error"]["type"] == "invalid_request_error"


async def test_n_greater_than_one_is_refused_with_advice(engine) -> None:
    with pytest.raises(EngineError, match="n=1") as info:
        engine.stream_chat_completions(_chat(n=3))
    assert info.value.body["error"]["param"] == "n"


async def test_models_lists_the_served_model(engine) -> None:
    listing = await engine.models()
    assert [m["id"] for m in listing["data"]] == [engine.model_name]


async def test_weight_swap_waits_for_the_batch_in_flight_and_bumps_the_version(tiny) -> None:
    model, tokenizer = tiny
    served, _ = tiny_model(seed=0)  # its own copy: the swap changes it
    new_model, _ = tiny_model(seed=1)
    eng = TransformersEngine(served, tokenizer, batch_window_ms=1)
    try:
        assert eng.policy_version == 0
        stream = eng.stream_chat_completions(_chat(max_tokens=40, ignore_eos=True, logprobs=True, seed=1))
        chunks = [await stream.__anext__(), await stream.__anext__()]  # generation has started
        swap = asyncio.create_task(eng.update_weights(new_model.state_dict()))
        await asyncio.sleep(0)
        queued = asyncio.create_task(eng.chat_completions(_chat(logprobs=True, seed=2, ignore_eos=True)))
        chunks += [c async for c in stream]
        assert await swap == 1
        after = await queued
        old_ids = [t for c in chunks for t in c["choices"][0].get("token_ids", [])]
        old_lps = [e["logprob"] for c in chunks if c["choices"][0].get("logprobs")
                   for e in c["choices"][0]["logprobs"]["content"]]
        assert len(old_ids) == 40 and chunks[-1]["policy_version"] == 0
        assert old_lps == pytest.approx(_forward_logprobs(model, chunks[0]["prompt_token_ids"], old_ids), abs=1e-3)
        assert after["policy_version"] == 1 and eng.policy_version == 1
        new_lps = [e["logprob"] for e in after["choices"][0]["logprobs"]["content"]]
        assert new_lps == pytest.approx(
            _forward_logprobs(new_model, after["prompt_token_ids"], after["choices"][0]["token_ids"]), abs=1e-3)
        assert await eng.update_weights(model.state_dict(), version=10) == 10
    finally:
        await eng.close()


async def test_lora_swap_serves_base_plus_lora_and_replaces_the_previous_one(tiny) -> None:
    peft = pytest.importorskip("peft")
    _, tokenizer = tiny
    served, _ = tiny_model(seed=0)
    eng = TransformersEngine(served, tokenizer)
    try:
        trained, _ = tiny_model(seed=0)
        lora = peft.get_peft_model(trained, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
        for _ in range(2):  # two LoRA versions: the second replaces the first
            with torch.no_grad():
                for name, p in lora.named_parameters():
                    if "lora_B" in name:
                        p.normal_(0, 0.5)
            version = await eng.update_weights(lora=lora)
            answer = await eng.chat_completions(_chat(logprobs=True, ignore_eos=True, seed=4))
            assert answer["policy_version"] == version
            got = [e["logprob"] for e in answer["choices"][0]["logprobs"]["content"]]
            assert got == pytest.approx(_forward_logprobs(lora, answer["prompt_token_ids"],
                                                          answer["choices"][0]["token_ids"]), abs=1e-3)
        assert version == 2
        with pytest.raises(ValueError, match="lora_scale"):
            await eng.update_weights(lora=peft.get_peft_model_state_dict(lora))
    finally:
        await eng.close()


async def test_a_cancelled_stream_frees_its_row(engine) -> None:
    stream = engine.stream_chat_completions(_chat(max_tokens=200, ignore_eos=True))
    await stream.__anext__()
    await stream.__anext__()
    await stream.aclose()
    answer = await asyncio.wait_for(engine.chat_completions(_chat(max_tokens=2)), timeout=30)
    assert len(answer["choices"][0]["token_ids"]) <= 2
    assert engine.stats.tokens_generated < 200 + 2


async def test_close_lets_the_batch_in_flight_and_queued_requests_finish(tiny) -> None:
    model, tokenizer = tiny
    eng = TransformersEngine(model, tokenizer, batch_window_ms=1, max_batch_size=1)
    stream = eng.stream_chat_completions(_chat(max_tokens=150, ignore_eos=True))
    await stream.__anext__()
    await stream.__anext__()  # the worker is busy with this one
    queued = [asyncio.create_task(eng.chat_completions(_chat(max_tokens=2, seed=i))) for i in range(3)]
    await asyncio.sleep(0.01)
    closing = asyncio.create_task(eng.close())
    rest = [c async for c in stream]
    await closing
    assert rest[-1]["choices"][0]["finish_reason"] == "length"
    answers = await asyncio.gather(*queued)
    assert [len(a["choices"][0]["token_ids"]) for a in answers] == [2, 2, 2]
    assert eng.stats.batch_sizes == [1, 1, 1, 1]
