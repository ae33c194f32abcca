#!/usr/bin/env python3
"""Peer throughput benchmark: Agent Lightning's LightningStore (agentlightning 0.3.0).

Run this with the *peer* virtualenv, never the project's own one::

    python3 -m venv .bench-venv-peer
    .bench-venv-peer/bin/pip install agentlightning==0.3.0
    .bench-venv-peer/bin/python benchmarks/peer/agentlightning_peer.py \
        --backend memory --concurrency 16 --rollouts 500 --json

What it measures
----------------
One "cycle" is the work a runner does per rollout, minus the agent itself:

    claim   store.dequeue_rollout(worker_id=...)          -> AttemptedRollout
    spans   5 x store.add_otel_span(rollout_id, attempt_id, readable_span)
    finish  store.update_attempt(rollout_id, attempt_id, status="succeeded")

This is the call sequence of Agent Lightning's own runner
(``agentlightning/runner/agent.py``: ``iter()`` dequeues with its worker id,
``_step_impl()`` marks the attempt succeeded) with its default OpenTelemetry
tracer (``tracer/otel.py``: ``LightningSpanProcessor.on_end`` calls
``add_otel_span`` once per finished span, without a sequence id, so the store
allocates one). ``--span-mode`` selects two alternatives the package also uses:
``span`` (get_next_span_sequence_id + add_span per span, like the weave tracer)
and ``many`` (get_many_span_sequence_ids + add_many_spans once per rollout, like
the runner does when an agent returns a list of SpanCoreFields).

Not included in the cycle (the runner does these too, but they are not part of
the claim -> spans -> complete scenario): the per-rollout
``get_latest_resources()`` call and the runner's background heartbeat loop.

Phases:

1. enqueue: all M rollouts are enqueued up front, in one
   ``enqueue_many_rollouts`` call by default (``--enqueue-mode single`` uses one
   ``enqueue_rollout`` call each). Timed separately; reported as
   ``enqueue_seconds``, NOT part of ``seconds``.
2. loop: N asyncio runner tasks each repeat the cycle until ``dequeue_rollout``
   returns None (queue empty). ``seconds`` is the wall time from the start of
   this phase to the last successful completion; ``rollouts_per_s`` is
   completed rollouts / seconds.
3. verify (untimed): the store is asked how many rollouts are ``succeeded``;
   a mismatch makes the script exit non-zero.

The OpenTelemetry ``ReadableSpan`` objects the tracer would hand to the store
are built before the loop starts (building them is the agent's/tracer's cost,
not the store's). Their conversion into Agent Lightning ``Span`` records
happens inside the timed loop, as it does in the store.

Backends:

* ``memory``: ``InMemoryLightningStore()`` used directly, in this process and
  event loop (``thread_safe=False``, i.e. asyncio locks, its default).
* ``http``: a ``LightningStoreServer`` wrapping ``InMemoryLightningStore(thread_safe=True)``
  (the same construction as its ``agl store`` CLI) runs in a *subprocess* (this
  script re-executed with ``--serve``), bound to 127.0.0.1 on a free port, with
  ``launch_mode="asyncio"`` (uvicorn in that process's main loop, again as
  ``agl store`` does). The benchmark talks to it through one shared
  ``LightningStoreClient``. A subprocess was chosen over the in-process
  ``launch_mode="thread"`` so server and client do not share one interpreter
  (GIL) and event loop, which is the fairer setup for the peer and matches how
  it is deployed (store server and runners in separate processes).

Bounded run time: ``--max-seconds`` (default 60) caps the loop phase (runner
tasks are cancelled and the result is marked ``"timed_out": true``); the server
subprocess exits on its own when its stdin closes (parent gone) or after its
own deadline, and the parent kills it if it does not stop within 10 s.

Garbage collection: importing agentlightning (litellm, opentelemetry, fastapi,
...) leaves ~750k GC-tracked objects, so every full (generation-2) collection
pauses the process for 0.2-0.8 s on a 2-core machine. With runs that last about
a second, whether such a pause lands in the timed window decides the result. By
default the script therefore calls ``gc.collect(); gc.freeze()`` after setup
and before the timed phases (and the server subprocess does the same once
started), so later collections skip the import-time heap. ``--no-gc-freeze``
measures the as-shipped behaviour instead (noisier and slower).

The package tries to download a model price list when imported unless
``LITELLM_LOCAL_MODEL_COST_MAP=True``; this script sets it before importing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from importlib import metadata
from typing import Any, Deque, Dict, List, Optional

# Must be set before agentlightning (-> litellm) is imported anywhere, including
# in the server subprocess (which inherits this environment).
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

SPANS_PER_ROLLOUT = 5
READY_LINE = "AGL_PEER_SERVER_READY"


# --------------------------------------------------------------------------- #
# Server subprocess (--serve)
# --------------------------------------------------------------------------- #


async def _serve(port: int, max_seconds: float, gc_freeze: bool) -> None:
    from agentlightning.store import InMemoryLightningStore, LightningStoreServer

    store = InMemoryLightningStore(thread_safe=True)
    server = LightningStoreServer(store, host="127.0.0.1", port=port, launch_mode="asyncio")
    await server.start()  # returns once its /health check passes
    if gc_freeze:
        gc.collect()
        gc.freeze()

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def _watch_stdin() -> None:
        # The parent holds our stdin open; EOF means it is done (or died).
        try:
            sys.stdin.read()
        finally:
            loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=_watch_stdin, daemon=True).start()
    print(READY_LINE, flush=True)
    try:
        await asyncio.wait_for(stop.wait(), timeout=max_seconds)
    except asyncio.TimeoutError:
        print("server subprocess: own deadline reached, stopping", file=sys.stderr)
    await server.stop()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """Runs this script with --serve and waits until the store server is healthy."""

    def __init__(self, max_seconds: float, gc_freeze: bool, startup_timeout: float = 120.0) -> None:
        self.port = _free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="agl-peer-server-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve", "--port", str(self.port),
             "--max-seconds", str(max_seconds)] + ([] if gc_freeze else ["--no-gc-freeze"]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        self._wait_ready(startup_timeout)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _wait_ready(self, timeout: float) -> None:
        result: Dict[str, Any] = {}

        def _read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                if line.strip() == READY_LINE:
                    result["ready"] = True
                    return

        reader = threading.Thread(target=_read, daemon=True)
        reader.start()
        reader.join(timeout)
        if not result.get("ready"):
            self.close()
            raise RuntimeError(f"store server did not become ready within {timeout:.0f}s; log tail:\n{self.log_tail()}")

    def log_tail(self, n: int = 4000) -> str:
        with open(self.log.name, "r", errors="replace") as f:
            return f.read()[-n:]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()  # asks the server to stop
            except OSError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        try:
            os.unlink(self.log.name)
        except OSError:
            pass


# --------------------------------------------------------------------------- #
# Benchmark
# --------------------------------------------------------------------------- #


def _build_readable_spans(n: int) -> Deque[Any]:
    """The spans a tracer would hand to the store: an agent step with an LLM call, a tool call and a reward."""
    import random

    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

    resource = Resource.create({"service.name": "agl-peer-bench"})
    names = ["agent.step", "openai.chat.completion", "tool.search", "openai.chat.completion", "agentlightning.reward"]
    rng = random.Random(1234)
    spans: Deque[Any] = deque()
    now_ns = time.time_ns()
    for i in range(n):
        k = i % SPANS_PER_ROLLOUT
        ctx = SpanContext(
            trace_id=rng.getrandbits(128) or 1,
            span_id=rng.getrandbits(64) or 1,
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        attributes: Dict[str, Any] = {
            "gen_ai.system": "openai",
            "gen_ai.request.model": "bench-model",
            "gen_ai.usage.prompt_tokens": 128 + k,
            "gen_ai.usage.completion_tokens": 32 + k,
            "bench.index": i,
        }
        if names[k] == "agentlightning.reward":
            attributes = {"reward": 1.0}
        spans.append(
            ReadableSpan(
                name=names[k],
                context=ctx,
                parent=None,
                resource=resource,
                attributes=attributes,
                start_time=now_ns,
                end_time=now_ns + 1_000_000,
                status=Status(StatusCode.OK),
            )
        )
    return spans


async def _add_spans(store: Any, span_mode: str, rollout_id: str, attempt_id: str, readable: List[Any]) -> None:
    from agentlightning.types import Span

    if span_mode == "otel":
        # Default tracer path: one call per finished span; the store allocates the sequence id.
        for rs in readable:
            await store.add_otel_span(rollout_id, attempt_id, rs)
    elif span_mode == "span":
        # Weave-tracer path: allocate a sequence id, then add the converted span.
        for rs in readable:
            seq = await store.get_next_span_sequence_id(rollout_id, attempt_id)
            await store.add_span(Span.from_opentelemetry(rs, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=seq))
    elif span_mode == "many":
        # Runner path for agents that return a list of spans: bulk ids, bulk add.
        seqs = await store.get_many_span_sequence_ids([(rollout_id, attempt_id)] * len(readable))
        await store.add_many_spans(
            [Span.from_opentelemetry(rs, rollout_id=rollout_id, attempt_id=attempt_id, sequence_id=s)
             for rs, s in zip(readable, seqs)]
        )
    else:
        raise ValueError(span_mode)


def _cpu_seconds(pid: Optional[int]) -> float:
    """User+system CPU time of this process (pid None) or of another process."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    import psutil  # a dependency of agentlightning

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


async def _run(args: argparse.Namespace, store: Any, server_pid: Optional[int] = None) -> Dict[str, Any]:
    from agentlightning.types import EnqueueRolloutRequest

    m = args.rollouts
    readable_spans = _build_readable_spans(m * SPANS_PER_ROLLOUT)
    if args.gc_freeze:  # see module docstring: keep import-time GC pauses out of the timed phases
        gc.collect()
        gc.freeze()

    # ---- phase 1: enqueue (timed separately) ----
    t0 = time.perf_counter()
    if args.enqueue_mode == "batch":
        enqueued = await store.enqueue_many_rollouts(
            [EnqueueRolloutRequest(input={"task": i}, mode="train") for i in range(m)]
        )
    else:
        enqueued = [await store.enqueue_rollout(input={"task": i}, mode="train") for i in range(m)]
    enqueue_seconds = time.perf_counter() - t0
    if len(enqueued) != m:
        raise RuntimeError(f"enqueued {len(enqueued)} rollouts, expected {m}")

    # ---- phase 2: claim -> spans -> complete loop (timed) ----
    completed = 0
    last_completion = 0.0
    errors: List[str] = []

    async def runner(idx: int) -> None:
        nonlocal completed, last_completion
        worker_id = f"bench-runner-{idx}"
        while True:
            attempted = await store.dequeue_rollout(worker_id=worker_id)
            if attempted is None:  # queue empty (LightningStoreClient also returns None on errors)
                return
            rollout_id, attempt_id = attempted.rollout_id, attempted.attempt.attempt_id
            mine = [readable_spans.popleft() for _ in range(SPANS_PER_ROLLOUT)]
            try:
                await _add_spans(store, args.span_mode, rollout_id, attempt_id, mine)
                await store.update_attempt(rollout_id, attempt_id, status="succeeded")
            except Exception as exc:  # keep going; reported and verified below
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            completed += 1
            last_completion = time.perf_counter()

    load_1m = os.getloadavg()[0]
    cpu0, server_cpu0 = _cpu_seconds(None), (_cpu_seconds(server_pid) if server_pid else 0.0)
    start = time.perf_counter()
    tasks = [asyncio.create_task(runner(i)) for i in range(args.concurrency)]
    timed_out = False
    done, pending = await asyncio.wait(tasks, timeout=args.max_seconds)
    if pending:
        timed_out = True
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    for t in done:
        if t.exception() is not None:
            errors.append(f"runner crashed: {type(t.exception()).__name__}: {t.exception()}")
    end = last_completion if completed else time.perf_counter()
    seconds = end - start
    client_cpu = _cpu_seconds(None) - cpu0
    server_cpu = (_cpu_seconds(server_pid) - server_cpu0) if server_pid else None

    # ---- phase 3: verify (untimed) ----
    succeeded = await store.query_rollouts(status_in=["succeeded"])
    n_succeeded = len(succeeded)
    sample_spans = await store.query_spans(enqueued[0].rollout_id)

    return {
        "peer": "agentlightning",
        "version": metadata.version("agentlightning"),
        "backend": args.backend,
        "concurrency": args.concurrency,
        "rollouts": m,
        "seconds": round(seconds, 4),
        "rollouts_per_s": round(completed / seconds, 2) if seconds > 0 else None,
        "completed": completed,
        "verified_succeeded": n_succeeded,
        "spans_per_rollout": SPANS_PER_ROLLOUT,
        "spans_on_first_rollout": len(sample_spans),
        "span_mode": args.span_mode,
        "enqueue_mode": args.enqueue_mode,
        "enqueue_seconds": round(enqueue_seconds, 4),
        "server": "subprocess" if args.backend == "http" else None,
        # CPU seconds burnt during the loop phase; less sensitive than wall time to
        # other load on the machine (see load_avg_1m).
        "client_cpu_s": round(client_cpu, 3),
        "server_cpu_s": round(server_cpu, 3) if server_cpu is not None else None,
        "cpu_ms_per_rollout": round(1000 * (client_cpu + (server_cpu or 0.0)) / completed, 3) if completed else None,
        "load_avg_1m": round(load_1m, 2),
        "gc_freeze": args.gc_freeze,
        "timed_out": timed_out,
        "errors": len(errors),
        "first_error": errors[0][:300] if errors else None,
    }


async def _bench(args: argparse.Namespace) -> Dict[str, Any]:
    if args.backend == "memory":
        from agentlightning.store import InMemoryLightningStore

        return await _run(args, InMemoryLightningStore())

    from agentlightning.store import LightningStoreClient

    server = ServerProcess(max_seconds=args.max_seconds + 60, gc_freeze=args.gc_freeze)
    try:
        client = LightningStoreClient(server.url)
        try:
            return await _run(args, client, server_pid=server.proc.pid)
        finally:
            await client.close()
    except BaseException:
        print(f"server log tail:\n{server.log_tail()}", file=sys.stderr)
        raise
    finally:
        server.close()


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["memory", "http"], default="memory")
    p.add_argument("--concurrency", type=int, default=1, help="number of concurrent asyncio runner tasks")
    p.add_argument("--rollouts", type=int, default=500, help="total rollouts to enqueue and process")
    p.add_argument("--span-mode", choices=["otel", "span", "many"], default="otel",
                   help="how the 5 spans are added (default: otel = its default tracer's add_otel_span per span)")
    p.add_argument("--enqueue-mode", choices=["batch", "single"], default="batch")
    p.add_argument("--max-seconds", type=float, default=60.0, help="cap on the loop phase")
    p.add_argument("--no-gc-freeze", dest="gc_freeze", action="store_false",
                   help="do not gc.collect()+gc.freeze() before timing (see docstring)")
    p.add_argument("--json", action="store_true", help="print only one JSON line")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # internal: server subprocess
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.serve:
        asyncio.run(_serve(args.port, args.max_seconds, args.gc_freeze))
        return 0
    if args.concurrency < 1 or args.rollouts < 1:
        p.error("--concurrency and --rollouts must be >= 1")

    result = asyncio.run(_bench(args))
    if args.json:
        print(json.dumps(result), flush=True)
    else:
        print(f"agentlightning {result['version']} backend={result['backend']} span_mode={result['span_mode']} "
              f"concurrency={result['concurrency']} rollouts={result['rollouts']} gc_freeze={result['gc_freeze']}")
        print(f"  enqueue ({result['enqueue_mode']}): {result['enqueue_seconds']:.3f}s (not in loop time)")
        print(f"  loop: {result['completed']} completed in {result['seconds']:.3f}s -> "
              f"{result['rollouts_per_s']} rollouts/s (verified succeeded: {result['verified_succeeded']}, "
              f"spans on first rollout: {result['spans_on_first_rollout']}, errors: {result['errors']}, "
              f"timed_out: {result['timed_out']})")
        print(f"  cpu: client {result['client_cpu_s']}s, server {result['server_cpu_s']}s -> "
              f"{result['cpu_ms_per_rollout']} ms CPU per rollout (load avg 1m at start: {result['load_avg_1m']})")
        if result["first_error"]:
            print(f"  first error: {result['first_error']}")
    ok = (not result["timed_out"] and result["errors"] == 0
          and result["completed"] == result["rollouts"] == result["verified_succeeded"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
