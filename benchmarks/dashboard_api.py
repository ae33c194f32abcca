"""Dashboard read API latency on a large SQLite store.

Fills a temporary SQLite store with N rollouts (default 100,000: bulk enqueued; a fifth
claimed, most of those finished with a reward span, some failed, some still running),
starts ``agentbolt server`` on it in a separate process (uvicorn on 127.0.0.1) and times,
over HTTP, what the Rollouts page asks for on its first render:

* ``GET /v1/dashboard/rollouts`` — first page (50 rows), default sort (newest first);
  with a status filter; with a search; sorted by reward;
* ``GET /v1/dashboard/summary`` — the health badge.

Each figure is the median (and max) of several requests after one warm-up request.

Usage::

    python benchmarks/dashboard_api.py                 # 100,000 rollouts
    python benchmarks/dashboard_api.py --n 10000 --json
    python benchmarks/dashboard_api.py --smoke         # seconds-long CI smoke mode

``fill_store`` is importable (``from benchmarks.dashboard_api import fill_store``) to
build the same store for other benchmarks (the dashboard's browser benchmark).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from agentbolt import semconv
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import AttemptStatus, ErrorInfo, RolloutCreate, RolloutMode, Span

__all__ = ["fill_store", "serve", "time_route", "main"]

TOKEN = "bench-admin"
TOPICS = ["algebra", "geometry", "arithmetic", "probability", "calculus"]
ENQUEUE_BATCH = 5000
CLAIM_BATCH = 1000


async def _fill(path: Path, n: int, claimed_fraction: float, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    store = SqliteStore(path)
    await store.start()
    try:
        for start in range(0, n, ENQUEUE_BATCH):
            await store.enqueue_rollouts(
                [
                    RolloutCreate(
                        rollout_id=f"ro-{i:07d}",
                        input={
                            "question": f"Problem {i}: what is {rng.randint(2, 999)} * {rng.randint(2, 999)}?",
                            "topic": TOPICS[i % len(TOPICS)],
                        },
                        mode=RolloutMode.VAL if i % 10 == 0 else RolloutMode.TRAIN,
                    )
                    for i in range(start, min(n, start + ENQUEUE_BATCH))
                ]
            )
        to_claim = int(n * claimed_fraction)
        counts = {"enqueued": n, "succeeded": 0, "failed": 0, "running": 0}
        while to_claim > 0:
            claims = await store.claim_rollouts(f"runner-{to_claim % 8}", limit=min(CLAIM_BATCH, to_claim))
            if not claims:
                break
            to_claim -= len(claims)
            finished = claims[: int(len(claims) * 0.9)]
            await store.add_spans(
                [
                    Span(
                        rollout_id=c.rollout.rollout_id,
                        attempt_id=c.attempt.attempt_id,
                        name=semconv.REWARD_SPAN,
                        attributes=semconv.reward_span_attributes({"reward": rng.random()}, "reward"),
                    )
                    for c in finished
                ]
            )
            updates = []
            for i, c in enumerate(claims):
                if i < len(finished) - 20:
                    updates.append(store.update_attempt(c.rollout.rollout_id, c.attempt.attempt_id,
                                                        status=AttemptStatus.SUCCEEDED))
                    counts["succeeded"] += 1
                elif i < len(finished):
                    updates.append(store.update_attempt(c.rollout.rollout_id, c.attempt.attempt_id,
                                                        status=AttemptStatus.FAILED, error=ErrorInfo(message="wrong")))
                    counts["failed"] += 1
                else:
                    counts["running"] += 1
            await asyncio.gather(*updates)  # concurrent: the writer commits them in a few groups
        for k in range(8):
            await store.update_worker(f"runner-{k}", metadata={"kind": "runner"})
        return counts
    finally:
        await store.close()


def fill_store(path: str | os.PathLike[str], n: int = 100_000, *, claimed_fraction: float = 0.2,
               seed: int = 0) -> dict[str, int]:
    """Create (or add to) the SQLite store at ``path`` with ``n`` rollouts ``ro-0000000``…:
    inputs ``{"question": "Problem i: what is a * b?", "topic": ...}``, every tenth in
    ``val`` mode; ``claimed_fraction`` of them claimed by 8 runners, 90% of those given a
    reward and finished (a few failed), the rest left running. Returns the counts."""
    return asyncio.run(_fill(Path(path), n, claimed_fraction, seed))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(path: str | os.PathLike[str], *, token: str = TOKEN) -> Iterator[str]:
    """Run ``agentbolt server`` on the SQLite store at ``path`` in a child process; yields
    its base URL once it answers, stops it on exit."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentbolt", "server", "--store", f"sqlite:///{path}", "--port", str(port),
         "--admin-token", token, "--log-level", "warning"],
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start; its log is above")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def time_route(client: httpx.Client, path: str, params: object = None, reps: int = 7) -> dict[str, float]:
    """Median and max seconds of ``reps`` GETs of ``path`` (after one warm-up)."""
    client.get(path, params=params).raise_for_status()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        r = client.get(path, params=params)
        times.append(time.perf_counter() - t0)
        r.raise_for_status()
    return {"median_s": statistics.median(times), "max_s": max(times), "bytes": len(r.content)}


CASES = [
    ("rollouts: first page, newest first", "/v1/dashboard/rollouts", {}),
    ("rollouts: status=succeeded", "/v1/dashboard/rollouts", {"status": "succeeded"}),
    ("rollouts: status=queuing&mode=val", "/v1/dashboard/rollouts", {"status": "queuing", "mode": "val"}),
    ("rollouts: search=geometry", "/v1/dashboard/rollouts", {"search": "geometry"}),
    ("rollouts: search=problem 4242 (rare)", "/v1/dashboard/rollouts", {"search": "Problem 4242:"}),
    ("rollouts: sort_by=reward", "/v1/dashboard/rollouts", {"sort_by": "reward"}),
    ("rollouts: sort_by=duration, succeeded", "/v1/dashboard/rollouts", {"sort_by": "duration", "status": "succeeded"}),
    ("summary", "/v1/dashboard/summary", {}),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="rollouts in the store")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print one JSON object per case")
    parser.add_argument("--smoke", action="store_true", help="1,000 rollouts, 2 reps")
    args = parser.parse_args(argv)
    n, reps = (1000, 2) if args.smoke else (args.n, args.reps)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store.db"
        t0 = time.perf_counter()
        counts = fill_store(path, n)
        fill_s = time.perf_counter() - t0
        if not args.json:
            print(f"filled {n:,} rollouts in {fill_s:.1f} s: {counts}")
        with serve(path) as url, httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"},
                                              timeout=60) as client:
            for name, route, params in CASES:
                figures = time_route(client, route, params, reps)
                total = client.get(route, params=params).json().get("total")
                row = {"case": name, "n": n, **figures, "total": total}
                if args.json:
                    print(json.dumps(row))
                else:
                    median_ms, max_ms = figures["median_s"] * 1000, figures["max_s"] * 1000
                    print(f"{name:45s} median {median_ms:7.1f} ms  max {max_ms:7.1f} ms"
                          f"  {figures['bytes']:>7,} B  total={total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
