"""How long an answered gateway call's span is not yet stored: the window in which a
server killed at once (``kill -9``, a power cut) loses the span of a call the agent has
already seen answered.

The gateway builds each span after writing the response and stores spans in batches
from a background task (every ``span_flush_interval``, 50 ms by default): a span lies
only in the server's memory from the moment the response leaves until its batch is
written. This measures that window from outside, as a client sees it: N calls one after
another, each followed by polling the store's API (every millisecond) until its span is
there. The figure is an upper bound (it includes one poll's round trip).

    python benchmarks/gateway_span_window.py --calls 200 [--store sqlite]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
from canned_answer import CHAT_ANSWER, MODEL  # benchmarks/ is on sys.path when run as a script

from agentbolt.engines import VLLMEngine
from agentbolt.gateway import Gateway
from agentbolt.scoped import rollout_base_url
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore
from agentbolt.store.sqlite import SqliteStore

ADMIN = "bench"


class _Engine(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = CHAT_ANSWER if isinstance(CHAT_ANSWER, bytes) else CHAT_ANSWER.encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - /v1/models
        body = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--store", choices=["memory", "sqlite"], default="memory")
    args = parser.parse_args()
    engine = ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    tmp = tempfile.mkdtemp()
    store = MemoryStore() if args.store == "memory" else SqliteStore(Path(tmp) / "store.db")
    gateway = Gateway(VLLMEngine(f"http://127.0.0.1:{engine.server_address[1]}/v1"))
    windows: list[float] = []
    with serve_in_thread(store, admin_token=ADMIN, gateway=gateway) as url:
        admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
        admin.post("/v1/rollouts", json={"rollouts": [{"input": "q"}]}).raise_for_status()
        claim = admin.post("/v1/claims", json={"worker_id": "w", "limit": 1}).json()[0]
        rid, aid = claim["rollout"]["rollout_id"], claim["attempt"]["attempt_id"]
        agent = httpx.Client(base_url=rollout_base_url(url, rid, aid),
                             headers={"Authorization": f"Bearer {claim['token']}"}, timeout=30)
        body = {"model": MODEL, "messages": [{"role": "user", "content": "what is six times seven?"}]}
        for i in range(args.calls):
            agent.post("/chat/completions", json=body).raise_for_status()
            answered = time.perf_counter()
            while True:
                page = admin.get(f"/v1/rollouts/{rid}/spans", params={"attempt_id": aid, "limit": 1000}).json()
                if len(page["items"]) > i:  # the gateway's spans are the only ones here
                    break
                time.sleep(0.001)
            windows.append((time.perf_counter() - answered) * 1000)
    windows.sort()
    q = statistics.quantiles(windows, n=100)
    print(f"store {args.store}, {args.calls} calls one after another: span stored after the answer in "
          f"median {statistics.median(windows):.1f} ms, p90 {q[89]:.1f} ms, p99 {q[98]:.1f} ms, "
          f"max {windows[-1]:.1f} ms", file=sys.stdout)


if __name__ == "__main__":
    main()
