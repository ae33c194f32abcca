"""Overhead of the gateway: added latency and proxied requests/s over a zero-latency engine.

Three processes: a fake engine (a minimal asyncio HTTP/1.1 server answering every POST
at once with a fixed vLLM-style chat completion: token ids and logprobs), the agentbolt
server with the gateway in front of it (``VLLMEngine`` over HTTP, a SQLite store, every
call recorded as a span), and the load generator — ``wrk`` (Debian's package) with a
Lua script for the POST body, or, without wrk, a small asyncio client.

Measured in one run:

* latency at 1 connection, engine direct vs through the gateway (the rollout's URL with
  its scoped token): p50 / p99 and the **added** p50 / p99;
* proxied non-streaming requests/s at 16 connections (and the engine alone for scale);
* spans stored == calls answered (every call recorded);
* the server process's CPU time per call (``/proc``), which other processes' load moves
  far less than latencies;
* with ``--rate R``: 16 connections offering R calls/s in all (``hey``), whose p99
  compares codes at one rate (wrk's 16 connections take what each code can serve);
* with ``--peer`` / ``--peer1``: the same cells through a reference peer in front of the
  same engine, in the same run, each run by its own virtualenv (``peer/setup.sh`` makes
  both) and counting the calls it stored its own way: ``--peer`` is Agent Lightning
  0.3.0's LLM proxy (``peer/agentlightning_gateway_peer.py``: LiteLLM's proxy server,
  spans), ``--peer1`` Agent Lightning 1.0.2's server, its ``agl-server`` app with its
  proxied chat-completions route (``peer/agentlightning1_gateway_peer.py``: one
  ``model_request`` event per call; 1.0 needs Python >= 3.12, pyenv's here).

Targets: added p50 <= 0.5 ms at 1 connection (issue 36; 1 ms before); >= 1,000 req/s and p99 <= 25 ms at 16
connections (issue 19: no long tails).

    python benchmarks/gateway_overhead.py                # 5 s per cell
    python benchmarks/gateway_overhead.py --smoke --json # ~1 s per cell, for CI
    python benchmarks/gateway_overhead.py --peer --peer1 # and Agent Lightning 0.3.0's and 1.0's gateways
    python benchmarks/gateway_overhead.py --rate 960     # and 16 connections at 960 calls/s (hey)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from canned_answer import CHAT_ANSWER, MODEL  # benchmarks/ is on sys.path when run as a script
from http_load import load, run_hey

TARGET_ADDED_P50_MS = 0.5
TARGET_RPS = 1000.0
TARGET_P99_16_MS = 25.0
ADMIN = "bench-admin"
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Peer:
    """A reference gateway run by its own venv's Python; its script prints ``{"url", "token"}``
    once it serves and ``{"recorded", "what"}`` after SIGTERM."""

    name: str
    key: str  # its option (--key) and the prefix of its fields in the results
    script: str  # under benchmarks/peer/
    venv: str  # made by benchmarks/peer/setup.sh
    needs: str = ""  # what its Python must be, for --help


PEERS = (
    Peer("Agent Lightning 0.3.0 LLMProxy", "peer", "agentlightning_gateway_peer.py", ".bench-venv-peer"),
    Peer(
        "Agent Lightning 1.0.2 agl-server", "peer1", "agentlightning1_gateway_peer.py", ".bench-venv-peer1", " >= 3.12"
    ),
)
BODY = json.dumps(
    {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "You are a careful assistant. Think, then answer."},
            {"role": "user", "content": "what is 6 times 7?"},
        ],
        "max_tokens": 16,
    }
)

# ----------------------------------------------------------------------------- fake engine
_RESPONSE = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
    + str(len(CHAT_ANSWER)).encode()
    + b"\r\n\r\n"
    + CHAT_ANSWER
)


class _EngineProtocol(asyncio.Protocol):
    """Keep-alive HTTP/1.1: answer each complete request (headers + Content-Length body)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].lower()
            i = head.find(b"content-length:")
            length = int(head[i + 15 : head.find(b"\r\n", i) if head.find(b"\r\n", i) > 0 else None]) if i >= 0 else 0
            if len(self.buf) < end + 4 + length:
                return
            self.buf = self.buf[end + 4 + length :]
            self.transport.write(_RESPONSE)


def serve_engine(port: int) -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_EngineProtocol, "127.0.0.1", port, backlog=1024)
        await server.serve_forever()

    asyncio.run(main())


# ----------------------------------------------------------------------------- gateway server
def serve_gateway(port: int, engine_url: str, db: str) -> None:
    import uvicorn

    from agentbolt.gateway import Gateway, GatewayConfig

    try:
        from agentbolt.engines import VLLMEngine
    except ImportError:  # a revision before the engines room (benchmarks/compare_revisions.py)
        from agentbolt.gateway import VLLMEngine  # type: ignore[attr-defined,no-redef]
    from agentbolt.server import create_app
    from agentbolt.store.url import open_store

    gateway = Gateway(VLLMEngine(engine_url, policy_version=1, model=MODEL), GatewayConfig())
    store = open_store("memory://" if db == "memory" else f"sqlite:///{db}")
    app = create_app(store, admin_token=ADMIN, gateway=gateway, deadline_check=False)
    profile = os.environ.get("AGENTBOLT_BENCH_PROFILE")
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        backlog=1024,
    )
    if profile:
        prof.disable()
        prof.dump_stats(profile)


# ----------------------------------------------------------------------------- processes
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"the benchmark's {what} did not start") from None
            time.sleep(0.05)


@contextlib.contextmanager
def _process(args: list[str], port: int, what: str) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, __file__, *args])
    try:
        _wait_port(port, proc, what)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (Linux's /proc), None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load_costed(pid: int, client: str, url: str, token: str, connections: int, seconds: float) -> dict[str, Any]:
    """``load`` plus ``cpu_ms_per_call``: the CPU the server process ``pid`` spent per answered
    call meanwhile (None without /proc) — a figure other processes' load barely moves."""
    before = _cpu_seconds(pid)
    result = load(client, url, token, connections, seconds, BODY)
    after = _cpu_seconds(pid)
    spent = None if before is None or after is None else after - before
    return {**result, "cpu_ms_per_call": None if spent is None else 1000 * spent / max(result["requests"], 1)}


@contextlib.contextmanager
def _peer(peer: Peer, python: str, port: int, engine_url: str) -> Iterator[tuple[str, str, int, dict[str, Any]]]:
    """A peer gateway on ``port``: yields its call URL, its token, its process id and a dict
    that holds ``recorded`` (the calls it stored, counted its way) once the block is left."""
    script = Path(__file__).resolve().parent / "peer" / peer.script
    proc = subprocess.Popen(
        [python, str(script), str(port), engine_url, MODEL],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    after: dict[str, Any] = {}
    try:
        assert proc.stdout is not None
        line = "-"
        while line and not line.startswith('{"url"'):  # its URL once it serves (LiteLLM prints banners)
            line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{peer.name} did not start ({python} {script}; its venv: benchmarks/peer/setup.sh)")
        hello = json.loads(line)
        yield hello["url"], hello["token"], proc.pid, after
    finally:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=60)
            after.update(*(json.loads(x) for x in out.splitlines() if x.startswith('{"recorded"')))
        except (subprocess.TimeoutExpired, ValueError):
            proc.kill()


def _measure_peer(
    peer: Peer, python: str, engine_url: str, client: str, seconds: float, direct_1: dict[str, Any]
) -> dict[str, Any]:
    """The same cells as the gateway's through ``peer``, keyed ``<peer.key>_…``."""
    with _peer(peer, python, _free_port(), engine_url) as (url, token, pid, after):
        for _ in range(3):  # a first call can take seconds (LiteLLM sets up its router)
            httpx.post(
                url,
                content=BODY,
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                timeout=120,
            ).raise_for_status()
        warm = load(client, url, token, 4, min(1.0, seconds), BODY)
        p1 = _load_costed(pid, client, url, token, 1, seconds)
        p16 = _load_costed(pid, client, url, token, 16, seconds)
    k = peer.key
    return {
        f"{k}_p50_ms": p1["p50_ms"],
        f"{k}_p99_ms": p1["p99_ms"],
        f"{k}_added_p50_ms": p1["p50_ms"] - direct_1["p50_ms"],
        f"{k}_added_p99_ms": p1["p99_ms"] - direct_1["p99_ms"],
        f"{k}_rps_1": p1["rps"],
        f"{k}_rps_16": p16["rps"],
        f"{k}_p99_ms_16": p16["p99_ms"],
        f"{k}_cpu_ms_per_call_1": p1["cpu_ms_per_call"],
        f"{k}_cpu_ms_per_call_16": p16["cpu_ms_per_call"],
        f"{k}_non_2xx": warm["non_2xx"] + p1["non_2xx"] + p16["non_2xx"],
        f"{k}_calls_answered": 3 + warm["requests"] + p1["requests"] + p16["requests"],  # warm-ups included
        f"{k}_recorded": after.get("recorded"),
        f"{k}_recorded_what": after.get("what"),
    }


# ----------------------------------------------------------------------------- main
def _ms(value: float | None) -> str:
    return "n/a (no /proc)" if value is None else f"{value:.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each measurement")
    parser.add_argument("--smoke", action="store_true", help="1 s per measurement (CI)")
    parser.add_argument("--json", action="store_true", help="print one JSON line with the results")
    parser.add_argument("--client", choices=["auto", "wrk", "python"], default="auto")
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite", help="the server's store")
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="also 16 connections at this many calls/s in all (needs hey: apt-get install hey)",
    )
    for peer in PEERS:  # --peer, --peer1
        parser.add_argument(
            f"--{peer.key}",
            nargs="?",
            const=str(ROOT / peer.venv / "bin" / "python"),
            default=None,
            metavar="PYTHON",
            help=f"also measure {peer.name}, run by this Python{peer.needs} "
            f"(default: {peer.venv}'s, made by benchmarks/peer/setup.sh)",
        )
    parser.add_argument("--serve-engine", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve-gateway", nargs=3, metavar=("PORT", "ENGINE_URL", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_engine:
        serve_engine(args.serve_engine)
        return
    if args.serve_gateway:
        port, engine_url, db = args.serve_gateway
        serve_gateway(int(port), engine_url, db)
        return

    seconds = 1.0 if args.smoke else args.seconds
    client = args.client
    if client == "auto":
        client = "wrk" if shutil.which("wrk") else "python"
    if args.rate and not shutil.which("hey"):
        sys.exit("--rate needs hey: apt-get install hey")
    if client == "wrk" and not shutil.which("wrk"):
        sys.exit("wrk is not installed: apt-get install wrk (or pass --client python)")

    for peer, python in ((peer, vars(args)[peer.key]) for peer in PEERS):
        if python and not Path(python).exists():
            sys.exit(f"{python} is missing: benchmarks/peer/setup.sh makes {peer.venv} for {peer.name}")

    engine_port, gateway_port = _free_port(), _free_port()
    engine_url = f"http://127.0.0.1:{engine_port}/v1"
    gateway_url = f"http://127.0.0.1:{gateway_port}"
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "bench.db") if args.store == "sqlite" else "memory"
        with (
            _process(["--serve-engine", str(engine_port)], engine_port, "fake engine"),
            _process(["--serve-gateway", str(gateway_port), engine_url, db], gateway_port, "gateway server") as server,
        ):
            admin = httpx.Client(base_url=gateway_url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60)
            admin.post("/v1/rollouts", json={"rollouts": [{"rollout_id": "bench"}]}).raise_for_status()
            claim = admin.post("/v1/claims", json={"worker_id": "bench", "limit": 1}).json()[0]
            token, aid = claim["token"], claim["attempt"]["attempt_id"]
            proxied = f"{gateway_url}/rollout/bench/attempt/{aid}/v1/chat/completions"
            direct = f"{engine_url}/chat/completions"
            load(client, proxied, token, 4, min(1.0, seconds), BODY)  # warm-up (connections, caches)
            before = admin.get("/v1/stats").json()["total_spans"]

            d1 = load(client, direct, token, 1, seconds, BODY)
            g1 = _load_costed(server.pid, client, proxied, token, 1, seconds)
            d16 = load(client, direct, token, 16, seconds, BODY)
            g16 = _load_costed(server.pid, client, proxied, token, 16, seconds)
            at_rate = run_hey(proxied, token, args.rate, seconds, BODY) if args.rate else None
            peers: dict[str, Any] = {}
            for peer, python in ((peer, vars(args)[peer.key]) for peer in PEERS):
                if python:
                    peers.update(_measure_peer(peer, python, engine_url, client, seconds, d1))

            deadline = time.monotonic() + 30  # spans are written in the background
            answered = g1["requests"] + g16["requests"]
            while True:
                spans = admin.get("/v1/stats").json()["total_spans"] - before
                if spans >= answered or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            admin.close()

    result = {
        "client": client,
        "store": args.store,
        "seconds": seconds,
        "direct_p50_ms": d1["p50_ms"],
        "direct_p99_ms": d1["p99_ms"],
        "gateway_p50_ms": g1["p50_ms"],
        "gateway_p99_ms": g1["p99_ms"],
        "added_p50_ms": g1["p50_ms"] - d1["p50_ms"],
        "added_p99_ms": g1["p99_ms"] - d1["p99_ms"],
        "direct_rps_16": d16["rps"],
        "gateway_rps_16": g16["rps"],
        "gateway_rps_1": g1["rps"],
        "gateway_p50_ms_16": g16["p50_ms"],
        "gateway_p99_ms_16": g16["p99_ms"],
        "gateway_cpu_ms_per_call_1": g1["cpu_ms_per_call"],
        "gateway_cpu_ms_per_call_16": g16["cpu_ms_per_call"],
        "calls_answered": answered,
        "spans_recorded": spans,
        "non_2xx": g1["non_2xx"] + g16["non_2xx"],
        "socket_errors": [g1["socket_errors"], g16["socket_errors"]],
        "every_call_recorded": spans >= answered and g1["non_2xx"] + g16["non_2xx"] == 0,
        "target_p99_ms_16": TARGET_P99_16_MS,
        "p99_16_ok": g16["p99_ms"] <= TARGET_P99_16_MS,
        **(
            {
                "rate_offered": args.rate,
                "rate_rps_16": at_rate["rps"],
                "rate_p50_ms_16": at_rate["p50_ms"],
                "rate_p99_ms_16": at_rate["p99_ms"],
            }
            if at_rate
            else {}
        ),
        **peers,
    }
    if args.json:
        print(json.dumps(result))
        return

    def ok(good: bool) -> str:
        return "ok" if good else "MISSED"

    print(
        f"gateway overhead over a zero-latency engine ({client}, {args.store} store, {seconds:g} s per cell, "
        f"{os.cpu_count()} cores)"
    )
    print(
        f"  1 connection : direct p50 {d1['p50_ms']:.3f} ms p99 {d1['p99_ms']:.3f} ms | "
        f"gateway p50 {g1['p50_ms']:.3f} ms p99 {g1['p99_ms']:.3f} ms, {g1['rps']:.0f} req/s"
    )
    print(
        f"  added        : p50 {result['added_p50_ms']:.3f} ms (target <= {TARGET_ADDED_P50_MS} ms: "
        f"{ok(result['added_p50_ms'] <= TARGET_ADDED_P50_MS)}), p99 {result['added_p99_ms']:.3f} ms"
    )
    print(
        f"  16 connections: direct {d16['rps']:.0f} req/s | gateway {g16['rps']:.0f} req/s "
        f"(target >= {TARGET_RPS:.0f}: {ok(g16['rps'] >= TARGET_RPS)}), p50 {g16['p50_ms']:.2f} ms"
    )
    print(
        f"  tail         : p99 {g16['p99_ms']:.2f} ms at 16 connections through the gateway "
        f"(target <= {TARGET_P99_16_MS:g} ms: {ok(result['p99_16_ok'])})"
    )
    print(
        f"  recorded     : {spans} spans for {answered} answered calls, {result['non_2xx']} non-2xx "
        f"({ok(result['every_call_recorded'])})"
    )
    print(
        f"  server CPU   : {_ms(g1['cpu_ms_per_call'])} per call at 1 connection, "
        f"{_ms(g16['cpu_ms_per_call'])} at 16 (the gateway server process)"
    )
    if at_rate:
        print(
            f"  at a rate    : {args.rate:g} calls/s offered on 16 connections: {at_rate['rps']:.0f} served, "
            f"p50 {at_rate['p50_ms']:.2f} ms, p99 {at_rate['p99_ms']:.2f} ms"
        )
    for peer in PEERS:
        if f"{peer.key}_p50_ms" in peers:
            r = {name.removeprefix(f"{peer.key}_"): value for name, value in peers.items()}
            print(
                f"  {peer.name}: p50 {r['p50_ms']:.3f} ms (added {r['added_p50_ms']:.3f}), p99 {r['p99_ms']:.3f} ms "
                f"(added {r['added_p99_ms']:.3f}) at 1 connection, {r['rps_1']:.0f} req/s; {r['rps_16']:.0f} req/s, "
                f"p99 {r['p99_ms_16']:.2f} ms at 16; {r['recorded']} {r['recorded_what']} for "
                f"{r['calls_answered']} answered calls, {r['non_2xx']} non-2xx; server CPU "
                f"{_ms(r['cpu_ms_per_call_1'])} / {_ms(r['cpu_ms_per_call_16'])} per call at 1 / 16 connections"
            )


if __name__ == "__main__":
    main()
