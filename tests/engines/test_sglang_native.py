"""SGLang's native shapes in OpenAI terms (``agentbolt/engines/sglang_native.py``): the
``/generate`` request an OpenAI completions body becomes, SGLang's error bodies and aborts
as EngineErrors with their status, and streamed events — cumulative (SGLang's default) or
incremental — as chunks of only what is new. (The whole path, through the gateway and a
fake SGLang server, is ``tests/gateway/test_sglang_engine.py``.)"""

from __future__ import annotations

import orjson
import pytest

from agentbolt.engines import EngineError
from agentbolt.engines.sglang_native import Detokenizer, GenerateStream, completion_of, error_of, generate_request

pytest.importorskip("transformers", reason="the served model's tokenizer (transformers)")
from agentbolt.models import byte_tokenizer  # noqa: E402

TOKENIZER = byte_tokenizer()
DETOKENIZER = Detokenizer(TOKENIZER)


def test_a_completions_body_becomes_a_generate_request_under_sglangs_names() -> None:
    body = {"prompt": [1, 2, 3], "max_tokens": 7, "temperature": 1.0, "top_k": -1, "min_tokens": 2, "seed": 5,
            "stop": ["\n"], "logprobs": 3, "stream": True, "return_token_ids": True, "model": "policy"}
    assert generate_request(body, lora="agentbolt-lora-v2", max_tokens=None) == {
        "input_ids": [1, 2, 3],
        "sampling_params": {"max_new_tokens": 7, "temperature": 1.0, "top_k": -1, "min_new_tokens": 2,
                            "sampling_seed": 5, "stop": ["\n"]},
        "return_logprob": True, "return_text_in_logprobs": True, "top_logprobs_num": 3,
        "lora_path": "agentbolt-lora-v2", "stream": True,
    }
    # no limit: null, which SGLang reads as all the room the context leaves (left out, it would mean 128)
    assert generate_request({"prompt": [[4, 5]]}, lora=None, max_tokens=None)["sampling_params"] == {
        "max_new_tokens": None}
    assert generate_request({"prompt": [4]}, lora=None, max_tokens=64)["sampling_params"] == {"max_new_tokens": 64}
    text = generate_request({"prompt": "2 + 2 ="}, lora=None, max_tokens=None)
    assert text["text"] == "2 + 2 =" and text["logprob_start_len"] == 0  # its ids come back from SGLang


@pytest.mark.parametrize("body", [{"prompt": [1], "n": 2}, {"prompt": [1], "echo": True}, {"prompt": ["a", "b"]},
                                  {"prompt": []}])
def test_what_one_generate_call_cannot_answer_is_a_400(body: dict) -> None:
    with pytest.raises(EngineError) as err:
        generate_request(body, lora=None, max_tokens=None)
    assert err.value.status_code == 400


@pytest.mark.parametrize(("status", "body", "message"), [
    (400, {"error": {"message": "The input (9000 tokens) is longer than the model's context length"}},
     "The input (9000 tokens) is longer than the model's context length"),
    (503, {"object": "error", "message": "Request aborted: server overloaded", "type": "503", "param": None,
           "code": 503}, "Request aborted: server overloaded"),  # an abort raised as FastAPI's HTTPException
    (400, {"success": False, "error_message": "LoRA is not enabled. Please set `--enable-lora` to enable LoRA.",
           "loaded_adapters": {}}, "LoRA is not enabled. Please set `--enable-lora` to enable LoRA."),
    (400, {"error": "sampling_params must be an object"}, "sampling_params must be an object"),
])
def test_sglangs_error_bodies_keep_their_status_and_message(status: int, body: dict, message: str) -> None:
    err = error_of(status, orjson.dumps(body), "http://gpu-1:30000")
    assert (err.status_code, err.message) == (status, message)
    assert err.replica_down == (status == 503)


def _event(ids: list[int], total: int, finish: dict | None = None, text: str = "") -> dict:
    lps = [[-0.5, t, str(t)] for t in ids]
    return {"text": text, "output_ids": ids,
            "meta_info": {"finish_reason": finish, "prompt_tokens": 2, "completion_tokens": total,
                          "output_token_logprobs": lps}}


@pytest.mark.parametrize("incremental", [False, True])
def test_streamed_events_become_chunks_of_only_what_is_new(incremental: bool) -> None:
    request = {"input_ids": [1, 2]}
    stream = GenerateStream(request, {"logprobs": 0}, model="m", detokenizer=DETOKENIZER, where="here")
    parts = [[7], [8, 9], [10]]
    texts = ["a", "bc", "d"]
    chunks, seen, shown = [], [], ""
    for k, (ids, text) in enumerate(zip(parts, texts, strict=True)):
        seen += ids
        shown += text
        last = k == len(parts) - 1
        event = _event(ids if incremental else list(seen), len(seen), {"type": "stop"} if last else None,
                       text if incremental else shown)
        chunks.append(stream.chunk(event))
    assert [c["choices"][0]["token_ids"] for c in chunks] == parts
    assert [c["choices"][0]["text"] for c in chunks] == texts
    assert [c["choices"][0]["logprobs"]["token_logprobs"] for c in chunks] == [[-0.5], [-0.5, -0.5], [-0.5]]
    assert chunks[0]["prompt_token_ids"] == [1, 2] and "prompt_token_ids" not in chunks[1]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, "stop"]
    assert stream.usage()["usage"] == {"prompt_tokens": 2, "completion_tokens": 4, "total_tokens": 6}


def test_an_abort_or_an_error_event_in_a_stream_raises_with_its_status() -> None:
    stream = GenerateStream({"input_ids": [1]}, {}, model=None, detokenizer=DETOKENIZER, where="here")
    with pytest.raises(EngineError) as err:
        stream.chunk(_event([3], 1, {"type": "abort", "message": "retracted", "status_code": 503}))
    assert err.value.status_code == 503 and "retracted" in err.value.message
    with pytest.raises(EngineError) as err:
        stream.chunk({"error": {"message": "bad request", "type": "invalid_request_error"}})
    assert err.value.status_code == 400 and err.value.message == "bad request"


def test_without_text_from_the_server_the_text_is_the_tokenizers_reading_of_its_ids() -> None:
    """``--skip-tokenizer-init``: SGLang sends ids (and logprob entries without text) only."""
    ids = [*TOKENIZER("héllo", add_special_tokens=False)["input_ids"], TOKENIZER.eos_token_id]
    meta = {"finish_reason": {"type": "stop", "matched": ids[-1]}, "prompt_tokens": 1, "completion_tokens": len(ids),
            "output_token_logprobs": [[-0.5, t, None] for t in ids]}
    answer = completion_of({"output_ids": ids, "meta_info": meta}, {"input_ids": [1]}, {"logprobs": 0}, model=None,
                           detokenizer=DETOKENIZER, where="here")
    choice = answer["choices"][0]
    assert choice["text"] == "héllo" and choice["token_ids"] == ids  # the ids stay SGLang's
    assert choice["logprobs"]["tokens"] == [TOKENIZER.decode([t]) for t in ids]  # each token's own text
    stream = GenerateStream({"input_ids": [1]}, {}, model=None, detokenizer=DETOKENIZER, where="here")
    shown = []
    for k in range(1, len(ids) + 1):  # one byte at a time: "é" is two, held back until whole
        finish = meta["finish_reason"] if k == len(ids) else None
        event = {"output_ids": ids[:k], "meta_info": {**meta, "finish_reason": finish, "completion_tokens": k}}
        shown.append(stream.chunk(event)["choices"][0]["text"])
    assert shown == ["h", "", "é", "l", "l", "o", ""]
