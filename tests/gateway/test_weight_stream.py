"""An update in parts (a sharded trainer's full weights, one group at a time): the gateway
holds every call from the first part to the commit, the engine serves the new version only
after the last part, and a stream that fails midway leaves the engine on its old weights
(nothing loaded yet) or answering no call (some loaded) — never serving a mix. In this
process (LocalGatewayControl) and over HTTP (RemoteGateway, ``/v1/gateway/weights/streams``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

torch = pytest.importorskip("torch", reason="weight updates need torch")
pytest.importorskip("transformers", reason="the transformers engine needs transformers")
pytest.importorskip("safetensors", reason="weights travel as safetensors")

from agentbolt.engines import EngineError, OpenAIEngine, engine_app  # noqa: E402
from agentbolt.engines.transformers_engine import TransformersEngine  # noqa: E402
from agentbolt.gateway import Gateway, GatewayConfig, LocalGatewayControl, RemoteGateway  # noqa: E402
from agentbolt.gateway.control import WEIGHT_STREAMS_ROUTE, GatewayControl, safetensors_bytes  # noqa: E402
from agentbolt.models import tiny_model  # noqa: E402
from agentbolt.server.testing import serve_app_in_thread, serve_in_thread  # noqa: E402
from agentbolt.store.memory import MemoryStore  # noqa: E402
from gateway.conftest import ADMIN, GatewayWorld, serving  # noqa: E402
from gateway.fakes import FakeEngine  # noqa: E402
from gateway.test_weight_control import _chat, _served_by, _wait_until  # noqa: E402

# calls arriving while the weights change are held (not turned away); a replica taken out
# by the engine's 503 is probed again soon
CONFIG = GatewayConfig(sampling={"val": {"temperature": 0.0}}, pause_hold_s=60.0, replica_cooldown_s=0.05,
                       max_retries=0)


@pytest.fixture
def world() -> Iterator[GatewayWorld]:
    model, tokenizer = tiny_model(seed=0)
    with serving(TransformersEngine(model, tokenizer, default_max_tokens=6, num_threads=1), CONFIG) as w:
        yield w


def parts_of(model: Any) -> list[dict[str, torch.Tensor]]:
    """``model``'s weights in parts: each block, then the rest (clones: a part is sent and dropped)."""
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    blocks = sorted({k.split(".")[2] for k in state if k.startswith("model.layers.")})
    out = [{k: v for k, v in state.items() if k.startswith(f"model.layers.{b}.")} for b in blocks]
    out.append({k: v for k, v in state.items() if not k.startswith("model.layers.")})
    return out


def controls(world: GatewayWorld) -> list[tuple[str, GatewayControl]]:
    return [("here", LocalGatewayControl(world.gateway)), ("server", RemoteGateway(world.url, token=ADMIN))]


async def test_the_engine_serves_the_new_version_only_after_the_last_part(world: GatewayWorld) -> None:
    old, _ = tiny_model(seed=0)
    for version, (where, control) in enumerate(controls(world), start=1):
        new, _ = tiny_model(seed=version)
        try:
            sent, answer = await publish_in_parts(world, control, parts_of(new), version)
        finally:
            await control.aclose()
        assert sent == 3, where  # each block, then the rest
        assert not world.gateway.paused and not world.engine.incomplete_weights, where
        assert answer["policy_version"] == version, where  # the call made during the publish waited for it
        assert _served_by(answer, new) and not _served_by(answer, old), where
        old = new


async def publish_in_parts(world: GatewayWorld, control: GatewayControl, parts: list[dict[str, torch.Tensor]],
                           version: int) -> tuple[int, dict[str, Any]]:
    """Send ``parts`` as ``version``, a call being made after the first part; how many
    parts were sent, and the call's answer. Between parts, the old version is served and
    the gateway holds the call."""
    sent = 0
    waiting: list[asyncio.Task[httpx.Response]] = []

    async def stream() -> AsyncIterator[dict[str, torch.Tensor]]:
        nonlocal sent
        for part in parts:
            yield part
            sent += 1
            if not waiting:  # a call made after the first part: it waits for the commit
                waiting.append(asyncio.create_task(_chat(world.claim("val"), max_tokens=6)))
                await asyncio.sleep(0.3)
                assert not waiting[0].done()
            assert world.gateway.paused and world.engine.policy_version == version - 1
            assert world.engine.incomplete_weights

    assert await control.load_weight_stream(stream(), version=version) == version
    return sent, (await waiting[0]).json()


async def test_a_stream_that_fails_before_any_part_leaves_the_old_weights_served(world: GatewayWorld) -> None:
    old, _ = tiny_model(seed=0)
    for where, control in controls(world):

        async def failing() -> AsyncIterator[dict[str, torch.Tensor]]:
            raise RuntimeError("the trainer's gather failed")
            yield {}  # an async generator

        try:
            with pytest.raises(RuntimeError, match="gather failed"):
                await control.load_weight_stream(failing(), version=5)
        finally:
            await control.aclose()
        assert not world.gateway.paused and not world.engine.incomplete_weights, where
        answer = (await _chat(world.claim("val"), max_tokens=6)).json()
        assert answer["policy_version"] == 0 and _served_by(answer, old), where


async def test_a_stream_that_fails_midway_answers_no_call_until_an_update_completes(world: GatewayWorld) -> None:
    new, _ = tiny_model(seed=1)
    first = parts_of(new)[0]

    async def broken() -> AsyncIterator[dict[str, torch.Tensor]]:
        yield first
        yield {"model.layers.1.not_a_weight": torch.zeros(2)}  # refused, after a part was loaded

    for where, control in controls(world):
        try:
            with pytest.raises(ValueError, match="keys the served model does not have"):
                await control.load_weight_stream(broken(), version=5)
        finally:
            await control.aclose()
        assert not world.gateway.paused and world.engine.incomplete_weights, where
        assert world.engine.policy_version == 0, where
        refused = await _chat(world.claim("val"), max_tokens=6)
        assert refused.status_code == 503 and "partly updated" in refused.text, where
        status = world.admin.get("/v1/gateway/status").json()
        assert status["incomplete_weights"] and status["policy_version"] == 0
        # a complete update makes it whole again (what a resumed trainer's first publish does)
        await LocalGatewayControl(world.gateway).update_weights(state_dict=new.state_dict(), version=6)
        assert not world.engine.incomplete_weights

        async def served() -> bool:
            answer = await _chat(world.claim("val"), max_tokens=6)
            return answer.status_code == 200 and answer.json()["policy_version"] == 6 and _served_by(answer.json(),
                                                                                                      new)

        async with asyncio.timeout(20):  # the replica the 503 took out is probed back in
            while not await served():
                await asyncio.sleep(0.05)
        await LocalGatewayControl(world.gateway).update_weights(state_dict=tiny_model(seed=0)[0].state_dict(),
                                                                 version=0)


async def test_a_server_aborts_a_stream_its_trainer_left(world: GatewayWorld) -> None:
    headers = {"content-type": "application/octet-stream"}
    part = safetensors_bytes(parts_of(tiny_model(seed=1)[0])[0])
    opened = world.admin.post(WEIGHT_STREAMS_ROUTE, params={"idle_s": 1.0}).json()
    assert world.gateway.paused and opened["policy_version"] == 0
    url = f"{WEIGHT_STREAMS_ROUTE}/{opened['stream']}"
    assert world.admin.post(f"{url}/parts", content=part, headers=headers).json() == {"parts": 1}
    await _wait_until(lambda: not world.gateway.paused, timeout=10)
    assert world.engine.incomplete_weights  # aborted after a part: loud, not half served
    gone = world.admin.post(f"{url}/commit")
    assert gone.status_code == 404 and "no update in parts" in gone.json()["error"]["message"]
    assert world.admin.delete(url).status_code == 404
    # the weights lock was released: another update goes through
    one_shot = LocalGatewayControl(world.gateway)
    await one_shot.update_weights(state_dict=tiny_model(seed=0)[0].state_dict(), version=1)
    assert not world.engine.incomplete_weights and world.engine.policy_version == 1


async def test_an_engine_that_cannot_take_parts_says_so_before_holding_calls() -> None:
    with serve_app_in_thread(engine_app(FakeEngine())) as provider:
        gateway = Gateway(OpenAIEngine(provider + "/v1"), CONFIG)
        with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway) as url:
            for control in (LocalGatewayControl(gateway), RemoteGateway(url, token=ADMIN)):
                try:
                    with pytest.raises(EngineError, match="cannot load an update in parts") as err:
                        await control.open_weight_stream()
                    assert err.value.status_code == 501
                finally:
                    await control.aclose()
                assert not gateway.paused
