"""``HttpStore`` against a real server: retries, idempotency, typed errors, batching.

Failures are made by real components: a flaky ASGI layer in front of the real app
(answers 503, or applies a request and then "loses" the answer), and a TCP proxy that
drops connections after the request was sent. Requests are counted server-side.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import orjson
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentbolt.server.app import create_app
from agentbolt.server.testing import serve_app_in_thread
from agentbolt.store.http import client as http_module
from agentbolt.store.errors import (
    AuthenticationError,
    InvalidRequestError,
    InvalidTransitionError,
    NotFoundError,
    PermissionDeniedError,
    StoreError,
    StoreUnavailableError,
)
from agentbolt.store.http import HttpStore
from agentbolt.store.memory import MemoryStore
from agentbolt.types import (
    AttemptStatus,
    JsonResource,
    RolloutCreate,
    RolloutStatus,
    Span,
)

ADMIN = "client-admin"


# ---------------------------------------------------------------------------- real faulty parts
@dataclass
class _Rule:
    method: str
    path: str
    times: int
    status: int
    after_processing: bool
    delay: float


class FlakyApp:
    """ASGI layer in front of the real app: counts requests, and fails the ones that
    match a rule — before they reach the store, or after (the answer is "lost")."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.requests: Counter[tuple[str, str]] = Counter()
        self.rules: list[_Rule] = []

    def fail(
        self,
        method: str,
        path: str,
        times: int = 1,
        *,
        status: int = 503,
        after_processing: bool = False,
        delay: float = 0.0,
    ) -> None:
        self.rules.append(_Rule(method, path, times, status, after_processing, delay))

    def count(self, method: str, path: str) -> int:
        return self.requests[(method, path)]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.requests[(scope["method"], scope["path"])] += 1
        rule = next(
            (r for r in self.rules if r.times > 0 and r.method == scope["method"] and r.path == scope["path"]), None
        )
        if rule is None:
            await self.app(scope, receive, send)
            return
        rule.times -= 1
        if rule.delay:
            await asyncio.sleep(rule.delay)
        if rule.status < 400:  # a slow, not a failing, answer
            await self.app(scope, receive, send)
            return
        if rule.after_processing:

            async def swallow(message: Message) -> None:
                pass

            await self.app(scope, receive, swallow)
        body = orjson.dumps({"error": {"code": "unavailable", "message": "flaky test server"}})
        await send(
            {"type": "http.response.start", "status": rule.status, "headers": [(b"content-type", b"application/json")]}
        )
        await send({"type": "http.response.body", "body": body})


class DropProxy:
    """TCP proxy that reads the first ``drop`` requests and hangs up without answering
    (the request was sent; nobody knows whether it was applied); then forwards."""

    def __init__(self, upstream: str, drop: int) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.drop = drop
        self.dropped = 0
        self.forwarded = 0
        self.server: asyncio.base_events.Server | None = None

    async def start(self, port: int = 0) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", port)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.dropped < self.drop:
            await reader.read(65536)
            self.dropped += 1
            writer.close()
            return
        self.forwarded += 1
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()


@contextlib.contextmanager
def flaky_server(store: MemoryStore | None = None) -> Iterator[tuple[str, FlakyApp, MemoryStore]]:
    store = store or MemoryStore()
    flaky = FlakyApp(create_app(store, admin_token=ADMIN))
    with serve_app_in_thread(flaky) as url:
        yield url, flaky, store


@pytest.fixture
def server() -> Iterator[tuple[str, FlakyApp, MemoryStore]]:
    with flaky_server() as s:
        yield s


@contextlib.asynccontextmanager
async def client(url: str, **kwargs: object) -> AsyncIterator[HttpStore]:
    store = HttpStore(url, token=ADMIN, **kwargs)  # type: ignore[arg-type]
    store.backoff_base = 0.005  # keep retry tests fast
    try:
        yield store
    finally:
        await store.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def claimed(store: HttpStore, rollout_id: str = "r1") -> tuple[str, str]:
    await store.enqueue_rollouts([RolloutCreate(rollout_id=rollout_id)])
    (c,) = await store.claim_rollouts("w")
    return c.rollout.rollout_id, c.attempt.attempt_id


# ---------------------------------------------------------------------------- retries
async def test_idempotent_calls_retry_through_503s(server: tuple[str, FlakyApp, MemoryStore]) -> None:
    url, flaky, _ = server
    flaky.fail("GET", "/v1/stats", times=2)
    async with client(url) as store:
        assert (await store.stats()).total_rollouts == 0
    assert flaky.count("GET", "/v1/stats") == 3


async def test_retries_run_out_into_store_unavailable(server: tuple[str, FlakyApp, MemoryStore]) -> None:
    url, flaky, _ = server
    flaky.fail("GET", "/v1/stats", times=100)
    async with client(url, max_retries=2) as store:
        with pytest.raises(StoreUnavailableError, match="after 3 tries"):
            await store.stats()
    assert flaky.count("GET", "/v1/stats") == 3


async def test_429_is_retried_too(server: tuple[str, FlakyApp, MemoryStore]) -> None:
    url, flaky, _ = server
    flaky.fail("GET", "/v1/workers", times=1, status=429)
    async with client(url) as store:
        assert await store.query_workers() == []
    assert flaky.count("GET", "/v1/workers") == 2


async def test_a_lost_enqueue_answer_is_retried_without_a_duplicate(server: tuple[str, FlakyApp, MemoryStore]) -> None:
    url, flaky, memory = server
    flaky.fail("POST", "/v1/rollouts", after_processing=True)
    async with client(url) as store:
        (r,) = await store.enqueue_rollouts([RolloutCreate(input={"task": 1})])
    assert r.rollout_id.startswith("ro-"), "the client chose the id, so the retry was safe"
    assert flaky.count("POST", "/v1/rollouts") == 2
    assert (await memory.stats()).total_rollouts == 1


async def test_a_lost_claim_answer_is_retried_and_returns_the_same_claim(
    server: tuple[str, FlakyApp, MemoryStore],
) -> None:
    url, flaky, memory = server
    await memory.enqueue_rollouts([RolloutCreate(rollout_id="a"), RolloutCreate(rollout_id="b")])
    flaky.fail("POST", "/v1/batch", after_processing=True)
    async with client(url) as store:
        (c,) = await store.claim_rollouts("w")
    assert c.rollout.rollout_id == "a" and c.token
    assert flaky.count("POST", "/v1/batch") == 2
    stats = await memory.stats()
    assert stats.total_attempts == 1 and stats.queue_depth == 1, "the retry did not claim a second rollout"


async def test_connection_errors_are_retried_for_idempotent_calls(server: tuple[str, FlakyApp, MemoryStore]) -> None:
    url = server[0]
    proxy = DropProxy(url, drop=2)
    proxy_url = await proxy.start()
    try:
        async with client(proxy_url, batching=False) as store:
            assert (await store.stats()).total_rollouts == 0
            assert await store.get_latest_resources() is None
    finally:
        await proxy.close()
    assert proxy.dropped == 2 and proxy.forwarded >= 1


async def test_add_resources_is_not_retried_once_the_request_was_sent(
    server: tuple[str, FlakyApp, MemoryStore],
) -> None:
    url, flaky, memory = server
    flaky.fail("POST", "/v1/resources", after_processing=True)
    async with client(url) as store:
        with pytest.raises(StoreUnavailableError):
            await store.add_resources({"p": JsonResource(value=1)})
    assert flaky.count("POST", "/v1/resources") == 1, "a second POST could publish the version twice"
    assert (await memory.stats()).latest_resources_version == 1

    proxy = DropProxy(url, drop=1)
    proxy_url = await proxy.start()
    try:
        async with client(proxy_url) as store:
            with pytest.raises(StoreUnavailableError, match="not retried"):
                await store.update_resources({"q": JsonResource(value=2)})
            assert proxy.dropped == 1 and proxy.forwarded == 0
            assert (await store.update_resources({"q": JsonResource(value=2)})).version == 2
    finally:
        await proxy.close()


async def test_add_resources_is_retried_while_the_connection_is_refused(
    server: tuple[str, FlakyApp, MemoryStore],
) -> None:
    url, flaky, _ = server
    port = free_port()
    proxy = DropProxy(url, drop=0)

    async def start_later() -> None:
        await asyncio.sleep(0.3)
        await proxy.start(port)

    starter = asyncio.create_task(start_later())
    try:
        async with client(f"http://127.0.0.1:{port}", max_retries=30) as store:
            store.backoff_max = 0.05
            published = await store.add_resources({"p": JsonResource(value=1)})
        assert published.version == 1
        assert flaky.count("POST", "/v1/resources") == 1
    finally:
        await starter
        await proxy.close()


async def test_an_unreachable_store_says_so() -> None:
    async with client(f"http://127.0.0.1:{free_port()}", max_retries=1) as store:
        with pytest.raises(StoreUnavailableError, match="is the server running"):
            await store.get_rollout("r1")


# ---------------------------------------------------------------------------- typed errors
@pytest.mark.parametrize("batching", [True, False])
async def test_server_errors_come_back_as_the_same_typed_errors(
    server: tuple[str, FlakyApp, MemoryStore], batching: bool
) -> None:
    url, _, _ = server
    async with client(url, batching=batching) as store:
        rid, aid = await claimed(store)
        with pytest.raises(NotFoundError, match="'nope'"):
            await store.get_rollout("nope")
        with pytest.raises(NotFoundError):
            await store.heartbeat(rid, "at-nope")
        with pytest.raises(NotFoundError):
            await store.add_spans([Span(rollout_id="nope", attempt_id=aid, name="x")])
        with pytest.raises(NotFoundError):
            await store.get_resources(3)
        await store.update_attempt(rid, aid, status=AttemptStatus.SUCCEEDED)
        with pytest.raises(InvalidTransitionError):
            await store.update_attempt(rid, aid, status=AttemptStatus.FAILED)
        with pytest.raises(InvalidTransitionError):
            await store.update_rollout(rid, status=RolloutStatus.RUNNING)
        with pytest.raises(InvalidRequestError, match="cursor"):
            await store.query_rollouts(cursor="garbage")
        with pytest.raises(InvalidRequestError):
            await store.claim_rollouts("w", limit=0)


@pytest.mark.parametrize("batching", [True, False])
async def test_missing_or_wrong_tokens_raise_auth_errors(
    server: tuple[str, FlakyApp, MemoryStore], batching: bool
) -> None:
    url = server[0]
    anonymous = HttpStore(url, batching=batching)
    wrong = HttpStore(url, token="not-the-admin", batching=batching)
    try:
        with pytest.raises(AuthenticationError, match="needs a token"):
            await anonymous.claim_rollouts("w")
        with pytest.raises(PermissionDeniedError, match="invalid token"):
            await wrong.claim_rollouts("w")
        with pytest.raises(PermissionDeniedError):
            await wrong.stats()
    finally:
        await anonymous.close()
        await wrong.close()


async def test_the_secret_stays_on_the_server(server: tuple[str, FlakyApp, MemoryStore]) -> None:
    async with client(server[0]) as store:
        with pytest.raises(StoreError, match="not available over HTTP"):
            await store.get_secret()


# ---------------------------------------------------------------------------- batching
async def test_concurrent_calls_are_coalesced_into_few_batch_requests(
    server: tuple[str, FlakyApp, MemoryStore],
) -> None:
    url, flaky, memory = server
    async with client(url) as store:
        rid, aid = await claimed(store)
        spans = [Span(rollout_id=rid, attempt_id=aid, span_id=f"s{i}", name=f"n{i}") for i in range(60)]
        results = await asyncio.gather(
            *(store.add_spans([s]) for s in spans), *(store.heartbeat(rid, aid) for _ in range(20))
        )
    for s, stored in zip(spans, results[:60]):
        assert [x.span_id for x in stored] == [s.span_id] and stored[0].name == s.name, (
            "each caller gets its own answer"
        )
    assert all(a.attempt_id == aid for a in results[60:])  # type: ignore[union-attr]
    assert flaky.count("POST", "/v1/batch") <= 3, flaky.requests
    assert flaky.count("POST", "/v1/spans") == 0
    assert len(await memory.get_spans(rid)) == 60


async def test_calls_made_while_a_batch_is_in_flight_go_together_in_the_next(
    server: tuple[str, FlakyApp, MemoryStore],
) -> None:
    url, flaky, _ = server
    async with client(url) as store:
        store.batch_concurrency = 1
        rid, aid = await claimed(store)
        sent = flaky.count("POST", "/v1/batch")
        flaky.fail("POST", "/v1/batch", times=1, status=200, delay=0.3)
        first = asyncio.create_task(store.heartbeat(rid, aid))
        await asyncio.sleep(0.1)  # the first call is on the wire now
        rest = await asyncio.gather(*(store.heartbeat(rid, aid) for _ in range(40)))
        await first
    assert len(rest) == 40
    assert flaky.count("POST", "/v1/batch") - sent == 2, "one batch for the first call, one for the 40 that waited"


async def test_each_caller_in_a_batch_gets_its_own_error(server: tuple[str, FlakyApp, MemoryStore]) -> None:
    url, flaky, _ = server
    async with client(url) as store:
        rid, aid = await claimed(store)
        before = flaky.count("POST", "/v1/batch")
        outcomes = await asyncio.gather(
            *(store.heartbeat(rid, aid if i % 2 == 0 else f"at-missing-{i}") for i in range(10)), return_exceptions=True
        )
    assert flaky.count("POST", "/v1/batch") - before == 1
    for i, outcome in enumerate(outcomes):
        if i % 2 == 0:
            assert not isinstance(outcome, BaseException) and outcome.attempt_id == aid
        else:
            assert isinstance(outcome, NotFoundError) and f"at-missing-{i}" in str(outcome)
    assert len({id(o) for o in outcomes if isinstance(o, BaseException)}) == 5


async def test_a_failed_batch_request_is_retried_as_a_whole(server: tuple[str, FlakyApp, MemoryStore]) -> None:
    url, flaky, memory = server
    async with client(url) as store:
        rid, aid = await claimed(store)
        flaky.fail("POST", "/v1/batch", times=1, after_processing=True)
        spans = [Span(rollout_id=rid, attempt_id=aid, span_id=f"s{i}", name="x") for i in range(10)]
        await asyncio.gather(*(store.add_spans([s]) for s in spans))
    assert [s.sequence_id for s in await memory.get_spans(rid)] == list(range(10)), "span ids made the retry safe"


async def test_without_batching_each_call_uses_its_own_route(server: tuple[str, FlakyApp, MemoryStore]) -> None:
    url, flaky, _ = server
    async with client(url, batching=False) as store:
        rid, aid = await claimed(store)
        await asyncio.gather(*(store.heartbeat(rid, aid) for _ in range(5)))
        await store.update_worker("w", metadata={"k": 1})
    assert flaky.count("POST", "/v1/batch") == 0
    assert flaky.count("POST", "/v1/claims") == 1
    assert flaky.count("POST", f"/v1/rollouts/{rid}/attempts/{aid}/heartbeat") == 5
    assert flaky.count("POST", "/v1/workers/w") == 1


# ---------------------------------------------------------------------------- the rest of the interface
async def test_wait_for_rollouts_long_polls_until_done_or_timeout(
    server: tuple[str, FlakyApp, MemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, flaky, memory = server
    monkeypatch.setattr(http_module, "MAX_WAIT_SECONDS", 0.1)  # force several polls
    async with client(url) as store:
        rid, aid = await claimed(store)
        await store.enqueue_rollouts([RolloutCreate(rollout_id="never")])
        t0 = time.monotonic()
        assert await store.wait_for_rollouts([rid], timeout=0.25) == []
        assert 0.2 < time.monotonic() - t0 < 5

        async def finish() -> None:
            await asyncio.sleep(0.3)
            await memory.update_attempt(rid, aid, status=AttemptStatus.SUCCEEDED)

        finisher = asyncio.create_task(finish())
        done = await store.wait_for_rollouts([rid, "never"], timeout=1.0)
        await finisher
        assert [r.rollout_id for r in done] == [rid] and done[0].status == RolloutStatus.SUCCEEDED
        with pytest.raises(NotFoundError):
            await store.wait_for_rollouts(["ghost"], timeout=0.1)
    assert flaky.count("POST", "/v1/rollouts/wait") >= 6


async def test_odd_ids_round_trip(server: tuple[str, FlakyApp, MemoryStore]) -> None:
    async with client(server[0]) as store:
        for rid in ("a/b/c", "..", ".", "sp ace?&#%", "ünï/ç"):
            _, aid = await claimed(store, rid)
            assert (await store.get_rollout(rid)).rollout_id == rid
            assert (await store.get_attempt(rid, aid)).attempt_id == aid
            assert [a.attempt_id for a in await store.query_attempts(rid)] == [aid]
            await store.add_spans([Span(rollout_id=rid, attempt_id=aid, name="x")])
            assert len((await store.query_spans(rid, "latest")).items) == 1
            assert (await store.update_rollout(rid, metadata={"ok": True})).metadata == {"ok": True}
        assert (await store.update_worker("host/pid 1")).worker_id == "host/pid 1"
        assert (await store.get_worker("host/pid 1")).worker_id == "host/pid 1"


def test_one_store_object_works_across_event_loops(server: tuple[str, FlakyApp, MemoryStore]) -> None:
    store = HttpStore(server[0], token=ADMIN)
    asyncio.run(store.enqueue_rollouts([RolloutCreate(rollout_id="r1")]))
    assert asyncio.run(store.get_rollout("r1")).rollout_id == "r1"

    async def claim_and_close() -> int:
        claims = await store.claim_rollouts("w")
        await store.close()
        return len(claims)

    assert asyncio.run(claim_and_close()) == 1


async def test_resources_workers_stats_and_deadlines(server: tuple[str, FlakyApp, MemoryStore]) -> None:
    async with client(server[0]) as store:
        assert await store.get_latest_resources() is None
        v1 = await store.add_resources({"a": JsonResource(value=1)}, metadata={"m": 1})
        v2 = await store.update_resources({"b": JsonResource(value=2)})
        assert (v1.version, v2.version, sorted(v2.resources)) == (1, 2, ["a", "b"])
        assert (await store.get_latest_resources()) == v2
        assert (await store.get_resources(1)).metadata == {"m": 1}
        page = await store.query_resources(limit=1)
        assert [r.version for r in page.items] == [2] and page.next_cursor
        assert [r.version for r in (await store.query_resources(cursor=page.next_cursor)).items] == [1]
        await store.update_worker("w1", metadata={"gpu": 0})
        assert [w.worker_id for w in await store.query_workers()] == ["w1"]
        assert await store.check_deadlines() == 0
        assert (await store.stats()).latest_resources_version == 2


async def test_cancelled_long_polls_do_not_leave_dead_connections_behind() -> None:
    """A caller that waits on many rollouts at once and cancels the waits it no longer
    needs (GRPO's async schedule does, every step) must not poison the client's
    connections: later requests are answered, not stuck on a busy connection."""
    from agentbolt.server.testing import serve_in_thread

    with serve_in_thread(MemoryStore()) as url:
        async with HttpStore(url, max_connections=64, timeout=3, max_retries=0) as store:
            for _ in range(20):
                rollouts = [await store.enqueue_rollout({"x": i}) for i in range(16)]
                waits = [asyncio.ensure_future(store.wait_for_rollouts([r.rollout_id])) for r in rollouts]
                await asyncio.sleep(0.05)
                for r in rollouts[:8]:
                    await store.cancel_rollout(r.rollout_id)
                for w in waits:
                    w.cancel()
                await asyncio.gather(*waits, return_exceptions=True)
                got = await asyncio.wait_for(
                    asyncio.gather(*(store.get_rollout(r.rollout_id) for r in rollouts * 4)), timeout=10
                )
                assert len(got) == 64
