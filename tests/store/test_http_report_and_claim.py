"""``HttpStore.report_and_claim`` against servers with and without the call: the first
call asks the route alone, later ones ride in batches; a server from before the call
gets the report and the claim as two calls, and no batch ever carries an op it refuses."""

from __future__ import annotations

import asyncio
from collections import Counter

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentbolt.server.app import create_app
from agentbolt.server.testing import serve_app_in_thread
from agentbolt.store.http import HttpStore
from agentbolt.store.memory import MemoryStore
from agentbolt.types import AttemptStatus, RolloutCreate, RolloutStatus

ADMIN = "report-admin"


class Counting:
    """ASGI layer in front of the real app: counts requests by method and route kind."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.requests: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            self.requests["report-and-claim" if path.endswith("/report-and-claim") else path] += 1
        await self.app(scope, receive, send)


async def run_through(app: ASGIApp, store: MemoryStore, rollouts: int, n_workers: int) -> int:
    """Serve ``app`` (over ``store``), enqueue ``rollouts`` and let ``n_workers`` report and
    claim through an :class:`HttpStore` until the queue is empty; how many they ran."""
    with serve_app_in_thread(app) as url:
        client = HttpStore(url, token=ADMIN)
        await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(rollouts)])
        try:
            return await run_workers(client, n_workers)
        finally:
            await client.close()


async def run_workers(store: HttpStore, n_workers: int) -> int:
    async def worker(k: int) -> int:
        done = 0
        claims = await store.claim_rollouts(f"w{k}", 1)
        while claims:
            c = claims[0]
            nxt = await store.report_and_claim(
                c.rollout.rollout_id, c.attempt.attempt_id, status=AttemptStatus.SUCCEEDED, worker_id=f"w{k}"
            )
            claims, done = nxt.claims, done + 1
        return done

    return sum(await asyncio.gather(*(worker(k) for k in range(n_workers))))


async def test_the_first_call_asks_the_route_and_the_rest_ride_in_batches() -> None:
    store = MemoryStore()
    app = Counting(create_app(store, admin_token=ADMIN))
    assert await run_through(app, store, 30, 5) == 30
    assert app.requests["report-and-claim"] == 1, "one call found out; the others waited for its answer"
    assert app.requests["/v1/batch"] >= 1
    assert (await store.stats()).rollouts_by_status.get(RolloutStatus.SUCCEEDED) == 30


class OldServer(Counting):
    """The real app as a server from before ``report_and_claim``: its route answers the
    app's own 404 for an unknown route, and a batch carrying the op is noted (an older
    server would refuse the whole batch)."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__(app)
        self.batches_with_the_op = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/report-and-claim"):
            self.requests["report-and-claim"] += 1
            await self.app({**scope, "path": "/v1/no-such-route", "raw_path": b"/v1/no-such-route"}, receive, send)
            return
        if scope["type"] == "http" and scope["path"] == "/v1/batch":

            async def peek() -> Message:
                message = await receive()
                if b'"op":"report_and_claim"' in message.get("body", b""):
                    self.batches_with_the_op += 1
                return message

            await super().__call__(scope, peek, send)
            return
        await super().__call__(scope, receive, send)


async def test_a_server_without_the_call_gets_a_report_and_a_claim() -> None:
    store = MemoryStore()
    app = OldServer(create_app(store, admin_token=ADMIN))
    assert await run_through(app, store, 12, 3) == 12
    assert app.requests["report-and-claim"] == 1, "asked once, then never again"
    assert app.batches_with_the_op == 0
    assert (await store.stats()).rollouts_by_status.get(RolloutStatus.SUCCEEDED) == 12
    assert all(w.status.value == "idle" for w in await store.query_workers())
