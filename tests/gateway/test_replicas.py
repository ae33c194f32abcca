"""Three engine replicas (fakes of vLLM's and of SGLang's servers, real HTTP) behind one
gateway, for each engine kind: a rollout's calls all go to one replica, new rollouts go
where the load is lowest, a replica killed mid-run is taken out (the call that hit it fails
as a retryable infrastructure failure, the run goes on with the other two, a probe brings it
back with the LoRA served now), and a weight swap drains the calls in flight on all three
before any replica loads the LoRA."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes.sglang_server import FakeSGLang

from agentbolt import semconv
from agentbolt.engines import Engine, SGLangEngine, VLLMEngine
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.runner.harness.calls import gateway_calls
from agentbolt.server.testing import serve_app_in_thread, serve_in_thread
from agentbolt.store.memory import MemoryStore
from agentbolt.types import Span
from gateway.conftest import ADMIN, Attempt, GatewayWorld
from gateway.vllm_fake import BASE_MODEL, FakeVLLM

MESSAGES = [{"role": "user", "content": "2+2?"}]


@cache
def _tokenizer() -> Any:
    from agentbolt.models import byte_tokenizer

    return byte_tokenizer()


@dataclass(frozen=True)
class Kind:
    """An engine kind under test: its fake server, the routes a chat call and a LoRA load
    reach there, the engine over the replicas' URLs, and the LoRA a call was sent for."""

    fake: Callable[[], Any]
    call_route: str
    load_route: str
    engine: Callable[[list[str]], Engine]
    lora_of: Callable[[dict[str, Any]], str | None]


KINDS = [
    pytest.param(Kind(FakeVLLM, "/v1/chat/completions", "/v1/load_lora_adapter",
                      lambda urls: VLLMEngine([u + "/v1" for u in urls], model=BASE_MODEL, policy_version=0),
                      lambda body: body["model"]), id="vllm"),
    pytest.param(Kind(lambda: FakeSGLang(_tokenizer()), "/generate", "/load_lora_adapter",
                      lambda urls: SGLangEngine(urls, tokenizer=_tokenizer(), policy_version=0),
                      lambda body: body.get("lora_path")), id="sglang",
                 marks=pytest.mark.skipif(find_spec("transformers") is None, reason="the sglang engine's tokenizer")),
]


class Held:
    """A replica's server: the kind's fake, whose chat calls wait while ``gate`` is closed;
    ``active`` counts the calls inside it, ``events`` (shared by the replicas) records
    chat ends and LoRA loads."""

    def __init__(self, kind: Kind, index: int, events: list[tuple[str, int]]) -> None:
        self.kind = kind
        self.fake = kind.fake()
        self.index = index
        self.events = events
        self.gate = threading.Event()
        self.gate.set()
        self.active = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path") if scope["type"] == "http" else None
        if path == self.kind.load_route:
            self.events.append(("load", self.index))
        if path != self.kind.call_route:
            await self.fake.app(scope, receive, send)
            return
        self.active += 1
        try:
            while not self.gate.is_set():
                await asyncio.sleep(0.005)
            await self.fake.app(scope, receive, send)
        finally:
            self.active -= 1
            self.events.append(("chat", self.index))


class Cluster:
    """Three replicas, each on its own server that :meth:`kill` stops and :meth:`restart`
    starts again on the same port (a fresh server: no LoRA loaded)."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.events: list[tuple[str, int]] = []
        self.replicas = [Held(kind, i, self.events) for i in range(3)]
        self.stacks = [contextlib.ExitStack() for _ in self.replicas]
        self.urls = [s.enter_context(serve_app_in_thread(r)) for s, r in zip(self.stacks, self.replicas, strict=True)]

    @property
    def fakes(self) -> list[Any]:
        return [r.fake for r in self.replicas]

    def kill(self, i: int) -> None:
        self.stacks[i].close()

    def restart(self, i: int) -> None:
        self.replicas[i] = Held(self.kind, i, self.events)
        port = int(self.urls[i].rsplit(":", 1)[1])
        self.stacks[i] = contextlib.ExitStack()
        self.stacks[i].enter_context(serve_app_in_thread(self.replicas[i], port=port))

    def close(self) -> None:
        for stack in self.stacks:
            stack.close()


@pytest.fixture(params=KINDS)
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    c = Cluster(request.param)
    yield c
    c.close()


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(retry_backoff=0.01, replica_cooldown_s=60.0)


@pytest.fixture
def world(cluster: Cluster, config: GatewayConfig) -> Iterator[GatewayWorld]:
    engine = cluster.kind.engine(cluster.urls)
    gateway = Gateway(engine, config)
    with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway) as url:
        w = GatewayWorld(url, engine, gateway)
        yield w
        w.admin.close()


@pytest.fixture
def lora_dir(tmp_path: Path) -> Path:
    d = tmp_path / "lora"
    d.mkdir()
    (d / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 4, "lora_alpha": 8}))
    return d


def ask(w: GatewayWorld, a: Attempt) -> httpx.Response:
    with w.client(a) as c:
        return c.post("/chat/completions", json={"model": "whatever", "messages": MESSAGES})


def in_background(w: GatewayWorld, a: Attempt, out: list[httpx.Response]) -> threading.Thread:
    t = threading.Thread(target=lambda: out.append(ask(w, a)))
    t.start()
    return t


def wait_for(cond: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def replica_of(w: GatewayWorld, a: Attempt, n: int) -> list[int]:
    return [s["attributes"][semconv.LLM_ENGINE_REPLICA] for s in w.spans(a.rollout_id, n)]


def states(w: GatewayWorld) -> list[dict[str, Any]]:
    return list(w.admin.get("/v1/gateway/status").json()["replica_states"])


def test_a_rollouts_calls_all_go_to_one_replica_and_new_rollouts_go_where_the_load_is_lowest(
    world: GatewayWorld, cluster: Cluster
) -> None:
    a, b = world.claim(), world.claim()
    cluster.replicas[0].gate.clear()
    held_a: list[httpx.Response] = []
    thread_a = in_background(world, a, held_a)  # a's first call: replica 0, and held there
    wait_for(lambda: cluster.replicas[0].active == 1, "a's call on replica 0")
    assert ask(world, b).status_code == 200  # replica 1 (0 is busy)
    c, d = world.claim(), world.claim()
    assert ask(world, c).status_code == 200  # replica 2: 1 and 2 are idle, 1 has a rollout pinned
    assert ask(world, d).status_code == 200  # replica 1: 0 is still busy (round-robin would say 0)
    s = states(world)
    assert [r["in_flight"] for r in s] == [1, 0, 0] and [r["pinned"] for r in s] == [1, 2, 1]
    assert all(r["healthy"] for r in s)
    cluster.replicas[0].gate.set()
    thread_a.join(10)
    assert held_a[0].status_code == 200
    for attempt in (a, b, c, d):  # later calls stay on the rollout's replica (its prefix cache)
        assert ask(world, attempt).status_code == 200
    assert replica_of(world, a, 2) == [0, 0]
    assert replica_of(world, b, 2) == [1, 1]
    assert replica_of(world, c, 2) == [2, 2]
    assert replica_of(world, d, 2) == [1, 1]
    assert [len(f.seen) for f in cluster.fakes] == [2, 4, 2]
    assert [r["in_flight"] for r in states(world)] == [0, 0, 0]


def test_a_replica_killed_mid_run_fails_its_call_as_infrastructure_and_the_run_goes_on_without_it(
    world: GatewayWorld, cluster: Cluster
) -> None:
    a, b, c = world.claim(), world.claim(), world.claim()
    assert [ask(world, x).status_code for x in (a, b, c)] == [200, 200, 200]
    cluster.kill(1)
    r = ask(world, b)  # b is pinned to replica 1
    assert r.status_code == 502
    assert "engine replica 1 failed and was taken out" in r.json()["error"]["message"]
    spans = [Span.model_validate(s) for s in world.spans(b.rollout_id, 2)]
    calls = gateway_calls(spans)
    assert calls.failed == 1 and calls.transient  # retryable, never scored (runner/harness/calls.py)
    down = states(world)[1]
    assert down["healthy"] is False and "could not reach" in down["down_reason"] and down["pinned"] == 0
    assert ask(world, b).status_code == 200  # b's retry: on a healthy replica
    assert replica_of(world, b, 3)[2] in (0, 2)
    later = [world.claim() for _ in range(4)]
    assert [ask(world, x).status_code for x in later] == [200] * 4
    assert all(replica_of(world, x, 1) != [1] for x in later)
    assert ask(world, a).status_code == 200 and ask(world, c).status_code == 200
    assert replica_of(world, a, 2) == [0, 0] and replica_of(world, c, 2) == [2, 2]
    assert len(cluster.fakes[1].seen) == 1


def test_with_every_replica_down_calls_get_a_503_saying_so(world: GatewayWorld, cluster: Cluster) -> None:
    attempts = [world.claim() for _ in range(3)]
    assert [ask(world, x).status_code for x in attempts] == [200] * 3
    for i in range(3):
        cluster.kill(i)
    assert [ask(world, x).status_code for x in attempts] == [502] * 3  # each call takes its replica out
    r = ask(world, world.claim())
    assert r.status_code == 503
    error = r.json()["error"]
    assert error["code"] == "no_healthy_replica" and "all 3 engine replicas are down" in error["message"]


@pytest.mark.parametrize("config", [GatewayConfig(retry_backoff=0.01, replica_cooldown_s=0.2)])
def test_after_its_cool_down_a_replica_that_answers_again_is_probed_back_with_the_lora_served_now(
    world: GatewayWorld, cluster: Cluster, lora_dir: Path
) -> None:
    r = world.admin.post("/v1/gateway/weights", json={"lora_path": str(lora_dir)})
    assert r.status_code == 200 and r.json() == {"policy_version": 1}
    attempts = [world.claim() for _ in range(3)]
    assert [ask(world, x).status_code for x in attempts] == [200] * 3
    cluster.kill(2)
    assert ask(world, attempts[2]).status_code == 502
    cluster.restart(2)  # a fresh server: the LoRA is not loaded there
    time.sleep(0.3)
    assert ask(world, world.claim()).status_code == 200  # this call starts the probe of replica 2
    wait_for(lambda: states(world)[2]["healthy"], "replica 2 probed back")
    assert cluster.fakes[2].adapters == {"agentbolt-lora-v1": str(lora_dir)}
    e = world.claim()
    assert ask(world, e).status_code == 200
    assert replica_of(world, e, 1) == [2]
    assert cluster.kind.lora_of(cluster.fakes[2].seen[-1]) == "agentbolt-lora-v1"


def test_a_weight_swap_drains_the_calls_in_flight_on_all_three_replicas(
    world: GatewayWorld, cluster: Cluster, lora_dir: Path
) -> None:
    attempts = [world.claim() for _ in range(3)]
    assert [ask(world, x).status_code for x in attempts] == [200] * 3  # pinned to 0, 1, 2
    for replica in cluster.replicas:
        replica.gate.clear()
    answers: list[httpx.Response] = []
    threads = [in_background(world, x, answers) for x in attempts]
    wait_for(lambda: all(r.active == 1 for r in cluster.replicas), "a call in flight on each replica")
    assert world.admin.get("/v1/gateway/status").json()["in_flight"] == 3
    swapped: list[httpx.Response] = []
    swap = threading.Thread(target=lambda: swapped.append(
        world.admin.post("/v1/gateway/weights", json={"lora_path": str(lora_dir)})))
    swap.start()
    wait_for(lambda: world.gateway.paused, "the pause")
    time.sleep(0.2)
    assert not swapped and not any(f.lora_calls for f in cluster.fakes)  # waiting for the calls in flight
    refused = ask(world, world.claim())
    assert refused.status_code == 429  # nothing starts during the swap
    for replica in cluster.replicas:
        replica.gate.set()
    for t in (*threads, swap):
        t.join(10)
    assert [x.status_code for x in answers] == [200] * 3
    assert swapped[0].status_code == 200 and swapped[0].json() == {"policy_version": 1}
    loads = [i for kind, i in cluster.events if kind == "load"]
    assert sorted(loads) == [0, 1, 2]
    first_load = cluster.events.index(("load", loads[0]))
    assert sorted(i for kind, i in cluster.events[:first_load][-3:] if kind == "chat") == [0, 1, 2]
    assert all(kind == "load" for kind, _ in cluster.events[first_load:])  # no call ran during the swap
    for x in attempts:
        assert ask(world, x).status_code == 200
    assert [cluster.kind.lora_of(f.seen[-1]) for f in cluster.fakes] == ["agentbolt-lora-v1"] * 3


def test_a_streaming_call_on_a_killed_replica_fails_before_its_first_chunk_and_takes_the_replica_out(
    world: GatewayWorld, cluster: Cluster
) -> None:
    a, b = world.claim(), world.claim()
    assert [ask(world, x).status_code for x in (a, b)] == [200, 200]
    cluster.kill(0)
    with world.client(a) as c:
        r = c.post("/chat/completions", json={"model": "m", "messages": MESSAGES, "stream": True})
    assert r.status_code == 502 and "taken out" in r.json()["error"]["message"]
    assert [s["healthy"] for s in states(world)] == [False, True, True]
    with world.client(a) as c:
        r = c.post("/chat/completions", json={"model": "m", "messages": MESSAGES, "stream": True})
    assert r.status_code == 200 and "data: [DONE]" in r.text
    assert replica_of(world, a, 3)[2] in (1, 2)
