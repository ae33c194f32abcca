"""Acceptance: the gateway in front of the real transformers engine (a tiny random model
built from a config, CPU): token ids and logprobs in the span are the engine's, streams
reassemble to the recorded answer, scoped tokens stay in their rollout, pause → 429 →
resume with in-flight calls finishing, and a weight swap bumps the recorded version."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

torch = pytest.importorskip("torch", reason="the transformers engine needs torch")
pytest.importorskip("transformers", reason="the transformers engine needs transformers")

from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.models import tiny_model
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore
from gateway.conftest import ADMIN, GatewayWorld

MESSAGES = [{"role": "user", "content": "Say something."}]


@pytest.fixture
def model_and_tokenizer():  # type: ignore[no-untyped-def]
    """A fresh model per test: a weight swap changes the served model in place."""
    return tiny_model(seed=0)


@pytest.fixture
def tworld(model_and_tokenizer) -> Iterator[GatewayWorld]:  # type: ignore[no-untyped-def]
    model, tokenizer = model_and_tokenizer
    engine = TransformersEngine(model, tokenizer, max_batch_size=8, batch_window_ms=5, default_max_tokens=16)
    config = GatewayConfig(sampling={"train": {"temperature": 1.0, "seed": 3}, "val": {"temperature": 0.0}})
    gateway = Gateway(engine, config)
    with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway) as url:
        w = GatewayWorld(url, engine, gateway)
        yield w
        w.admin.close()


def _greedy_reference(model, prompt_ids: list[int], n: int) -> tuple[list[int], list[float]]:  # type: ignore[no-untyped-def]
    """Greedy continuation and its chosen-token logprobs, computed straight from the model."""
    ids = list(prompt_ids)
    out, lps = [], []
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids])).logits[0, -1].float()
            logp = torch.log_softmax(logits, -1)
            tok = int(torch.argmax(logp))
            out.append(tok)
            lps.append(float(logp[tok]))
            ids.append(tok)
    return out, lps


def test_token_ids_and_logprobs_in_the_span_are_the_engines(tworld: GatewayWorld, model_and_tokenizer) -> None:  # type: ignore[no-untyped-def]
    a = tworld.claim("val")  # val: temperature forced to 0, so the answer is the greedy one
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    answer = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=6, temperature=0.9)
    extra = answer.choices[0].model_extra
    (span,) = tworld.spans(a.rollout_id, 1)
    attrs = span["attributes"]
    assert attrs["agentbolt.llm.token_ids_source"] == "engine"
    assert attrs["agentbolt.llm.response_token_ids"] == extra["token_ids"]
    assert attrs["agentbolt.llm.prompt_token_ids"] == answer.model_extra["prompt_token_ids"]
    assert attrs["gen_ai.request.temperature"] == 0.0
    n = len(attrs["agentbolt.llm.response_token_ids"])
    assert n >= 1
    ids, lps = _greedy_reference(model_and_tokenizer[0], attrs["agentbolt.llm.prompt_token_ids"], n)
    assert attrs["agentbolt.llm.response_token_ids"] == ids
    assert attrs["agentbolt.llm.response_logprobs"] == pytest.approx(lps, abs=1e-3)
    assert attrs["agentbolt.llm.engine"] == "transformers"


def test_streaming_chunks_reassemble_to_the_recorded_response(tworld: GatewayWorld) -> None:
    a = tworld.claim("train")
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    chunks = list(client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=8, stream=True))
    assert len(chunks) >= 3
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    ids = [i for c in chunks if c.choices for i in (c.choices[0].model_extra.get("token_ids") or [])]
    (span,) = tworld.spans(a.rollout_id, 1)
    attrs = span["attributes"]
    response = json.loads(attrs["agentbolt.llm.response"])
    assert response["choices"][0]["message"]["content"] == text
    assert attrs["agentbolt.llm.response_token_ids"] == ids
    assert len(attrs["agentbolt.llm.response_logprobs"]) == len(ids)
    assert attrs["gen_ai.usage.output_tokens"] == len(ids)


def test_a_scoped_token_cannot_call_another_rollouts_url(tworld: GatewayWorld) -> None:
    mine, other = tworld.claim(), tworld.claim()
    r = httpx.post(
        other.base_url + "/chat/completions",
        json={"model": "tiny", "messages": MESSAGES, "max_tokens": 2},
        headers={"Authorization": f"Bearer {mine.token}"},
    )
    assert r.status_code == 403
    assert tworld.admin.get("/v1/gateway/status").json()["calls"] == 0


def test_pause_429_resume_with_in_flight_calls_finishing(tworld: GatewayWorld) -> None:
    a = tworld.claim()
    statuses: list[int] = []
    body = {"model": "tiny", "messages": MESSAGES, "max_tokens": 48, "min_tokens": 48}
    with tworld.client(a) as c:
        long_call = threading.Thread(target=lambda: statuses.append(c.post("/chat/completions", json=body).status_code))
        long_call.start()
        deadline = time.monotonic() + 10
        while tworld.admin.get("/v1/gateway/status").json()["in_flight"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        tworld.admin.post("/v1/gateway/pause").raise_for_status()
        r = c.post("/chat/completions", json={**body, "max_tokens": 2})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 0
        drained = tworld.admin.post("/v1/gateway/pause", params={"drain": True, "timeout": 60}).json()
        assert drained["in_flight"] == 0
        long_call.join(30)
        assert statuses == [200]  # the call in flight finished
        tworld.admin.post("/v1/gateway/resume").raise_for_status()
        assert c.post("/chat/completions", json={**body, "max_tokens": 2}).status_code == 200
    tworld.spans(a.rollout_id, 2)


def test_a_weight_swap_bumps_the_recorded_policy_version(tworld: GatewayWorld, model_and_tokenizer) -> None:  # type: ignore[no-untyped-def]
    engine: TransformersEngine = tworld.engine  # type: ignore[assignment]
    a = tworld.claim("val")
    body = {"model": "tiny", "messages": MESSAGES, "max_tokens": 4}
    with tworld.client(a) as c:
        c.post("/chat/completions", json=body).raise_for_status()
        before = engine.policy_version
        tworld.admin.post("/v1/gateway/pause", params={"drain": True}).raise_for_status()
        state = {
            k: v + 0.01 for k, v in model_and_tokenizer[0].state_dict().items() if k.endswith("mlp.up_proj.weight")
        }
        asyncio.run(engine.update_weights(state, version=before + 1))
        tworld.admin.post("/v1/gateway/resume").raise_for_status()
        c.post("/chat/completions", json=body).raise_for_status()
    spans = tworld.spans(a.rollout_id, 2)
    assert [s["attributes"]["agentbolt.llm.policy_version"] for s in spans] == [before, before + 1]
