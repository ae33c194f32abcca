"""SGLang behind the gateway, on its native routes: chat calls are templated by the
gateway and answered by ``POST /generate`` on token ids; the span records SGLang's own
``output_ids`` and ``output_token_logprobs``; tool calls are parsed by agentbolt; LoRAs
published by GRPO's ``Publisher`` are loaded with ``/load_lora_adapter`` and named in later
calls (``lora_path``); SGLang's error shapes and aborts become the gateway's errors —
against a fake of SGLang's server (``tests/fakes/sglang_server.py``), not a real one."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from fakes.sglang_server import FakeSGLang

from agentbolt.engines import EngineError, EngineSpec, SGLangEngine
from agentbolt.gateway import Gateway, GatewayConfig, LocalGatewayControl
from agentbolt.models import byte_tokenizer
from agentbolt.server.testing import serve_app_in_thread, serve_in_thread
from agentbolt.store.memory import MemoryStore
from gateway.conftest import ADMIN, GatewayWorld

TOKENIZER = byte_tokenizer()
CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
QUESTION = [{"role": "user", "content": "2 + 3?"}]
PROMPT_IDS, RESPONSE_IDS = "agentbolt.llm.prompt_token_ids", "agentbolt.llm.response_token_ids"
LOGPROBS = "agentbolt.llm.response_logprobs"


def reply(prompt: str) -> str:
    """The fake model: calls the tool when offered it and has no result yet, else answers."""
    if '"add"' in prompt and "<|im_start|>tool" not in prompt:
        return CALL
    return "Four."


@pytest.fixture(params=["cumulative", "incremental"])
def fake(request: pytest.FixtureRequest) -> FakeSGLang:
    return FakeSGLang(TOKENIZER, reply=reply, incremental=request.param == "incremental")


@contextlib.contextmanager
def gateway_over(fake: FakeSGLang) -> Iterator[GatewayWorld]:
    """The real gateway (in a server) in front of ``fake``, forcing T=1 on training calls."""
    with serve_app_in_thread(fake.app) as url:
        engine = SGLangEngine(url, tokenizer=TOKENIZER, tool_parser="hermes", policy_version=0)
        gateway = Gateway(engine, GatewayConfig(sampling={"train": {"temperature": 1.0}}, retry_backoff=0.01))
        with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway) as server:
            w = GatewayWorld(server, engine, gateway)
            yield w
            w.admin.close()


@pytest.fixture
def world(fake: FakeSGLang) -> Iterator[GatewayWorld]:
    with gateway_over(fake) as w:
        yield w


def expected_logprobs(weights: str, n: int) -> list[float]:
    return [FakeSGLang.logprob(weights, i) for i in range(n)]


def test_a_chat_call_is_answered_on_generate_and_recorded_with_the_engines_ids_and_logprobs(
    world: GatewayWorld, fake: FakeSGLang
) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    answer = client.chat.completions.create(model="policy", messages=QUESTION, max_tokens=50)
    assert answer.choices[0].message.content == "Four." and answer.choices[0].finish_reason == "stop"
    sent = fake.seen[-1]
    assert sent["sampling_params"] == {"max_new_tokens": 50, "temperature": 1.0}  # the train mode's, forced
    assert sent["return_logprob"] is True and "lora_path" not in sent and "messages" not in sent
    assert TOKENIZER.decode(sent["input_ids"]).endswith("<|im_start|>assistant\n")
    streamed = client.chat.completions.create(model="policy", messages=QUESTION, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == "Four."
    assert fake.seen[-1]["stream"] is True and fake.seen[-1]["sampling_params"]["max_new_tokens"] is None
    for span in world.spans(a.rollout_id, 2):
        attrs = span["attributes"]
        assert attrs[PROMPT_IDS] == sent["input_ids"]
        assert attrs[RESPONSE_IDS] == [*TOKENIZER("Four.", add_special_tokens=False)["input_ids"],
                                       TOKENIZER.eos_token_id]
        assert attrs[LOGPROBS] == expected_logprobs("base", len(attrs[RESPONSE_IDS]))
        assert attrs["agentbolt.llm.engine"] == "sglang" and attrs["agentbolt.llm.policy_version"] == 0


@pytest.mark.parametrize("incremental", [False, True])
def test_a_server_without_its_tokenizer_sends_ids_only_and_the_text_is_read_from_them(incremental: bool) -> None:
    fake = FakeSGLang(TOKENIZER, reply=reply, incremental=incremental, skip_tokenizer_init=True)
    with gateway_over(fake) as world:
        a = world.claim()
        client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
        call = client.chat.completions.create(model="policy", messages=QUESTION, tools=TOOLS)
        assert call.choices[0].message.tool_calls[0].function.name == "add"
        chunks = client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "hi"}],
                                                stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Four."
        for span in world.spans(a.rollout_id, 2):
            attrs = span["attributes"]
            assert attrs[LOGPROBS] == expected_logprobs("base", len(attrs[RESPONSE_IDS]))
            assert attrs[RESPONSE_IDS][-1] == TOKENIZER.eos_token_id


def test_tool_calls_are_parsed_and_the_next_prompt_continues_the_sampled_ids(
    world: GatewayWorld, fake: FakeSGLang
) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    first = client.chat.completions.create(model="policy", messages=QUESTION, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls" and call.function.name == "add"
    assert json.loads(call.function.arguments) == {"a": 2, "b": 3}
    follow = [*QUESTION, {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
              {"role": "tool", "tool_call_id": call.id, "content": "5"}]
    chunks = list(client.chat.completions.create(model="policy", messages=follow, tools=TOOLS, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Four."
    s1, s2 = (s["attributes"] for s in world.spans(a.rollout_id, 2))
    assert s2[PROMPT_IDS][: len(s1[PROMPT_IDS]) + len(s1[RESPONSE_IDS])] == s1[PROMPT_IDS] + s1[RESPONSE_IDS]
    assert s2["agentbolt.llm.prompt_source"] == "token_exact"
    assert fake.seen[-1]["input_ids"] == s2[PROMPT_IDS]


def test_a_text_completion_gets_its_prompt_ids_from_the_engine(world: GatewayWorld, fake: FakeSGLang) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    answer = client.completions.create(model="policy", prompt="2 + 2 =", max_tokens=3, logprobs=2)
    assert answer.choices[0].text == "Fou" and answer.choices[0].finish_reason == "length"
    assert answer.choices[0].logprobs.tokens == ["F", "o", "u"]
    assert fake.seen[-1]["text"] == "2 + 2 =" and fake.seen[-1]["logprob_start_len"] == 0
    assert fake.seen[-1]["top_logprobs_num"] == 2
    attrs = world.spans(a.rollout_id, 1)[0]["attributes"]
    assert attrs[PROMPT_IDS] == TOKENIZER("2 + 2 =", add_special_tokens=False)["input_ids"]  # as SGLang tokenized it
    assert attrs[LOGPROBS] == expected_logprobs("base", 3)


def test_sglangs_refusals_and_aborts_become_the_gateways_errors(world: GatewayWorld, fake: FakeSGLang) -> None:
    a = world.claim()
    with world.client(a) as c:
        fake.abort_next = ("the request was aborted: out of memory", 503)  # a 5xx abort: retried
        ok = c.post("/chat/completions", json={"model": "m", "messages": QUESTION})
        fake.abort_next = ("Input length exceeds the limit", 400)  # a request SGLang refuses: not retried
        refused = c.post("/chat/completions", json={"model": "m", "messages": QUESTION})
        fake.abort_next = ("Input length exceeds the limit", 400)
        streamed = c.post("/chat/completions", json={"model": "m", "messages": QUESTION, "stream": True})
        wrong = c.post("/chat/completions", json={"model": "m", "messages": QUESTION, "n": 2})
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == "Four."
    assert refused.status_code == 400 and "Input length exceeds the limit" in refused.json()["error"]["message"]
    assert streamed.status_code == 400 and "aborted the call" in streamed.json()["error"]["message"]
    assert wrong.status_code == 400 and "one answer per call" in wrong.json()["error"]["message"]
    spans = [s["attributes"] for s in world.spans(a.rollout_id, 4)]
    assert spans[0]["agentbolt.llm.retries"] == 1  # the 503 abort, retried
    assert [s.get("http.response.status_code") for s in spans] == [200, 400, 400, 400]


@pytest.fixture
def lora_world() -> Iterator[tuple[GatewayWorld, list[FakeSGLang]]]:
    fakes = [FakeSGLang(TOKENIZER), FakeSGLang(TOKENIZER)]
    with serve_app_in_thread(fakes[0].app) as u0, serve_app_in_thread(fakes[1].app) as u1:
        built = SGLangEngine([u0, u1], tokenizer=TOKENIZER, policy_version=0)
        gateway = Gateway(built, GatewayConfig(retry_backoff=0.01))
        with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway) as server:
            w = GatewayWorld(server, built, gateway)
            yield w, fakes
            w.admin.close()


async def test_grpo_publishes_a_lora_that_every_replica_loads_and_later_calls_name(
    lora_world: tuple[GatewayWorld, list[FakeSGLang]], tmp_path: Path
) -> None:
    pytest.importorskip("peft")
    from agentbolt.models import tiny_model
    from agentbolt.training.lora import LoraSettings
    from agentbolt.training.policy import Policy
    from agentbolt.training.publish import Publisher, engine_info

    world, fakes = lora_world
    control = LocalGatewayControl(world.gateway)
    model, tok = tiny_model(seed=4, vocab="bytes", hidden=32, n_layers=1)
    policy = Policy(model, tok, lora=LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]))
    info = await engine_info(control)
    assert info.weight_formats == ("lora_path",) and info.dtype is None  # a server's numerics are not known
    publisher = Publisher(control, policy, info, lora_dir=tmp_path / "loras")
    publisher.require_supported()
    assert await publisher.publish(1, [1, 2, 3]) == (1, {})  # no probe: SGLang reports no dtype
    v1 = str((tmp_path / "loras" / "v1").resolve())
    assert all(f.adapters == {"agentbolt-lora-v1": v1} and f.flushes == 1 for f in fakes)
    assert (Path(v1) / "adapter_config.json").is_file()  # peft's own save, read by SGLang
    a, b = world.claim(), world.claim()
    for attempt in (a, b):  # one rollout on each replica
        with world.client(attempt) as c:
            c.post("/chat/completions", json={"model": "m", "messages": QUESTION}).raise_for_status()
    assert [f.seen[-1]["lora_path"] for f in fakes] == ["agentbolt-lora-v1"] * 2
    attrs = world.spans(a.rollout_id, 1)[0]["attributes"]
    assert attrs["agentbolt.llm.policy_version"] == 1
    assert attrs[LOGPROBS] == expected_logprobs("agentbolt-lora-v1", len(attrs[RESPONSE_IDS]))
    assert await publisher.publish(2, [1, 2, 3]) == (2, {})
    v2 = str((tmp_path / "loras" / "v2").resolve())
    for f in fakes:
        assert f.lora_calls[-2:] == [("load", {"lora_name": "agentbolt-lora-v2", "lora_path": v2}),
                                     ("unload", {"lora_name": "agentbolt-lora-v1"})]
        assert f.adapters == {"agentbolt-lora-v2": v2} and f.flushes == 2


async def test_a_replica_refusing_the_lora_leaves_the_old_one_served_and_tensors_are_refused(
    lora_world: tuple[GatewayWorld, list[FakeSGLang]], tmp_path: Path
) -> None:
    world, fakes = lora_world
    control = LocalGatewayControl(world.gateway)
    lora = tmp_path / "lora"
    lora.mkdir()
    (lora / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 4, "lora_alpha": 8}))
    assert await control.update_weights(lora_path=str(lora)) == 1
    fakes[1].adapters["agentbolt-lora-v2"] = "taken"  # replica 1 will refuse the next name
    with pytest.raises(EngineError) as err:
        await control.update_weights(lora_path=str(lora))
    assert err.value.status_code == 400 and "already loaded" in err.value.message
    assert list(fakes[0].adapters) == ["agentbolt-lora-v1"]  # v2 was unloaded again from replica 0
    assert world.engine.lora_name == "agentbolt-lora-v1" and world.engine.policy_version == 1  # type: ignore[attr-defined]
    with pytest.raises(EngineError) as err:
        await control.update_weights(state_dict={"w": [0.0]})
    assert err.value.status_code == 501 and "lora_path" in err.value.message


async def test_a_server_started_without_lora_says_how_to_start_it(tmp_path: Path) -> None:
    fake = FakeSGLang(TOKENIZER, enable_lora=False)
    with serve_app_in_thread(fake.app) as url:
        engine = SGLangEngine(url + "/v1", tokenizer=TOKENIZER)  # a vLLM-style URL: /v1 is dropped
        await engine.start()
        try:
            with pytest.raises(EngineError) as err:
                await engine.update_weights(lora_path=str(tmp_path))
            assert (await engine.models())["data"][0]["id"] == "Qwen/Qwen2.5-0.5B-Instruct"
        finally:
            await engine.close()
    assert err.value.status_code == 400 and "--enable-lora" in err.value.message


def test_the_spec_needs_a_tokenizer_and_the_command_line_takes_the_kind() -> None:
    from agentbolt.cli.server_cmd import EngineKind, _gateway_spec

    with pytest.raises(ValueError, match="needs the served model's tokenizer"):
        EngineSpec(kind="sglang", url="http://127.0.0.1:30000")
    with pytest.raises(ValueError, match=r"http://127\.0\.0\.1:30000"):
        EngineSpec(kind="sglang", tokenizer="x")
    spec = _gateway_spec(EngineKind.SGLANG, ["http://a:30000", "http://b:30000"], None, None, None, "cpu", None, None,
                         tokenizer="Qwen/Qwen2.5-0.5B-Instruct", context_length=32768)
    assert spec is not None and spec.engine.kind == "sglang" and spec.engine.url == ["http://a:30000", "http://b:30000"]
