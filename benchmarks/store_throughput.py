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
* ``postgres``     — PostgresStore in this process (a throwaway schema on ``--postgres-url``)
* ``http-postgres`` — HttpStore → ``--servers`` server processes on one PostgreSQL store

Runner tasks can be spread over ``--processes`` client processes, each with its own
``HttpStore`` (over every server URL, starting at a different one, as ``agentbolt runner
--server ... --server ...`` does): ``--runners 1000 --processes 4 --servers 2`` is the
scale-out scenario. Client processes are started and connected before the timed window.
``--cpu`` adds, per cell, the CPU seconds each role (servers, clients, PostgreSQL, this
process) used in the timed window; ``--profile-servers DIR`` runs the servers under
cProfile and prints where their time went.

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
    python benchmarks/store_throughput.py --backends http-postgres --runners 1000 --processes 4 --servers 2 --cpu
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from agentbolt.store.base import Store
from agentbolt.store.http import HttpStore
from agentbolt.store.memory import MemoryStore
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import AttemptStatus, RolloutCreate, Span

try:  # benchmarks/compare_revisions.py runs this script on older agentbolt trees too
    from agentbolt.types import ReportAndClaim  # noqa: F401 - only whether it exists
    REPORT_AND_CLAIM = True
except ImportError:  # before Store.report_and_claim: report, then claim
    REPORT_AND_CLAIM = False

ROOT = Path(__file__).resolve().parent
PEER_PY = ROOT.parent / ".bench-venv-peer" / "bin" / "python"
POSTGRES_URL = os.environ.get("AGENTBOLT_BENCH_POSTGRES_URL", "postgresql://127.0.0.1:5432/test")
console = Console()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def enqueue(store: Store, rollouts: int) -> None:
    for i in range(0, rollouts, 100):
        n = min(100, rollouts - i)
        await store.enqueue_rollouts([RolloutCreate(input={"task": i + j}) for j in range(n)])


async def run_tasks(
    store: Store, concurrency: int, span_calls: int = 1, prefix: str = "bench", claim_with_report: bool = True
) -> int:
    """``concurrency`` runner tasks looping claim → 5 spans → succeeded until the queue
    is empty; returns how many rollouts they completed. With ``claim_with_report`` (and
    an agentbolt that has ``Store.report_and_claim``) a task claims its next rollout in
    the call that reports the last one, as agentbolt's runner does."""
    joint = claim_with_report and REPORT_AND_CLAIM

    async def runner(k: int) -> int:
        done = 0
        worker = f"{prefix}-{k}"
        claims = await store.claim_rollouts(worker, 1)
        while claims:
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
            if joint:
                report = await store.report_and_claim(rid, aid, status=AttemptStatus.SUCCEEDED, worker_id=worker)
                claims = report.claims
            else:
                await store.update_attempt(rid, aid, status=AttemptStatus.SUCCEEDED)
                claims = await store.claim_rollouts(worker, 1)
            done += 1
        return done

    return sum(await asyncio.gather(*(runner(k) for k in range(concurrency))))


async def scenario(
    store: Store, concurrency: int, rollouts: int, span_calls: int = 1, claim_with_report: bool = True
) -> float:
    """Run the scenario; return rollouts per second (wall clock, enqueue included)."""
    t0 = time.perf_counter()
    await enqueue(store, rollouts)
    done = await run_tasks(store, concurrency, span_calls, claim_with_report=claim_with_report)
    elapsed = time.perf_counter() - t0
    if done != rollouts:
        raise RuntimeError(f"completed {done} of {rollouts} rollouts")
    return rollouts / elapsed


STATEMENTS = [0]
"""Statements psycopg sent in this process (``--count-statements``; an executemany counts its rows)."""


def count_statements() -> None:
    """Count the statements psycopg sends in this process (the in-process ``postgres``
    backend: PostgreSQL has no per-statement counter without pg_stat_statements)."""
    import psycopg

    execute, executemany = psycopg.AsyncCursor.execute, psycopg.AsyncCursor.executemany

    async def counted_execute(self, query, params=None, **kw):  # type: ignore[no-untyped-def]
        STATEMENTS[0] += 1
        return await execute(self, query, params, **kw)

    async def counted_executemany(self, query, params_seq, **kw):  # type: ignore[no-untyped-def]
        params_seq = list(params_seq)
        STATEMENTS[0] += len(params_seq)
        return await executemany(self, query, params_seq, **kw)

    psycopg.AsyncCursor.execute = counted_execute  # type: ignore[method-assign]
    psycopg.AsyncCursor.executemany = counted_executemany  # type: ignore[method-assign]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux /proc), 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_pids() -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "comm").read_text().strip() == "postgres":
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


def postgres_commits(postgres_url: str) -> float:
    """Transactions committed so far in the benchmark's database (pg_stat_database)."""
    import psycopg

    from agentbolt.store.postgres import parse_postgres_url

    with psycopg.connect(parse_postgres_url(postgres_url).conninfo, autocommit=True) as conn:
        row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").fetchone()
    return float(row[0]) if row else 0.0


@dataclass
class CpuMeter:
    """CPU seconds used by each role between :meth:`start` and :meth:`stop` (and, with a
    ``postgres_url``, the transactions PostgreSQL committed meanwhile)."""

    roles: dict[str, list[int]]
    postgres_url: str | None = None
    before: dict[str, float] = field(default_factory=dict)
    used: dict[str, float] = field(default_factory=dict)

    def _sample(self) -> dict[str, float]:
        roles = dict(self.roles, postgres=postgres_pids(), bench=[os.getpid()])
        sample = {role: sum(cpu_seconds(p) for p in pids) for role, pids in roles.items()}
        if self.postgres_url:
            sample["pg_commits"] = postgres_commits(self.postgres_url)
        return sample

    def start(self) -> None:
        self.before = self._sample()

    def stop(self) -> None:
        after = self._sample()
        # postgres backends come and go: count what the live ones used (a lower bound)
        self.used = {role: round(after[role] - self.before.get(role, 0.0), 2) for role in after}


class ServerProcess:
    def __init__(self, store_url: str, profile: Path | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        serve = f"run_server(store_url={store_url!r}, host='127.0.0.1', port={self.port}, log_level='warning')"
        if profile is None:
            code = f"from agentbolt.server import run_server\n{serve}\n"
        else:  # uvicorn re-raises SIGTERM after its shutdown: exit through Python so the profile is saved
            # timed by the process's CPU time: other jobs on the machine do not show up in it
            code = (
                "import cProfile, signal, sys, time\n"
                "from agentbolt.server import run_server\n"
                "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
                "profile = cProfile.Profile(time.process_time)\n"
                "profile.enable()\n"
                f"try:\n    {serve}\n"
                f"finally:\n    profile.disable()\n    profile.dump_stats({str(profile)!r})\n"
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
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class ClientProcess:
    """This script in ``--client`` mode: ``tasks`` runner tasks on one HttpStore of its own."""

    def __init__(self, urls: list[str], tasks: int, span_calls: int, name: str, claim_with_report: bool) -> None:
        argv = [sys.executable, __file__, "--client", ",".join(urls), "--tasks", str(tasks),
                "--span-calls", str(span_calls), "--client-name", name]
        if not claim_with_report:
            argv.append("--report-then-claim")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def wait_ready(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "READY":
            raise RuntimeError(f"client process did not start: {line!r}")

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("GO\n")
        self.proc.stdin.flush()

    def result(self) -> tuple[int, float]:
        """(rollouts completed, CPU seconds the process used from GO to the end)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.proc.wait(30)
        answer = json.loads(line)
        return int(answer["done"]), float(answer["cpu"])


async def client_main(urls: list[str], tasks: int, span_calls: int, name: str, claim_with_report: bool) -> None:
    """``--client`` mode: connect, say READY, wait for GO on stdin, run, print the count."""
    store = HttpStore(urls, max_connections=max(16, min(tasks, 128)))
    await store.start()
    await store.stats()  # connected before the timed window
    print("READY", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    cpu0 = time.process_time()
    done = await run_tasks(store, tasks, span_calls, prefix=name, claim_with_report=claim_with_report)
    cpu = time.process_time() - cpu0
    await store.close()
    print(json.dumps({"done": done, "cpu": round(cpu, 3)}), flush=True)


def spread(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _stats_line(path: Path, top: int) -> str:
    stats = pstats.Stats(str(path))
    stats.sort_stats("tottime")
    out = []
    total = stats.total_tt  # type: ignore[attr-defined]
    for (file, line, fn), (_cc, _nc, tt, ct, _callers) in sorted(
        stats.stats.items(), key=lambda kv: kv[1][2], reverse=True  # type: ignore[attr-defined]
    )[:top]:
        where = f"{Path(file).parent.name}/{Path(file).name}:{line}" if line else file
        out.append(f"  {tt / total:6.1%} self {ct / total:6.1%} incl  {fn}  ({where})")
    return "\n".join(out)


@dataclass
class Cell:
    rps: float
    cpu: dict[str, float] | None = None


async def run_ours(
    backend: str,
    concurrency: int,
    rollouts: int,
    tmp: Path,
    span_calls: int = 1,
    *,
    processes: int = 1,
    servers: int = 1,
    postgres_url: str = POSTGRES_URL,
    cpu: bool = False,
    profile_dir: Path | None = None,
    claim_with_report: bool = True,
) -> Cell:
    db = tmp / f"{backend}-{concurrency}-{time.monotonic_ns()}.db"
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    pg_store = None
    if backend in ("postgres", "http-postgres"):
        from agentbolt.store.postgres import PostgresStore

        pg_store = PostgresStore(postgres_url, schema=schema, drop_schema_on_close=True)
        await pg_store.start()  # creates the schema, so the servers find it migrated
    if backend == "memory":
        store: Store = MemoryStore()
    elif backend == "sqlite":
        store = SqliteStore(db)
    elif backend == "postgres":
        assert pg_store is not None
        store = pg_store
    store_url = f"sqlite:///{db}" if backend in ("http", "http-nobatch") else _with_schema(postgres_url, schema)
    procs: list[ServerProcess] = []
    clients: list[ClientProcess] = []
    try:
        if backend.startswith("http"):
            for k in range(servers):
                profile = profile_dir / f"server-{backend}-{concurrency}-{k}.prof" if profile_dir else None
                procs.append(ServerProcess(store_url, profile))
            urls = [p.url for p in procs]
            store = HttpStore(urls, batching=backend != "http-nobatch", max_connections=max(16, min(concurrency, 128)))
        await store.start()
        if processes == 1:
            meter = CpuMeter({"servers": [p.proc.pid for p in procs]}, postgres_url if pg_store and cpu else None)
            meter.start()
            statements = STATEMENTS[0]
            rps = await scenario(store, concurrency, rollouts, span_calls, claim_with_report)
            meter.stop()
            if STATEMENTS[0] > statements:  # --count-statements
                meter.used["pg_statements"] = STATEMENTS[0] - statements
            return Cell(rps, meter.used if cpu else None)
        for i, tasks in enumerate(spread(concurrency, processes)):
            order = urls[i % len(urls):] + urls[: i % len(urls)]
            clients.append(ClientProcess(order, tasks, span_calls, name=f"p{i}", claim_with_report=claim_with_report))
        for c in clients:
            c.wait_ready()
        meter = CpuMeter({"servers": [p.proc.pid for p in procs]}, postgres_url if pg_store and cpu else None)
        meter.start()
        t0 = time.perf_counter()
        await enqueue(store, rollouts)
        for c in clients:
            c.go()
        results = await asyncio.gather(*(asyncio.to_thread(c.result) for c in clients))
        elapsed = time.perf_counter() - t0
        meter.stop()
        done = sum(n for n, _ in results)
        meter.used["clients"] = round(sum(cpu for _, cpu in results), 2)  # they have exited: their own count
        if done != rollouts:
            raise RuntimeError(f"completed {done} of {rollouts} rollouts")
        return Cell(rollouts / elapsed, meter.used if cpu else None)
    finally:
        for c in clients:
            if c.proc.poll() is None:
                c.proc.kill()
        if store is not pg_store:
            await store.close()
        for p in procs:
            p.stop()
        if pg_store is not None:
            await pg_store.close()
        if profile_dir:
            for prof in sorted(profile_dir.glob(f"server-{backend}-{concurrency}-*.prof")):
                console.print(f"[bold]{prof.name}[/]: top functions by own time\n{_stats_line(prof, 25)}")


def _with_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


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
    ap.add_argument("--runners", type=int, default=None, help="one cell with this many runner tasks (overrides --concurrency)")
    ap.add_argument("--processes", type=int, default=1, help="client processes the runner tasks are spread over (http backends)")
    ap.add_argument("--servers", type=int, default=1, help="server processes (http-postgres; http on SQLite takes 1)")
    ap.add_argument("--postgres-url", default=POSTGRES_URL, help="database of the postgres backends (a schema per cell)")
    ap.add_argument("--cpu", action="store_true", help="report the CPU seconds of each role in the timed window")
    ap.add_argument("--profile-servers", type=Path, default=None, metavar="DIR",
                    help="run the servers under cProfile, keep the .prof files in DIR and print their top functions")
    ap.add_argument("--rollouts", type=int, default=None, help="rollouts per cell (default: 2000, smoke 40)")
    ap.add_argument("--json", action="store_true", help="print one JSON line per cell too")
    ap.add_argument(
        "--span-calls",
        type=int,
        choices=(1, 5),
        default=1,
        help="1: the 5 spans go in one add_spans call (agentbolt's tracer batches); 5: one call per span",
    )
    ap.add_argument("--count-statements", action="store_true",
                    help="with --cpu: count the statements psycopg sends (in-process postgres backend)")
    ap.add_argument("--report-then-claim", action="store_true",
                    help="report an attempt, then claim the next rollout in a call of its own (as before "
                         "Store.report_and_claim; an older agentbolt always does)")
    ap.add_argument("--client", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tasks", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--client-name", default="p0", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        asyncio.run(client_main(args.client.split(","), args.tasks, args.span_calls, args.client_name,
                                not args.report_then_claim))
        return

    if args.count_statements:
        count_statements()
    rollouts = args.rollouts or (40 if args.smoke else 2000)
    conc = [args.runners] if args.runners else [int(c) for c in args.concurrency.split(",")]
    backends = args.backends.split(",")
    # --processes and --servers apply to the http backends (in-process ones run in this process)
    if args.servers > 1 and {"http", "http-nobatch"} & set(backends):
        ap.error(f"--servers {args.servers}: servers on SQLite cannot share its file; use the http-postgres backend")
    if args.profile_servers:
        args.profile_servers.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="agentbolt-bench-") as d:
        for backend in backends:
            for c in conc:
                n = rollouts if not (backend == "http-nobatch" and c == 1) else max(rollouts // 4, 10)
                http = backend.startswith("http")
                cell = asyncio.run(run_ours(
                    backend, c, n, Path(d), args.span_calls,
                    processes=args.processes if http else 1,
                    servers=args.servers if http else 1,
                    postgres_url=args.postgres_url,
                    cpu=args.cpu,
                    profile_dir=args.profile_servers,
                    claim_with_report=not args.report_then_claim,
                ))
                rps = cell.rps
                row: dict[str, object] = {
                    "system": "agentbolt",
                    "backend": backend,
                    "concurrency": c,
                    "rollouts": n,
                    "span_calls": args.span_calls,
                    "processes": args.processes if http else 1,
                    "servers": args.servers if http else 1,
                    "rollouts_per_s": round(rps, 1),
                }
                row["claim_with_report"] = REPORT_AND_CLAIM and not args.report_then_claim
                if cell.cpu is not None:
                    row["cpu_seconds"] = cell.cpu
                    # per rollout, as floats: what benchmarks/compare_revisions.py compares
                    for role, used in cell.cpu.items():
                        per = used / n if role.startswith("pg_") else used / n * 1000
                        row[f"{role}_per_rollout" if role.startswith("pg_") else f"cpu_ms_{role}"] = round(per, 4)
                    row["cpu_ms_total"] = round(
                        sum(v for k, v in cell.cpu.items() if not k.startswith("pg_")) / n * 1000, 4)
                results.append(row)
                console.print(f"agentbolt {backend:13s} c={c:<4d} {rps:9.1f} rollouts/s"
                              + (f"  cpu s: {cell.cpu}" if cell.cpu else ""))
                if cell.cpu:  # per rollout: CPU ms of each role, commits and statements
                    console.print("  per rollout: " + ", ".join(
                        f"{k} {v / n * (1 if k.startswith('pg_') else 1000):.2f}{'' if k.startswith('pg_') else ' ms'}"
                        for k, v in cell.cpu.items()))
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
