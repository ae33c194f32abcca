"""Putting new weights into the serving engine: pause → drain → load → resume, from the
trainer's own event loop (LocalGatewayControl) or over HTTP (RemoteGateway and
``POST /v1/gateway/weights``), with the policy version every span records."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

torch = pytest.importorskip("torch", reason="weight updates need torch")
pytest.importorskip("transformers", reason="the transformers engine needs transformers")
pytest.importorskip("safetensors", reason="weights travel as safetensors")

from safetensors.torch import save

from agentbolt.engines import EngineError, OpenAIEngine, engine_app
from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.engines.weight_update import WeightUpdate
from agentbolt.gateway import Gateway, GatewayConfig, LocalGatewayControl, RemoteGateway
from agentbolt.gateway.control import WEIGHTS_ROUTE, safetensors_bytes
from agentbolt.models import tiny_model
from agentbolt.server.app import WEIGHTS_PATH
from agentbolt.server.testing import serve_app_in_thread, serve_in_thread
from agentbolt.store.errors import AuthenticationError, PermissionDeniedError
from agentbolt.store.memory import MemoryStore
from gateway.conftest import ADMIN, Attempt, GatewayWorld, serving
from gateway.fakes import FakeEngine

MESSAGES = [{"role": "user", "content": "Say something."}]
CONFIG = GatewayConfig(sampling={"train": {"temperature": 1.0, "seed": 3}, "val": {"temperature": 0.0}})


class SwappableFake(FakeEngine):
    """The scriptable fake engine, with weight updates that only bump its version."""

    supports_weight_updates = True

    def __init__(self) -> None:
        super().__init__(policy_version=1)
        self.updates: list[dict[str, Any]] = []

    async def load_weights(self, update: WeightUpdate, *, version: int | None = None) -> int:
        self.updates.append({"state_dict": update.state_dict, "lora": update.lora, "lora_scale": update.lora_scale,
                             "lora_path": update.lora_path})
        self._version = version if version is not None else (self._version or 0) + 1
        return self._version


@pytest.fixture
def tworld() -> Iterator[GatewayWorld]:
    model, tokenizer = tiny_model(seed=0)
    with serving(TransformersEngine(model, tokenizer, default_max_tokens=8, num_threads=1), CONFIG) as w:
        yield w


@pytest.fixture
def fworld() -> Iterator[GatewayWorld]:
    with serving(SwappableFake(), CONFIG) as w:
        yield w


def _forward_logprobs(model: Any, prompt_ids: list[int], ids: list[int]) -> list[float]:
    """Chosen-token logprobs of ``ids`` after ``prompt_ids``, straight from ``model``."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt_ids + ids])).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    return [float(logp[len(prompt_ids) - 1 + i, t]) for i, t in enumerate(ids)]


async def _chat(a: Attempt, **extra: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=a.base_url, headers={"Authorization": f"Bearer {a.token}"}, timeout=60) as c:
        return await c.post("/chat/completions", json={"model": "tiny", "messages": MESSAGES, **extra})


def _served_by(answer: dict[str, Any], model: Any) -> bool:
    """Whether ``answer``'s logprobs are ``model``'s."""
    lps = [e["logprob"] for e in answer["choices"][0]["logprobs"]["content"]]
    ref = _forward_logprobs(model, answer["prompt_token_ids"], answer["choices"][0]["token_ids"])
    return bool(lps == pytest.approx(ref, abs=1e-3))


async def _wait_until(predicate: Any, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


# --------------------------------------------------------------------------- in this process


async def test_local_control_swaps_weights_after_the_calls_in_flight(tworld: GatewayWorld) -> None:
    control = LocalGatewayControl(tworld.gateway, server_url=tworld.url)
    old, _ = tiny_model(seed=0)
    new, _ = tiny_model(seed=1)
    a, b = tworld.claim("val"), tworld.claim("val")
    long_call = asyncio.create_task(_chat(a, max_tokens=200, ignore_eos=True))
    await _wait_until(lambda: tworld.gateway.in_flight == 1)
    assert await control.policy_version() == 0
    version = await control.update_weights(state_dict=new.state_dict(), version=7)
    assert version == 7 and await control.policy_version() == 7
    assert long_call.done()  # drained: it finished before the swap, on the old weights
    before = (await long_call).json()
    assert before["policy_version"] == 0 and len(before["choices"][0]["token_ids"]) == 200
    assert _served_by(before, old)
    after = (await _chat(b, max_tokens=6)).json()
    assert after["policy_version"] == 7 and _served_by(after, new) and not _served_by(after, old)
    assert not tworld.gateway.paused
    for attempt, expected in ((a, 0), (b, 7)):
        (span,) = tworld.spans(attempt.rollout_id, 1)
        assert span["attributes"]["agentbolt.llm.policy_version"] == expected
    assert (await control.status())["policy_version"] == 7
    assert control.engine is tworld.engine


async def test_new_calls_get_429_until_the_swap_is_done(fworld: GatewayWorld) -> None:
    engine: SwappableFake = fworld.engine  # type: ignore[assignment]
    engine.gate = threading.Event()  # calls hang until it is set
    control = LocalGatewayControl(fworld.gateway)
    a, b, c = fworld.claim(), fworld.claim(), fworld.claim()
    in_flight = asyncio.create_task(_chat(a))
    await _wait_until(lambda: fworld.gateway.in_flight == 1)
    update = asyncio.create_task(control.update_weights(lora_path="/loras/step-1"))
    await _wait_until(lambda: fworld.gateway.paused)
    turned_away = await _chat(b)
    assert turned_away.status_code == 429 and turned_away.headers["retry-after"]
    await asyncio.sleep(0.1)
    assert not update.done() and engine.updates == []  # still draining
    engine.gate.set()
    assert await update == 2
    assert engine.updates == [{"state_dict": None, "lora": None, "lora_scale": None, "lora_path": "/loras/step-1"}]
    assert (await in_flight).status_code == 200
    assert (await _chat(c)).status_code == 200
    assert fworld.spans(a.rollout_id, 1)[0]["attributes"]["agentbolt.llm.policy_version"] == 1
    assert fworld.spans(c.rollout_id, 1)[0]["attributes"]["agentbolt.llm.policy_version"] == 2


async def test_a_drain_timeout_loads_nothing_and_resumes(fworld: GatewayWorld) -> None:
    engine: SwappableFake = fworld.engine  # type: ignore[assignment]
    engine.gate = threading.Event()
    a = fworld.claim()
    in_flight = asyncio.create_task(_chat(a))
    await _wait_until(lambda: fworld.gateway.in_flight == 1)
    with pytest.raises(TimeoutError, match="still in flight after 0.1 s"):
        await LocalGatewayControl(fworld.gateway).update_weights(lora_path="/x", drain_timeout=0.1)
    assert engine.updates == [] and engine.policy_version == 1 and not fworld.gateway.paused
    remote = RemoteGateway(fworld.url, token=ADMIN)
    try:
        with pytest.raises(TimeoutError, match="still in flight"):
            await remote.update_weights(lora_path="/x", drain_timeout=0.1)
    finally:
        await remote.aclose()
    assert engine.updates == [] and not fworld.gateway.paused
    engine.gate.set()
    assert (await in_flight).status_code == 200


# --------------------------------------------------------------------------- over HTTP


async def test_remote_gateway_sends_a_lora_as_tensors_or_as_a_directory(
    tworld: GatewayWorld, tmp_path: Path
) -> None:
    peft = pytest.importorskip("peft")
    base, _ = tiny_model(seed=0)
    lora = peft.get_peft_model(base, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    remote = RemoteGateway(tworld.url, token=ADMIN)
    try:
        for step, how in enumerate(("tensors", "directory"), start=1):
            with torch.no_grad():
                gen = torch.Generator().manual_seed(step)
                for name, p in lora.named_parameters():
                    if "lora_B" in name:
                        p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
            if how == "tensors":
                version = await remote.update_weights(lora=lora)
            else:
                lora.save_pretrained(tmp_path / "lora")
                version = await remote.update_weights(lora_path=str(tmp_path / "lora"))
            assert version == step and await remote.policy_version() == step
            answer = (await _chat(tworld.claim("val"), max_tokens=6)).json()
            assert answer["policy_version"] == step
            assert _served_by(answer, lora)
        with lora.disable_adapter():
            assert not _served_by(answer, lora)  # the LoRA makes a difference
    finally:
        await remote.aclose()
    assert not tworld.gateway.paused


async def test_remote_gateway_sends_a_full_state_dict(tworld: GatewayWorld) -> None:
    new, _ = tiny_model(seed=1)  # tied embeddings: one storage under two names
    remote = RemoteGateway(tworld.url, token=ADMIN)
    try:
        assert await remote.update_weights(state_dict=new.state_dict(), version=3) == 3
    finally:
        await remote.aclose()
    answer = (await _chat(tworld.claim("val"), max_tokens=6)).json()
    assert answer["policy_version"] == 3 and _served_by(answer, new)
    assert tworld.admin.get("/v1/gateway/status").json()["policy_version"] == 3


async def test_bad_bodies_are_400_and_change_nothing(tworld: GatewayWorld, tmp_path: Path) -> None:
    post = tworld.admin.post
    octet = {"content-type": "application/octet-stream"}
    r = post(WEIGHTS_ROUTE, content=b"these are not tensors", headers=octet)
    assert r.status_code == 400 and "safetensors" in r.json()["error"]["message"]
    assert post(WEIGHTS_ROUTE, content=b"", headers=octet).status_code == 400
    r = post(WEIGHTS_ROUTE, json={"adapter": "/x"})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("lora_path is missing: a JSON body must be")
    r = post(WEIGHTS_ROUTE, content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    r = post(WEIGHTS_ROUTE, json=["/x"])
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("the request body must be a JSON object")
    r = post(WEIGHTS_ROUTE, json={"lora_path": str(tmp_path)})
    assert r.status_code == 400 and "adapter_config.json is missing" in r.json()["error"]["message"]
    lora_tensors = save({"model.layers.0.self_attn.q_proj.lora_A.weight": torch.zeros(2, 64),
                         "model.layers.0.self_attn.q_proj.lora_B.weight": torch.zeros(64, 2)})
    r = post(WEIGHTS_ROUTE, params={"kind": "lora"}, content=lora_tensors, headers=octet)
    assert r.status_code == 400 and "lora_scale" in r.json()["error"]["message"]
    remote = RemoteGateway(tworld.url, token=ADMIN)
    try:
        with pytest.raises(ValueError, match="keys the served model does not have"):
            await remote.update_weights(state_dict={"not.a.weight": torch.zeros(3)})
        with pytest.raises(ValueError, match="exactly one of"):
            await remote.update_weights()
    finally:
        await remote.aclose()
    assert tworld.engine.policy_version == 0 and not tworld.gateway.paused


async def test_the_weights_route_needs_the_admin_token(fworld: GatewayWorld) -> None:
    a = fworld.claim()
    body = safetensors_bytes({"w": torch.zeros(2)})
    async with httpx.AsyncClient(base_url=fworld.url) as client:
        scoped = await client.post(WEIGHTS_ROUTE, content=body, headers={"Authorization": f"Bearer {a.token}"})
        assert scoped.status_code == 403
        assert (await client.post(WEIGHTS_ROUTE, content=body)).status_code == 401
    for token, error in ((a.token, PermissionDeniedError), (None, AuthenticationError)):
        remote = RemoteGateway(fworld.url, token=token)
        try:
            with pytest.raises(error):
                await remote.update_weights(lora_path="/x")
        finally:
            await remote.aclose()
    assert fworld.engine.updates == []  # type: ignore[attr-defined]


async def test_an_engine_that_cannot_load_weights_answers_501() -> None:
    with serve_app_in_thread(engine_app(FakeEngine())) as provider:
        gateway = Gateway(OpenAIEngine(provider + "/v1"), CONFIG)
        with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway) as url:
            async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}) as client:
                r = await client.post(WEIGHTS_ROUTE, json={"lora_path": "/x"})
            assert r.status_code == 501 and "openai engine cannot load new weights" in r.json()["error"]["message"]
            remote = RemoteGateway(url, token=ADMIN)
            try:
                with pytest.raises(EngineError) as err:
                    await remote.update_weights(state_dict={"w": torch.zeros(1)})
                assert err.value.status_code == 501
            finally:
                await remote.aclose()
            with pytest.raises(EngineError, match="cannot load new weights"):
                await LocalGatewayControl(gateway).update_weights(lora_path="/x")
            assert not gateway.paused


def test_weights_have_a_body_limit_of_their_own() -> None:
    assert WEIGHTS_PATH == WEIGHTS_ROUTE
    engine = SwappableFake()
    gateway = Gateway(engine, CONFIG)
    headers = {"Authorization": f"Bearer {ADMIN}", "content-type": "application/octet-stream"}
    with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway, max_body_bytes=1024,
                         max_weights_bytes=100_000) as url:
        ok = httpx.post(url + WEIGHTS_ROUTE, content=safetensors_bytes({"w": torch.zeros(4096)}), headers=headers)
        assert ok.status_code == 200 and ok.json() == {"policy_version": 2}
        big = httpx.post(url + WEIGHTS_ROUTE, content=safetensors_bytes({"w": torch.zeros(40_000)}), headers=headers)
        assert big.status_code == 413 and "max_weights_bytes" in big.text
        other = httpx.post(url + "/v1/rollouts", content=b"x" * 4096, headers=headers)
        assert other.status_code == 413 and "max_body_bytes" in other.text
    assert [u["state_dict"]["w"].shape for u in engine.updates] == [torch.Size([4096])]
