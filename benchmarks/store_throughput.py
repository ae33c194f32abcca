"""End-to-end store throughput: rollouts per second for enqueue → claim → 5 spans → complete.

Each "runner task" is an asyncio task that loops: claim one rollout, add its 5 spans in
one call (what agentbolt's tracer does: it ships spans in batches), mark the attempt
succeeded — until the queue is empty. Rollouts are enqueued in batches of 100 inside the
timed window. Backends:

* ``memory``       — MemoryStore in this process
* ``sqlite``       — SqliteStore in this process (file in a temp dir; WAL, synchronous=FULL)
* ``http``         — HttpStore (one shared client, auto-batching on) → ``agentbolt server``
                     in a separate process on a SqliteStore
* ``http-nobatch`` — the same with client-side batching off (one HTTP request per call)

``--span-calls 5`` sends the 5 spans in 5 separate calls instead (what the peer's default
OpenTelemetry path does: ``add_otel_span`` once per span).

With ``--peer`` it also runs the reference peer (Agent Lightning 0.3.0's
``InMemoryLightningStore`` and its ``LightningStoreServer``/``LightningStoreClient``)
through the same scenario in the same run, from its own venv
(``benchmarks/peer/setup.sh`` creates it), and prints the ratios.

Usage::

    python benchmarks/store_throughput.py                 # full run
    python benchmarks/store_throughput.py --peer          # with the peer
    python benchmarks/store_throughput.py --smoke         # seconds-long CI smoke mode
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from agentbolt.store.base import Store
from agentbolt.store.http import HttpStore
from agentbolt.store.memory import MemoryStore
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import AttemptStatus, RolloutCreate, Span

ROOT = Path(__file__).resolve().parent
PEER_PY = ROOT.parent / ".bench-venv-peer" / "bin" / "python"
console = Console()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def scenario(store: Store, concurrency: int, rollouts: int, span_calls: int = 1) -> float:
    """Run the scenario; return rollouts per second (wall clock, enqueue included)."""
    t0 = time.perf_counter()
    for i in range(0, rollouts, 100):
        n = min(100, rollouts - i)
        await store.enqueue_rollouts([RolloutCreate(input={"task": i + j}) for j in range(n)])

    async def runner(k: int) -> int:
        done = 0
        while True:
            claims = await store.claim_rollouts(f"bench-{k}", 1)
            if not claims:
                return done
            rid, aid = claims[0].rollout.rollout_id, claims[0].attempt.attempt_id
            spans = [
                Span(rollout_id=rid, attempt_id=aid, name=f"step-{j}", attributes={"j": j, "k": k})
                for j in range(5)
            ]
            if span_calls == 1:
                await store.add_spans(spans)
            else:  # one call per span, as an unbatched tracer would
                for span in spans:
                    await store.add_spans([span])
            await store.update_attempt(rid, aid, status=AttemptStatus.SUCCEEDED)
            done += 1

    counts = await asyncio.gather(*(runner(k) for k in range(concurrency)))
    elapsed = time.perf_counter() - t0
    if sum(counts) != rollouts:
        raise RuntimeError(f"completed {sum(counts)} of {rollouts} rollouts")
    return rollouts / elapsed


class ServerProcess:
    def __init__(self, db: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        code = (
            "from agentbolt.server import run_server\n"
            f"run_server(store_url='sqlite:///{db}', host='127.0.0.1', port={self.port}, log_level='warning')\n"
        )
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


async def run_ours(backend: str, concurrency: int, rollouts: int, tmp: Path, span_calls: int = 1) -> float:
    db = tmp / f"{backend}-{concurrency}-{time.monotonic_ns()}.db"
    if backend == "memory":
        store: Store = MemoryStore()
    elif backend == "sqlite":
        store = SqliteStore(db)
    else:
        server = ServerProcess(db)
        store = HttpStore(server.url, batching=backend == "http", max_connections=max(16, min(concurrency, 128)))
    try:
        await store.start()
        return await scenario(store, concurrency, rollouts, span_calls)
    finally:
        await store.close()
        if backend.startswith("http"):
            server.stop()


def run_peer(backend: str, concurrency: int, rollouts: int) -> float | None:
    if not PEER_PY.exists():
        return None
    cmd = [
        str(PEER_PY),
        str(ROOT / "peer" / "agentlightning_peer.py"),
        "--backend",
        backend,
        "--concurrency",
        str(concurrency),
        "--rollouts",
        str(rollouts),
        "--json",
    ]
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, check=False)
    except subprocess.TimeoutExpired:
        console.print(f"[yellow]peer {backend}/{concurrency} timed out[/]")
        return None
    for line in reversed(out.stdout.strip().splitlines()):
        if line.startswith("{"):
            return float(json.loads(line)["rollouts_per_s"])
    console.print(f"[yellow]peer {backend}/{concurrency} failed:[/] {out.stderr[-500:]}")
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    ap.add_argument("--peer", action="store_true", help="also run Agent Lightning 0.3.0 (needs .bench-venv-peer)")
    ap.add_argument("--backends", default="memory,sqlite,http,http-nobatch")
    ap.add_argument("--concurrency", default="1,16,128")
    ap.add_argument("--rollouts", type=int, default=None, help="rollouts per cell (default: 2000, smoke 40)")
    ap.add_argument("--json", action="store_true", help="print one JSON line per cell too")
    ap.add_argument(
        "--span-calls",
        type=int,
        choices=(1, 5),
        default=1,
        help="1: the 5 spans go in one add_spans call (agentbolt's tracer batches); 5: one call per span",
    )
    args = ap.parse_args()

    rollouts = args.rollouts or (40 if args.smoke else 2000)
    conc = [int(c) for c in args.concurrency.split(",")]
    backends = args.backends.split(",")
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="agentbolt-bench-") as d:
        for backend in backends:
            for c in conc:
                n = rollouts if not (backend == "http-nobatch" and c == 1) else max(rollouts // 4, 10)
                rps = asyncio.run(run_ours(backend, c, n, Path(d), args.span_calls))
                row: dict[str, object] = {
                    "system": "agentbolt",
                    "backend": backend,
                    "concurrency": c,
                    "rollouts": n,
                    "span_calls": args.span_calls,
                    "rollouts_per_s": round(rps, 1),
                }
                results.append(row)
                console.print(f"agentbolt {backend:12s} c={c:<4d} {rps:9.1f} rollouts/s")
                if args.json:
                    print(json.dumps(row), flush=True)
        if args.peer:
            peer_n = max(rollouts // 4, 20)
            for backend in ("memory", "http"):
                for c in conc:
                    rps = run_peer(backend, c, peer_n)
                    if rps is None:
                        continue
                    row = {
                        "system": "agentlightning-0.3.0",
                        "backend": backend,
                        "concurrency": c,
                        "rollouts": peer_n,
                        "span_calls": 5,
                        "rollouts_per_s": round(rps, 1),
                    }
                    results.append(row)
                    console.print(f"peer      {backend:12s} c={c:<4d} {rps:9.1f} rollouts/s")
                    if args.json:
                        print(json.dumps(row), flush=True)

    table = Table(title="End-to-end rollouts/s (enqueue → claim → 5 spans → complete)")
    table.add_column("system")
    table.add_column("backend")
    for c in conc:
        table.add_column(f"{c} runners", justify="right")
    keyed = {(r["system"], r["backend"], r["concurrency"]): r["rollouts_per_s"] for r in results}
    for system, backend in dict.fromkeys((r["system"], r["backend"]) for r in results):
        table.add_row(str(system), str(backend), *(str(keyed.get((system, backend, c), "–")) for c in conc))
    console.print(table)
    if args.peer:
        for ours, theirs in (("memory", "memory"), ("http", "http")):
            for c in conc:
                a = keyed.get(("agentbolt", ours, c))
                b = keyed.get(("agentlightning-0.3.0", theirs, c))
                if a and b:
                    console.print(f"ratio agentbolt/peer {ours:6s} c={c:<4d}: {float(a) / float(b):6.1f}x")


if __name__ == "__main__":
    main()
