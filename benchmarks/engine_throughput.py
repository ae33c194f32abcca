"""Generated tokens/s of the local transformers engine, 1 vs 8 concurrent requests.

Dynamic batching should make 8 concurrent requests produce several times the tokens/s
of one request at a time (target: >= 3x on SmolLM2-135M, CPU). Every request generates
exactly ``--tokens`` tokens (``ignore_eos``) from a short chat prompt.

    python benchmarks/engine_throughput.py            # SmolLM2-135M-Instruct (converted once)
    python benchmarks/engine_throughput.py --smoke    # tiny random model, seconds
    python benchmarks/engine_throughput.py --json     # one JSON line per measurement

Measured on the shared 2-core development machine while other test runs kept it busy
(load 3.5–4), 64 tokens per request, 1 thread, 1 → 8 concurrent requests:
16.4 → 66.7 tokens/s (4.1x), 13.5 → 42.5 (3.2x), 6.7 → 29.0 (4.3x). With 2 threads on
the busy machine torch's thread pool stalls (as low as 2.5 → 4.1 tokens/s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentbolt.gateway.transformers_engine import TransformersEngine
from agentbolt.models import smollm2, tiny_model


async def _run(engine: TransformersEngine, concurrency: int, tokens: int, rounds: int) -> dict[str, float]:
    async def one(i: int) -> int:
        body = {"messages": [{"role": "user", "content": f"Write a story about a robot number {i}."}],
                "max_tokens": tokens, "ignore_eos": True, "temperature": 1.0, "seed": i}
        answer = await engine.chat_completions(body)
        return len(answer["choices"][0]["token_ids"])

    passes0 = engine.stats.forward_passes
    start = time.perf_counter()
    generated = 0
    for r in range(rounds):
        counts = await asyncio.gather(*(one(r * concurrency + i) for i in range(concurrency)))
        generated += sum(counts)
    elapsed = time.perf_counter() - start
    return {"concurrency": concurrency, "requests": rounds * concurrency, "tokens": generated,
            "seconds": round(elapsed, 3), "tokens_per_s": round(generated / elapsed, 1),
            "forward_passes": engine.stats.forward_passes - passes0}


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny random model, few tokens (seconds)")
    ap.add_argument("--tokens", type=int, default=None, help="tokens generated per request (default 64, smoke 8)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: on a busy shared CPU, 2 threads stall each other; "
                         "try 2 on an idle machine)")
    ap.add_argument("--json", action="store_true", help="print one JSON line per measurement")
    args = ap.parse_args()
    tokens = args.tokens or (8 if args.smoke else 64)
    if args.smoke:
        model, tokenizer = tiny_model(vocab="bytes")
        engine = TransformersEngine(model, tokenizer, max_batch_size=8, num_threads=args.threads, model_name="tiny")
    else:
        engine = TransformersEngine.from_pretrained(smollm2(), max_batch_size=8, num_threads=args.threads)
    await engine.start()
    await _run(engine, 1, 2, 1)  # warm-up
    rows = []
    for concurrency, rounds in ((1, 2), (8, 1)):
        row = await _run(engine, concurrency, tokens, rounds)
        row["model"] = engine.model_name
        row["threads"] = args.threads
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
    await engine.close()
    speedup = rows[1]["tokens_per_s"] / rows[0]["tokens_per_s"]
    if args.json:
        print(json.dumps({"speedup_8_vs_1": round(speedup, 2)}))
    else:
        for row in rows:
            print(f"{row['model']}: {row['concurrency']} concurrent: {row['tokens_per_s']:.1f} generated tokens/s "
                  f"({row['tokens']} tokens in {row['seconds']:.2f}s, {row['forward_passes']} forward passes)")
        print(f"dynamic batching speed-up at 8 concurrent: {speedup:.2f}x (target >= 3x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
