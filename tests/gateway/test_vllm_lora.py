"""vLLM weight updates are runtime LoRAs: load on every replica, serve the new
LoRA by name, unload the previous one, bump the version — against a fake of vLLM's
``/v1/load_lora_adapter`` API (no GPU here)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentbolt.engines import EngineError, VLLMEngine
from agentbolt.gateway import Gateway, GatewayConfig, LocalGatewayControl, RemoteGateway
from agentbolt.server.testing import serve_app_in_thread, serve_in_thread
from agentbolt.store.memory import MemoryStore
from gateway.conftest import ADMIN, GatewayWorld
from gateway.vllm_fake import BASE_MODEL, FakeVLLM

MESSAGES = [{"role": "user", "content": "2+2?"}]


@pytest.fixture
def replicas() -> Iterator[list[FakeVLLM]]:
    fakes = [FakeVLLM(), FakeVLLM()]
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(serve_app_in_thread(f.app)) for f in fakes]
        for fake, url in zip(fakes, urls, strict=True):
            fake.url = url + "/v1"  # type: ignore[attr-defined]
        yield fakes


@pytest.fixture
def lora_dir(tmp_path: Path) -> Path:
    """What ``save_pretrained`` leaves behind (the fake only checks the config is there)."""
    d = tmp_path / "lora"
    d.mkdir()
    (d / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 4, "lora_alpha": 8}))
    return d


@pytest.fixture
def vworld(replicas: list[FakeVLLM]) -> Iterator[GatewayWorld]:
    engine = VLLMEngine([f.url for f in replicas], model=BASE_MODEL, policy_version=0)  # type: ignore[attr-defined]
    gateway = Gateway(engine, GatewayConfig())
    with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway) as url:
        w = GatewayWorld(url, engine, gateway)
        yield w
        w.admin.close()


def _ask(w: GatewayWorld) -> None:
    a = w.claim()
    with w.client(a) as c:
        c.post("/chat/completions", json={"model": "whatever", "messages": MESSAGES}).raise_for_status()


async def test_loading_a_lora_switches_the_served_model_on_every_replica(
    vworld: GatewayWorld, replicas: list[FakeVLLM], lora_dir: Path
) -> None:
    control = LocalGatewayControl(vworld.gateway)  # awaited from this test's loop, not the server's
    _ask(vworld)
    assert await control.update_weights(lora_path=str(lora_dir)) == 1
    for fake in replicas:
        assert fake.lora_calls == [("load", {"lora_name": "agentbolt-lora-v1", "lora_path": str(lora_dir)})]
    _ask(vworld)
    _ask(vworld)  # the second rollout sticks to the other replica
    assert await control.update_weights(lora_path=str(lora_dir), version=5) == 5
    for fake in replicas:
        assert fake.lora_calls[1:] == [
            ("load", {"lora_name": "agentbolt-lora-v5", "lora_path": str(lora_dir)}),
            ("unload", {"lora_name": "agentbolt-lora-v1"}),
        ]
        assert list(fake.adapters) == ["agentbolt-lora-v5"]
    _ask(vworld)
    sent = [b["model"] for f in replicas for b in f.seen]
    assert sorted(sent) == sorted([BASE_MODEL, "agentbolt-lora-v1", "agentbolt-lora-v1", "agentbolt-lora-v5"])
    assert vworld.admin.get("/v1/gateway/status").json()["policy_version"] == 5
    rollouts = vworld.admin.get("/v1/rollouts").json()["items"]
    versions = sorted(vworld.spans(r["rollout_id"], 1)[0]["attributes"]["agentbolt.llm.policy_version"] for r in rollouts)
    assert versions == [0, 1, 1, 5]


async def test_a_replica_refusing_the_lora_leaves_the_old_one_served(
    vworld: GatewayWorld, replicas: list[FakeVLLM], lora_dir: Path, tmp_path: Path
) -> None:
    control = LocalGatewayControl(vworld.gateway)
    await control.update_weights(lora_path=str(lora_dir))
    replicas[1].adapters["agentbolt-lora-v2"] = "taken"  # replica 1 will refuse the next name
    with pytest.raises(EngineError) as err:
        await control.update_weights(lora_path=str(lora_dir))
    assert err.value.status_code == 400 and "already been loaded" in err.value.message
    assert list(replicas[0].adapters) == ["agentbolt-lora-v1"]  # v2 was unloaded again from replica 0
    assert vworld.engine.lora_name == "agentbolt-lora-v1"  # type: ignore[attr-defined]
    assert vworld.engine.policy_version == 1
    assert not vworld.gateway.paused


def test_over_http_a_lora_path_is_passed_on_to_vllm(vworld: GatewayWorld, replicas: list[FakeVLLM], lora_dir: Path) -> None:
    r = vworld.admin.post("/v1/gateway/weights", json={"lora_path": str(lora_dir), "version": 3})
    assert r.status_code == 200 and r.json() == {"policy_version": 3}
    assert replicas[0].adapters == {"agentbolt-lora-v3": str(lora_dir)}
    missing = vworld.admin.post("/v1/gateway/weights", json={"lora_path": "/nowhere"})
    assert missing.status_code == 404 and "No adapter found" in missing.json()["error"]["message"]
    assert vworld.engine.policy_version == 3


async def test_tensors_for_vllm_are_refused_with_what_to_do(vworld: GatewayWorld) -> None:
    torch = pytest.importorskip("torch")
    remote = RemoteGateway(vworld.url, token=ADMIN)
    try:
        with pytest.raises(EngineError) as err:
            await remote.update_weights(state_dict={"w": torch.zeros(2)})
        assert err.value.status_code == 501
        assert "save_pretrained" in err.value.message and "NCCL" in err.value.message
    finally:
        await remote.aclose()
    with pytest.raises(EngineError, match="lora_path"):
        await LocalGatewayControl(vworld.gateway).update_weights(lora={"x.lora_A.weight": torch.zeros(1)})
    assert vworld.engine.policy_version == 0


async def test_a_vllm_without_runtime_lora_says_how_to_start_it() -> None:
    from fastapi import FastAPI

    with serve_app_in_thread(FastAPI()) as url:  # FastAPI's 404 for a route it does not have
        engine = VLLMEngine(url + "/v1")
        await engine.start()
        try:
            with pytest.raises(EngineError) as err:
                await engine.update_weights(lora_path="/some/lora")
        finally:
            await engine.close()
    assert err.value.status_code == 501
    assert "--enable-lora" in err.value.message and "VLLM_ALLOW_RUNTIME_LORA_UPDATING" in err.value.message
