"""Generated tokens/s of the local engine for 1 and 16 concurrent sequences, as a fraction
of this machine's fp32 matmul peak, beside llama.cpp (and transformers' own ``generate``)
on the same weights, same prompts, same thread count — all measured in one run.

    python benchmarks/engine_throughput.py --threads 2           # SmolLM2-135M, fp32
    python benchmarks/engine_throughput.py --smoke --json        # tiny random model, seconds

What is measured
* Every sequence generates exactly ``--tokens`` (64) new tokens at temperature 1 (EOS
  ignored) from a short chat prompt ("Write a story about a robot number i.", rendered
  with the chat template; llama.cpp gets the same prompt token ids). tokens/s = all new
  tokens / wall time from the first request to the last answer (prefill included).
* ``fp32_peak_gflops``: torch loops of 1024x1024 fp32 matmuls on the same threads (best
  of several timings), through MKL (``torch.mm``) and through oneDNN (packed weight): the
  better of the two is the peak — what this CPU's matrix units give torch here.
* ``fraction_of_fp32_peak`` = tokens/s x FLOPs per token / peak. FLOPs per token = 2 x the
  parameters of every matrix the token goes through: all weights, the (tied) embedding
  counted once as the output head (the embedding lookup is free; the norms are counted,
  they are 0.03 %). Attention over the cached context (~4 x layers x hidden x context
  FLOPs, under 3 % at these lengths) is not counted, for any engine.
* ``roofline_tokens_per_s``: each decode step reads every weight once for all its rows,
  so n rows can go no faster than min(peak / FLOPs per token, n x read bandwidth / weight
  bytes); ``read_bandwidth_gbs`` is measured by summing a 512 MB tensor.
  ``fraction_of_roofline`` says how close a row comes to that bound.
* llama.cpp (``pip install 'agentbolt[bench]'``, llama-cpp-python 0.3.36): the F32 GGUF of
  the same dequantized weights (``benchmarks/f32_gguf.py``); 16 sequences decode together
  through its batch API (one ``llama_decode`` per step, one logits row per sequence),
  sampled at temperature 1 by the engine's own sampling code (same cost for both).
  Skipped, with the reason printed, when not installed.
* ``hf-generate``: ``model.generate`` on a left-padded batch (sampling, temperature 1) —
  what transformers gives without agentbolt's scheduler; ``--scheduler both`` adds the
  engine's old per-batch scheduler (the generic transformers forward pass).
* The candidates run interleaved at each concurrency, ``--repeats`` times (the slow
  references once); each row is the best run (all runs are listed): on a shared machine
  the load moves between runs, interleaving keeps the comparison fair.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.models.smollm2 import smollm2
from agentbolt.models.tiny import tiny_model


def _prompt(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Write a story about a robot number {i}."}]


def fp32_peak_gflops(threads: int, seconds: float = 2.0) -> dict[str, float]:
    """Best GFLOP/s of 1024^3 fp32 matmul loops on ``threads`` torch threads, through both
    GEMM libraries torch carries: ``torch.mm`` (MKL) and oneDNN on a pre-packed weight
    (what the engine uses for batched rows). The peak is the better of the two."""
    torch.set_num_threads(threads)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    out = torch.empty(1024, 1024)
    kernels = {"mkl": lambda: torch.mm(a, b, out=out)}
    if torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        packed = torch.ops.mkldnn._reorder_linear_weight(b, 1024)
        kernels["onednn"] = lambda: torch.ops.mkldnn._linear_pointwise(a, packed, None, "none", [], "")
    result: dict[str, float] = {}
    for name, kernel in kernels.items():
        for _ in range(3):
            kernel()
        best, end = 0.0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            t = time.perf_counter()
            for _ in range(5):
                kernel()
            best = max(best, 5 * 2 * 1024**3 / (time.perf_counter() - t) / 1e9)
        result[name] = round(best, 1)
    return result


def read_bandwidth_gbs(threads: int, megabytes: int = 512) -> float:
    """Best GB/s of summing a ``megabytes`` fp32 tensor (reads it once; larger than any cache).

    Decoding streams every weight once per step for all rows, so at ``n`` rows an fp32
    model does ``n / 2`` FLOPs per byte read: below ``peak / bandwidth x 2`` rows the
    bandwidth, not the matrix units, bounds the speed (``roofline_tokens_per_s``)."""
    torch.set_num_threads(threads)
    x = torch.ones(megabytes * 2**20 // 4)
    x.sum()
    best = 0.0
    for _ in range(5):
        t = time.perf_counter()
        x.sum()
        best = max(best, x.numel() * 4 / (time.perf_counter() - t) / 1e9)
    return best


def flops_per_token(model: torch.nn.Module) -> int:
    """2 x parameters (tied embedding counted once, as the output head)."""
    return 2 * sum(p.numel() for p in model.parameters())


async def run_engine(engine: TransformersEngine, concurrency: int, tokens: int, rounds: int) -> dict[str, Any]:
    async def one(i: int) -> int:
        body = {"messages": _prompt(i), "max_tokens": tokens, "ignore_eos": True, "temperature": 1.0, "seed": i}
        answer = await engine.chat_completions(body)
        return len(answer["choices"][0]["token_ids"])

    passes0 = engine.stats.forward_passes
    start = time.perf_counter()
    generated = 0
    for r in range(rounds):
        generated += sum(await asyncio.gather(*(one(r * concurrency + i) for i in range(concurrency))))
    elapsed = time.perf_counter() - start
    return {"engine": "agentbolt", "concurrency": concurrency, "requests": rounds * concurrency,
            "tokens": generated, "seconds": round(elapsed, 3), "tokens_per_s": round(generated / elapsed, 1),
            "forward_passes": engine.stats.forward_passes - passes0}


def run_hf_generate(model: Any, prompts: list[list[int]], pad_id: int, tokens: int, threads: int) -> dict[str, Any]:
    torch.set_num_threads(threads)
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                             max_new_tokens=tokens, min_new_tokens=tokens, pad_token_id=pad_id)
    elapsed = time.perf_counter() - start
    generated = int(out.shape[0] * (out.shape[1] - width))
    return {"engine": "hf-generate", "concurrency": len(prompts), "tokens": generated, "seconds": round(elapsed, 3),
            "tokens_per_s": round(generated / elapsed, 1)}


class LlamaCpp:
    """llama.cpp through llama-cpp-python's low-level batch API: n sequences, one decode per step."""

    def __init__(self, gguf: Path, threads: int, max_seqs: int, n_ctx: int) -> None:
        import llama_cpp as lc

        self.lc = lc
        self._quiet = lc.llama_log_callback(lambda level, text, data: None)  # kept: C holds the pointer
        lc.llama_log_set(self._quiet, None)
        lc.llama_backend_init()
        self.model = lc.llama_model_load_from_file(str(gguf).encode(), lc.llama_model_default_params())
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {gguf}")
        params = lc.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = n_ctx, n_ctx, min(n_ctx, 512)
        params.n_seq_max, params.n_threads, params.n_threads_batch = max_seqs, threads, threads
        self.ctx = lc.llama_init_from_model(self.model, params)
        self.n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(self.model))
        self.batch = lc.llama_batch_init(n_ctx, 0, max_seqs)

    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> None:
        b = self.batch
        for i, (token, pos, seq, logits) in enumerate(entries):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = token, pos, 1, logits
            b.seq_id[i][0] = seq
        b.n_tokens = len(entries)
        if self.lc.llama_decode(self.ctx, b) != 0:
            raise RuntimeError("llama_decode failed")

    def _logits(self, i: int) -> Any:
        import numpy as np

        return np.ctypeslib.as_array(self.lc.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,))

    def prefill(self, ids: list[int], *, keep: int = 0) -> float:
        """Prompt processing alone: decode ``ids`` on sequence 0 (logits for the last token
        only), keeping the first ``keep`` tokens' KV from the previous call — what its
        server's prompt cache reuses for a follow-up turn (``keep=0``: cold). Seconds."""
        memory = self.lc.llama_get_memory(self.ctx)
        if keep:
            self.lc.llama_memory_seq_rm(memory, 0, keep, -1)
        else:
            self.lc.llama_memory_clear(memory, True)
        start = time.perf_counter()
        chunk, last = self.lc.llama_n_batch(self.ctx), 0
        for lo in range(keep, len(ids), chunk):
            part = ids[lo:lo + chunk]
            self._decode([(t, lo + i, 0, lo + i == len(ids) - 1) for i, t in enumerate(part)])
            last = len(part) - 1
        self._logits(last)  # the last token's logits: what a sampler would read next
        return time.perf_counter() - start

    def generate(self, prompts: list[list[int]], tokens: int, seed: int = 0) -> dict[str, Any]:
        import numpy as np

        from agentbolt.engines.local.sampling import SamplingParams, choose_tokens, new_generator

        params = [SamplingParams(max_tokens=tokens) for _ in prompts]  # temperature 1, like the engine
        gens = [new_generator(seed * 1000 + s, torch.device("cpu")) for s in range(len(prompts))]
        self.lc.llama_memory_clear(self.lc.llama_get_memory(self.ctx), True)
        start = time.perf_counter()
        entries = [(t, pos, s, pos == len(p) - 1) for s, p in enumerate(prompts) for pos, t in enumerate(p)]
        self._decode(entries)
        out_rows = [i for i, e in enumerate(entries) if e[3]]
        lengths = [len(p) for p in prompts]
        generated = 0
        for step in range(tokens):
            # the engine's own sampling code, so both engines pay the same for it
            logits = torch.from_numpy(np.stack([self._logits(row) for row in out_rows]))
            picks = choose_tokens(logits, params, gens)[0].tolist()
            generated += len(picks)
            if step == tokens - 1:
                break
            self._decode([(t, lengths[s], s, True) for s, t in enumerate(picks)])
            lengths = [n + 1 for n in lengths]
            out_rows = list(range(len(prompts)))
        elapsed = time.perf_counter() - start
        return {"engine": "llama.cpp", "concurrency": len(prompts), "tokens": generated, "seconds": round(elapsed, 3),
                "tokens_per_s": round(generated / elapsed, 1)}


def _llama_cpp_or_reason(smoke: bool, threads: int, max_seqs: int, n_ctx: int) -> LlamaCpp | str:
    if smoke:
        return "smoke mode: the tiny random model has no GGUF"
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return ("llama-cpp-python is not installed: pip install 'agentbolt[bench]' "
                "(llama-cpp-python==0.3.36, compiles C++)")
    from f32_gguf import smollm2_f32_gguf

    return LlamaCpp(smollm2_f32_gguf(), threads, max_seqs, n_ctx)


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny random model, few tokens (seconds)")
    ap.add_argument("--tokens", type=int, default=None, help="new tokens per sequence (default 64, smoke 8)")
    ap.add_argument("--threads", type=int, default=2, help="torch / llama.cpp threads (default 2)")
    ap.add_argument("--concurrency", default="1,16", help="comma-separated sequence counts (default 1,16)")
    ap.add_argument("--peers", default="llama.cpp,hf-generate",
                    help="comma-separated peers to run beside agentbolt: llama.cpp, hf-generate, or none")
    ap.add_argument("--scheduler", default="auto", choices=["auto", "per-batch", "both"],
                    help="agentbolt's scheduler: auto (continuous for Llama-shaped models), the old per-batch one, "
                         "or both")
    ap.add_argument("--repeats", type=int, default=2,
                    help="interleaved runs per candidate and concurrency; the best counts (default 2)")
    ap.add_argument("--json", action="store_true", help="print one JSON line per measurement")
    args = ap.parse_args()
    tokens = args.tokens or (8 if args.smoke else 64)
    counts = [int(c) for c in args.concurrency.split(",")]
    peers = [p for p in args.peers.split(",") if p and p != "none"]
    torch.set_num_threads(args.threads)
    rows: list[dict[str, Any]] = []

    def emit(row: dict[str, Any]) -> None:
        rows.append(row)
        print(json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)

    peaks = fp32_peak_gflops(args.threads)
    peak = max(peaks.values())
    bandwidth = read_bandwidth_gbs(args.threads)
    if args.smoke:
        model, tokenizer = tiny_model(vocab="bytes")
        path = None
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = smollm2()
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
    flops = flops_per_token(model)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    roofline = {c: round(min(peak * 1e9 / flops, c * bandwidth * 1e9 / weight_bytes), 1) for c in counts}
    emit({"fp32_peak_gflops": round(peak, 1), "peak_by_library": peaks, "flops_per_token": flops,
          "read_bandwidth_gbs": round(bandwidth, 1), "weight_bytes": weight_bytes,
          "roofline_tokens_per_s": roofline, "threads": args.threads,
          "model": "tiny" if args.smoke else "SmolLM2-135M-Instruct", "tokens_per_sequence": tokens})
    prompts = [list(tokenizer.apply_chat_template(_prompt(i), add_generation_prompt=True, tokenize=True,
                                                  return_dict=True)["input_ids"]) for i in range(max(counts))]

    def fraction(row: dict[str, Any]) -> dict[str, Any]:
        row["fraction_of_fp32_peak"] = round(row["tokens_per_s"] * flops / (peak * 1e9), 3)
        row["fraction_of_roofline"] = round(row["tokens_per_s"] / roofline[row["concurrency"]], 3)
        return row

    # Every candidate runs at each concurrency, interleaved, --repeats times; each row is the
    # best of its runs (a shared machine's load moves between runs; interleaving keeps it fair).
    schedulers = ["auto", "per-batch"] if args.scheduler == "both" else [args.scheduler]
    runners: dict[str, Callable[[int], Awaitable[dict[str, Any]]]] = {}
    engines: list[TransformersEngine] = []
    for scheduler in schedulers:
        # requests arriving within the window start together (the window only applies to an idle engine)
        engine = TransformersEngine(model, tokenizer, max_batch_size=max(counts), num_threads=args.threads,
                                    batch_window_ms=50 if args.smoke else 10,
                                    model_name="tiny" if args.smoke else "SmolLM2-135M-Instruct", scheduler=scheduler)
        await engine.start()
        await run_engine(engine, 1, 2, 1)  # warm-up
        engines.append(engine)
        runners[f"agentbolt/{engine.scheduler_kind}"] = partial(_engine_row, engine, tokens)
    if "llama.cpp" in peers:
        try:
            n_ctx = max(counts) * (max(len(p) for p in prompts) + tokens) + 64
            llama: LlamaCpp | str = _llama_cpp_or_reason(args.smoke, args.threads, max(counts), n_ctx)
            if not isinstance(llama, str):
                llama.generate(prompts[:1], 2)  # warm-up
        except Exception as exc:  # noqa: BLE001 - reported, the rest of the run goes on
            llama = f"llama.cpp failed to start: {exc!r}"
        if isinstance(llama, str):
            emit({"engine": "llama.cpp", "skipped": llama})
        else:
            runners["llama.cpp"] = partial(_llama_row, llama, prompts, tokens)
    if "hf-generate" in peers:
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        run_hf_generate(model, prompts[:1], pad, 2, args.threads)  # warm-up
        runners["hf-generate"] = partial(_hf_row, model, prompts, pad, tokens, args.threads)
    best: dict[str, dict[int, float]] = {}
    for c in counts:
        runs: dict[str, list[dict[str, Any]]] = {}
        for repeat in range(args.repeats):
            for name, runner in runners.items():
                if repeat and name in ("agentbolt/per-batch", "hf-generate"):
                    continue  # the slow references run once
                try:
                    runs.setdefault(name, []).append(await runner(c))
                except Exception as exc:  # noqa: BLE001 - the other figures of the run still count
                    emit({"engine": name, "concurrency": c, "failed": repr(exc)})
        for name, rows_of in runs.items():
            row = fraction(max(rows_of, key=lambda r: r["tokens_per_s"]))
            row["tokens_per_s_of_each_run"] = [r["tokens_per_s"] for r in rows_of]
            emit(row)
            best.setdefault(name, {})[c] = row["tokens_per_s"]
    for engine in engines:
        await engine.close()
    ours = best.get(f"agentbolt/{engines[0].scheduler_kind}", {})
    for peer, figures in best.items():
        if peer != f"agentbolt/{engines[0].scheduler_kind}":
            emit({"ratio": f"agentbolt/{engines[0].scheduler_kind} vs {peer}",
                  **{f"x_at_{c}": round(ours[c] / figures[c], 2) for c in counts if c in figures and c in ours}})
    return 0


async def _engine_row(engine: TransformersEngine, tokens: int, c: int) -> dict[str, Any]:
    row = await run_engine(engine, c, tokens, 2 if c == 1 else 1)
    row["engine"] = f"agentbolt/{engine.scheduler_kind}"
    return row


async def _llama_row(llama: LlamaCpp, prompts: list[list[int]], tokens: int, c: int) -> dict[str, Any]:
    return llama.generate(prompts[:c], tokens) if c > 1 else _two_rounds(llama, prompts[0], tokens)


async def _hf_row(model: Any, prompts: list[list[int]], pad: int, tokens: int, threads: int, c: int) -> dict[str, Any]:
    return run_hf_generate(model, prompts[:c], pad, tokens, threads)


def _two_rounds(llama: LlamaCpp, prompt: list[int], tokens: int) -> dict[str, Any]:
    a, b = llama.generate([prompt], tokens, seed=1), llama.generate([prompt], tokens, seed=2)
    seconds = a["seconds"] + b["seconds"]
    return {**a, "tokens": a["tokens"] + b["tokens"], "seconds": round(seconds, 3),
            "tokens_per_s": round((a["tokens"] + b["tokens"]) / seconds, 1)}


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
