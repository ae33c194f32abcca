"""Bytes stored per recorded model call: real gateway calls into a SQLite store.

The agentbolt server runs in a thread with the gateway in front of the local engine
(``TransformersEngine``, a seeded tiny random model with SmolLM2's tokenizer and its
ChatML template, CPU, one torch thread), over a SQLite store. An agent-like client
makes ``--attempts`` attempts of ``--turns`` chat calls each (every turn sends the
conversation so far plus a new question, with ``logprobs``), sampled at temperature 1
with a fixed seed, so two runs of the same code record the same calls. Then the store
is closed and the SQLite file read back:

* **span bytes per call** — the mean size of a model-call span row's stored JSON
  (``spans.data``): what the span costs, whatever the page layout;
* **file bytes per call** — the growth of the database (WAL included)
  in pages in use over the calls, divided by their number: pages, indexes and all.

    python benchmarks/span_bytes.py                 # 10 attempts x 4 turns
    python benchmarks/span_bytes.py --json          # one JSON line
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ADMIN = "span-bytes-admin"
QUESTIONS = [
    "What is 17 times 23? Think step by step, then give the number.",
    "Now add 45 to that result and explain each step.",
    "Is the new number prime? Say how you checked.",
    "Write the three numbers in a short sentence.",
    "Summarise the whole conversation in one line.",
]
SYSTEM = "You are a careful assistant. You solve arithmetic problems and show your work."


def _file_bytes(db: Path) -> int:
    """The bytes of the database's pages in use (WAL included: read through it)."""
    con = sqlite3.connect(db)
    try:
        pages, free, size = (con.execute(f"PRAGMA {p}").fetchone()[0]
                             for p in ("page_count", "freelist_count", "page_size"))
    finally:
        con.close()
    return (pages - free) * size


def measure(attempts: int, turns: int, max_tokens: int, threads: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(threads)
    from agentbolt.engines.transformers_engine import TransformersEngine
    from agentbolt.gateway import Gateway, GatewayConfig, rollout_base_url
    from agentbolt.models import tiny_model
    from agentbolt.server.testing import serve_in_thread
    from agentbolt.store import open_store

    model, tokenizer = tiny_model(seed=0)
    engine = TransformersEngine(model, tokenizer, max_batch_size=1, default_max_tokens=max_tokens, num_threads=threads)
    config = GatewayConfig(sampling={"train": {"temperature": 1.0, "seed": 7}})
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "store.db"
        calls = 0
        with serve_in_thread(open_store(f"sqlite:///{db}"), admin_token=ADMIN, gateway=Gateway(engine, config)) as url:
            admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60)
            rollouts = [{"rollout_id": f"ro-{i}", "mode": "train"} for i in range(attempts)]
            admin.post("/v1/rollouts", json={"rollouts": rollouts}).raise_for_status()
            claims = admin.post("/v1/claims", json={"worker_id": "w", "limit": attempts}).json()
            assert len(claims) == attempts, claims
            before = _file_bytes(db)
            t0 = time.perf_counter()
            for claim in claims:
                rid, aid = claim["rollout"]["rollout_id"], claim["attempt"]["attempt_id"]
                base = rollout_base_url(url, rid, aid)
                agent = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {claim['token']}"}, timeout=60)
                messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
                for turn in range(turns):
                    messages.append({"role": "user", "content": QUESTIONS[turn % len(QUESTIONS)]})
                    answer = agent.post(
                        "/chat/completions",
                        json={"model": "policy", "messages": messages, "max_tokens": max_tokens, "logprobs": True},
                    )
                    answer.raise_for_status()
                    messages.append(answer.json()["choices"][0]["message"])
                    calls += 1
                agent.close()
            seconds = time.perf_counter() - t0
            # spans are written in the background: wait until every call is stored
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                stored = sum(len(admin.get(f"/v1/rollouts/{c['rollout']['rollout_id']}/spans").json()["items"])
                             for c in claims)
                if stored >= calls:
                    break
                time.sleep(0.05)
            admin.close()
        after = _file_bytes(db)
        con = sqlite3.connect(db)
        try:
            n, data = con.execute("SELECT count(*), sum(length(CAST(data AS BLOB))) FROM spans").fetchone()
        finally:
            con.close()
    assert n == calls, f"{n} spans stored for {calls} calls"
    return {
        "calls": calls,
        "span_bytes_per_call": round(data / n, 1),
        "file_bytes_per_call": round((after - before) / calls, 1),
        "seconds": round(seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attempts", type=int, default=10)
    parser.add_argument("--turns", type=int, default=4, help="chat calls per attempt (the conversation grows)")
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    parser.add_argument("--json", action="store_true", help="print one JSON line with the results")
    args = parser.parse_args()
    result = measure(args.attempts, args.turns, args.max_tokens, args.threads)
    if args.json:
        print(json.dumps(result))
        return
    print(f"{result['calls']} gateway calls recorded into SQLite in {result['seconds']} s")
    print(f"span bytes per call (spans.data): {result['span_bytes_per_call']:.0f}")
    print(f"file bytes per call (db growth):  {result['file_bytes_per_call']:.0f}")


if __name__ == "__main__":
    sys.exit(main())
