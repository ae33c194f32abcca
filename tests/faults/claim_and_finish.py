"""A stand-in runner that waits for a rollout to become claimable, runs it to success
and exits. Usage: claim_and_finish.py SERVER_URL WORKER_ID"""

import asyncio
import sys

from agentbolt.store.http import HttpStore
from agentbolt.types import AttemptStatus, Span


async def main(url: str, worker: str) -> None:
    store = HttpStore(url)
    claim = None
    while claim is None:
        claim = await store.claim_rollout(worker)
        if claim is None:
            await asyncio.sleep(0.05)
    rid, aid = claim.rollout.rollout_id, claim.attempt.attempt_id
    await store.add_spans([Span(rollout_id=rid, attempt_id=aid, name="step-1")])
    await store.update_attempt(rid, aid, status=AttemptStatus.SUCCEEDED)
    print(f"DONE {rid} {aid}", flush=True)
    await store.close()


asyncio.run(main(sys.argv[1], sys.argv[2]))
