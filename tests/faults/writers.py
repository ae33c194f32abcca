"""16 concurrent clients writing through the server while it may be killed.

Each client enqueues its own rollouts (client-chosen ids), claims work, adds spans and
reports success. An operation counts as *acknowledged* only when the server answered it;
acknowledged facts are printed at the end as one JSON line ``ACKS {...}`` so the test can
check them against the database after a kill -9 and a restart.

Usage: writers.py SERVER_URL N_CLIENTS ROLLOUTS_PER_CLIENT
"""

import asyncio
import json
import sys

from agentbolt.store.errors import StoreUnavailableError
from agentbolt.store.http import HttpStore
from agentbolt.types import AttemptStatus, RolloutConfig, RolloutCreate, Span

acks: dict[str, list] = {"enqueued": [], "spans": [], "succeeded": []}
progress = 0


async def retry(fn, *args, **kwargs):
    """Keep calling while the server is down (HttpStore already retries a while)."""
    while True:
        try:
            return await fn(*args, **kwargs)
        except StoreUnavailableError:
            await asyncio.sleep(0.2)


def tick() -> None:
    global progress
    progress += 1
    if progress % 20 == 0:
        print(f"PROGRESS {progress}", flush=True)


async def client(url: str, k: int, n: int) -> None:
    store = HttpStore(url, batching=False, max_retries=8)
    cfg = RolloutConfig(unresponsive_seconds=2.0, max_attempts=10)
    for i in range(n):
        rid = f"c{k}-r{i}"
        await retry(store.enqueue_rollouts, [RolloutCreate(rollout_id=rid, input={"k": k, "i": i}, config=cfg)])
        acks["enqueued"].append(rid)
        tick()
    done = 0
    while True:
        claims = await retry(store.claim_rollouts, f"w{k}", 1)
        if not claims:
            stats = await retry(store.stats)
            if stats.rollouts_by_status["succeeded"] + stats.rollouts_by_status["failed"] >= stats.total_rollouts:
                break
            await asyncio.sleep(0.1)
            continue
        c = claims[0]
        rid, aid = c.rollout.rollout_id, c.attempt.attempt_id
        spans = [Span(rollout_id=rid, attempt_id=aid, span_id=f"{aid[-12:]}{j:04d}", name=f"s{j}") for j in range(3)]
        await retry(store.add_spans, spans)
        acks["spans"].extend([rid, aid, s.span_id] for s in spans)
        tick()
        try:
            await retry(store.update_attempt, rid, aid, status=AttemptStatus.SUCCEEDED)
        except Exception as e:  # superseded after an outage: another attempt owns it
            print(f"NOTE {rid} {type(e).__name__}", flush=True)
            continue
        acks["succeeded"].append([rid, aid])
        done += 1
        tick()
    await store.close()


async def main(url: str, clients: int, n: int) -> None:
    await asyncio.gather(*(client(url, k, n) for k in range(clients)))
    print("ACKS " + json.dumps(acks), flush=True)


asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
