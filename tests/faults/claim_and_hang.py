"""A stand-in runner that claims one rollout, reports progress, then keeps working
(heartbeating) until it is killed. Usage: claim_and_hang.py SERVER_URL WORKER_ID"""

import asyncio
import sys

from agentbolt.store.http import HttpStore
from agentbolt.types import Span


async def main(url: str, worker: str) -> None:
    store = HttpStore(url)
    claim = None
    while claim is None:
        claim = await store.claim_rollout(worker)
        if claim is None:
            await asyncio.sleep(0.05)
    rid, aid = claim.rollout.rollout_id, claim.attempt.attempt_id
    await store.add_spans([Span(rollout_id=rid, attempt_id=aid, name="step-1")])
    print(f"CLAIMED {rid} {aid}", flush=True)
    while True:  # "working": heartbeat until killed
        await store.heartbeat(rid, aid)
        await asyncio.sleep(0.1)


asyncio.run(main(sys.argv[1], sys.argv[2]))
