"""Prompt processing (prefill) on the long prompts real harnesses send, cold and as a
cached follow-up turn, beside llama.cpp's prompt processing on the same F32 weights, same
thread count — all measured in one run.

    python benchmarks/prefill.py --threads 2           # SmolLM2-135M, fp32
    python benchmarks/prefill.py --smoke --json        # tiny random model, seconds

What is measured
* Prompt lengths: 2,048 tokens; 7,680 ("8k", leaving room for a follow-up turn in
  SmolLM2-135M's 8,192-token window); and the context limit (8,191: one token left to
  sample). ``--lengths`` sets others.
* **cold**: a prompt no cache holds (fresh random token ids in every run), sent to the
  engine as a ``/v1/completions`` body with ``max_tokens: 1``, so the time is the prefill
  plus sampling one token from its last logits. llama.cpp decodes the same ids with an
  empty KV cache (``n_batch`` = its context, ``n_ubatch`` 512) and reads the last
  logits. tokens/s = prompt tokens / seconds.
* **follow-up**: after a cold call on prompt P, the next turn is P + the sampled token +
  ``--new`` (256) fresh tokens — a tool's output appended to the conversation, as the
  gateway builds it token-exact. agentbolt's prefix cache holds P + answer from the first
  call; llama.cpp keeps P's KV in its context and decodes only the rest (what its
  server's prompt cache does). Reported: seconds, the tokens each engine ran through the
  model (agentbolt: ``engine.stats.prompt_tokens_computed``; llama.cpp: by construction),
  and ``x_cold_of_new``: the follow-up's time over a cold prefill of the new tokens alone
  (1.0 = the turn costs only its new tokens; above 1 is their attention over the long
  cached context).
* Each candidate runs ``--repeats`` times, interleaved; each row is the best run (a shared
  machine's load moves between runs). The ``ratio`` rows are agentbolt's tokens/s over
  llama.cpp's (cold) and llama.cpp's seconds over agentbolt's (follow-up): above 1,
  agentbolt is faster.
* llama.cpp needs ``pip install 'agentbolt[bench]'`` (llama-cpp-python 0.3.36, compiles
  C++); without it the llama.cpp rows say why they are skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from engine_throughput import LlamaCpp, _llama_cpp_or_reason

from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.models.smollm2 import smollm2
from agentbolt.models.tiny import tiny_model


class Prompts:
    """Fresh random prompts: no cache of either engine holds them."""

    def __init__(self, vocab: int, seed: int = 0) -> None:
        self.vocab = vocab
        self.rng = random.Random(seed)

    def __call__(self, n: int) -> list[int]:
        return [self.rng.randrange(10, self.vocab) for _ in range(n)]


async def agentbolt_cold(engine: TransformersEngine, ids: list[int]) -> tuple[float, list[int]]:
    start = time.perf_counter()
    answer = await engine.completions({"prompt": ids, "max_tokens": 1, "temperature": 1.0, "seed": 0})
    return time.perf_counter() - start, list(answer["choices"][0]["token_ids"])


async def agentbolt_rows(engine: TransformersEngine, prompts: Prompts, length: int, new: int) -> dict[str, Any]:
    cold, answer = await agentbolt_cold(engine, prompts(length))
    row: dict[str, Any] = {"engine": "agentbolt", "length": length, "cold_s": round(cold, 3),
                           "cold_tokens_per_s": round(length / cold, 1)}
    if new:
        first = prompts(length)  # a conversation of its own, so the cache holds exactly its turn
        await agentbolt_cold(engine, first)
        computed = engine.stats.prompt_tokens_computed
        follow = first + answer[:1] + prompts(new)
        seconds, _ = await agentbolt_cold(engine, follow)
        prefilled = engine.stats.prompt_tokens_computed - computed
        alone, _ = await agentbolt_cold(engine, prompts(new))
        row |= {"follow_up_tokens": len(follow), "follow_up_s": round(seconds, 3), "follow_up_prefilled": prefilled,
                "x_cold_of_new": round(seconds / alone, 2)}
    return row


def llama_rows(llama: LlamaCpp, prompts: Prompts, length: int, new: int) -> dict[str, Any]:
    cold = llama.prefill(prompts(length))
    row: dict[str, Any] = {"engine": "llama.cpp", "length": length, "cold_s": round(cold, 3),
                           "cold_tokens_per_s": round(length / cold, 1)}
    if new:
        first = prompts(length)
        llama.prefill(first)
        follow = first + prompts(1 + new)
        seconds = llama.prefill(follow, keep=len(first))
        alone = llama.prefill(prompts(new))
        row |= {"follow_up_tokens": len(follow), "follow_up_s": round(seconds, 3),
                "follow_up_prefilled": len(follow) - len(first), "x_cold_of_new": round(seconds / alone, 2)}
    return row


def best_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    row = dict(min(runs, key=lambda r: r["cold_s"]))
    if "follow_up_s" in row:
        row["follow_up_s"] = min(r["follow_up_s"] for r in runs)
        row["x_cold_of_new"] = min(r["x_cold_of_new"] for r in runs)
    row["cold_s_of_each_run"] = [r["cold_s"] for r in runs]
    return row


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny random model, short prompts, no llama.cpp (seconds)")
    ap.add_argument("--threads", type=int, default=2, help="torch / llama.cpp threads (default 2)")
    ap.add_argument("--lengths", default=None,
                    help="comma-separated prompt lengths; 'limit' is the context limit (default 2048,7680,limit)")
    ap.add_argument("--new", type=int, default=None, help="new tokens of the follow-up turn (default 256, smoke 16)")
    ap.add_argument("--repeats", type=int, default=2, help="interleaved runs per candidate; the best counts")
    ap.add_argument("--peers", default="llama.cpp", help="llama.cpp or none")
    ap.add_argument("--json", action="store_true", help="print one JSON line per measurement")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    def emit(row: dict[str, Any]) -> None:
        print(json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)

    if args.smoke:
        model, tokenizer = tiny_model(vocab="bytes")
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = smollm2()
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
    limit = int(model.config.max_position_embeddings)
    new = args.new if args.new is not None else (16 if args.smoke else 256)
    spec = args.lengths or ("32,64,limit" if args.smoke else "2048,7680,limit")
    lengths = [limit - 1 if x == "limit" else int(x) for x in spec.split(",")]
    if any(not 0 < n < limit for n in lengths):
        ap.error(f"prompt lengths must be in [1, {limit - 1}] (the context limit leaves one token to sample)")
    engine = TransformersEngine(model, tokenizer, max_batch_size=1, num_threads=args.threads,
                                prefix_cache_tokens=2 * limit + new,
                                model_name="tiny" if args.smoke else "SmolLM2-135M-Instruct")
    if engine.scheduler_kind != "continuous":
        print(f"note: the {engine.scheduler_kind} scheduler has no prefix cache", file=sys.stderr)
    await engine.start()
    prompts = Prompts(int(model.config.vocab_size))
    emit({"model": "tiny" if args.smoke else "SmolLM2-135M-Instruct", "threads": args.threads,
          "context_limit": limit, "lengths": lengths, "follow_up_new_tokens": new,
          "scheduler": engine.scheduler_kind})
    await agentbolt_cold(engine, prompts(8))  # warm-up
    llama: LlamaCpp | str = "not asked for (--peers none)"
    if "llama.cpp" in args.peers.split(","):
        try:
            llama = _llama_cpp_or_reason(args.smoke, args.threads, 1, limit)
            if not isinstance(llama, str):
                llama.prefill(prompts(8))  # warm-up
        except Exception as exc:  # noqa: BLE001 - reported, agentbolt's rows still count
            llama = f"llama.cpp failed to start: {exc!r}"
    if isinstance(llama, str):
        emit({"engine": "llama.cpp", "skipped": llama})
    for length in lengths:
        follow = new if length + 1 + new < limit else 0  # no room for a follow-up turn at the limit
        ours, theirs = [], []
        for _ in range(args.repeats):
            ours.append(await agentbolt_rows(engine, prompts, length, follow))
            if not isinstance(llama, str):
                theirs.append(llama_rows(llama, prompts, length, follow))
        a = best_of(ours)
        emit(a)
        if theirs:
            b = best_of(theirs)
            emit(b)
            ratio = {"ratio": "agentbolt vs llama.cpp", "length": length,
                     "x_cold": round(a["cold_tokens_per_s"] / b["cold_tokens_per_s"], 2)}
            if follow:
                ratio["x_follow_up"] = round(b["follow_up_s"] / a["follow_up_s"], 2)
            emit(ratio)
    await engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
