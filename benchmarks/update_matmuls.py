"""How near the GEMM peak the GRPO policy update's matrix products run (CPU, float32).

Runs the trainer's own update (``PolicyUpdate.step``: micro-batches of ``--micro-tokens``
padded tokens as the trainer packs them, each task's prompt once per micro-batch, the
output layer at the trained positions only, backward, AdamW) on a calc-shaped batch:
``--groups`` x ``--group-size`` samples, each a ``--prompt-tokens`` prompt shared by its
group + an answer (trained) + a tool result (not trained) + a final answer (trained),
~30 trained of ~230 tokens as in examples/calc; SmolLM2-135M-Instruct with LoRA r=16 on
q/k/v/o (``--smoke``: a tiny random model, seconds). The sampling logprobs are the
policy's own (ratio 1).

1. A warm-up update on one micro-batch, then one plain update, timed (its wall time).
2. One more update under a ``TorchDispatchMode`` that records every matrix product the
   dispatcher runs, forward and backward (``aten::mm``, ``addmm``, ``bmm``, ``baddbmm``:
   ``linear`` and ``matmul`` arrive as these), each with its operand shapes and strides,
   the weight it multiplies (so its class: frozen projection forward or input gradient,
   LoRA A/B, LoRA weight gradient, lm_head...) and its own time inside the update. The
   fused attention kernel (``scaled_dot_product_attention``, not a GEMM) is timed too.
3. Each distinct product alone, on operands of the same shapes and strides: best time per
   call over ``--rounds`` rounds; in every round the "peak" GEMMs run as well (square
   fp32 ``--peak-sizes``), so both see the same load. The peak is the best GFLOP/s of
   those and of the update's own shapes at the same thread count.

Printed per thread count: the FLOP-weighted GFLOP/s of the update's products (total FLOP
/ the sum of their stand-alone times), the same-run peak, their ratio (target >= 0.70),
the products' speed inside the update (total FLOP / their own time in it), the share of
the update's time spent in them (all times CPU time unless ``--clock wall``), and a table
per class of product.

    python benchmarks/update_matmuls.py --threads 1          # SmolLM2, one thread
    python benchmarks/update_matmuls.py --threads 1,2 --json
    python benchmarks/update_matmuls.py --smoke --json       # tiny model, seconds (CI)

Figures: docs/benchmarks.md, "Issue 36: the update's matrix products".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from agentbolt.adapters.samples import Sample
from agentbolt.algorithms.grpo.config import GRPOConfig
from agentbolt.algorithms.grpo.update import PolicyUpdate
from agentbolt.training.batch import collate, micro_batches, trained_tokens
from agentbolt.training.lora import LoraSettings
from agentbolt.training.policy import Policy

aten = torch.ops.aten
GEMMS = {aten.mm.default: "mm", aten.addmm.default: "addmm", aten.bmm.default: "bmm", aten.baddbmm.default: "baddbmm"}
ATTENTION = {aten._scaled_dot_product_flash_attention_for_cpu.default: "sdpa fwd",
             aten._scaled_dot_product_flash_attention_for_cpu_backward.default: "sdpa bwd"}
TARGET = 0.70
CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
clock = time.process_time
"""What every time here is read with (``--clock``): the process's CPU time by default, which
a machine shared with other jobs does not inflate (with several threads it sums them, so
GFLOP/s are then per CPU-second: the peak is measured the same way)."""


# -- the batch ---------------------------------------------------------------------------------

def calc_samples(vocab: int, groups: int, group_size: int, prompt: int, seed: int) -> list[Sample]:
    """Seeded random ids shaped like calc's samples: one prompt per group, then an answer
    (10-20 tokens, trained), a tool result (15-25, not trained), a final answer (10-20,
    trained); advantage = reward - group mean."""
    rng = random.Random(seed)
    low = min(100, vocab // 2)  # clear of the special tokens
    out = []
    for g in range(groups):
        head = [rng.randrange(low, vocab) for _ in range(prompt)]
        rewards = [float(rng.random() < 0.5) for _ in range(group_size)]
        mean = sum(rewards) / group_size
        for k in range(group_size):
            parts = [(rng.randint(10, 20), 1), (rng.randint(15, 25), 0), (rng.randint(10, 20), 1)]
            ids, mask = list(head), [0] * prompt
            for n, trained in parts:
                ids += [rng.randrange(low, vocab) for _ in range(n)]
                mask += [trained] * n
            out.append(Sample(rollout_id=f"r{g}-{k}", attempt_id=f"a{g}-{k}", token_ids=ids, loss_mask=mask,
                              logprobs=[0.0] * len(ids), versions=[None] * len(ids), span_ids=[],
                              advantage=rewards[k] - mean))
    return out


def with_own_logprobs(policy: Policy, samples: list[Sample], micro_tokens: int) -> list[Sample]:
    """``samples`` with the policy's own logprobs at their trained tokens (ratio 1)."""
    out = []
    for mb in micro_batches(samples, micro_tokens):
        b = collate(mb, policy.pad_id)
        lp = policy.inference_logprobs(b.input_ids, b.attention_mask, shared_prefix=b.shared_prefix,
                                       prefix_group=b.prefix_group, positions=b.loss_mask)
        out += [dataclasses.replace(s, logprobs=lp[n, : len(s.token_ids)].tolist()) for n, s in enumerate(mb)]
    return out


# -- recording the products ---------------------------------------------------------------------

@dataclasses.dataclass
class Product:
    """One distinct matrix product of the update: its operands' layouts and where it ran."""

    op: str
    layouts: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]
    """(shape, stride) of each tensor operand, in call order."""
    scalars: tuple[tuple[str, float], ...]
    flop: int
    calls: int = 0
    in_update_s: float = 0.0
    best_s: float = float("inf")
    """Best stand-alone time per call."""


def gemm_flop(op: str, shapes: list[tuple[int, ...]]) -> int:
    """2·M·K·N (per batch entry for bmm); the bias add of addmm not counted."""
    a, b = shapes[-2], shapes[-1]
    if op in ("mm", "addmm"):
        return 2 * a[0] * a[1] * b[1]
    return 2 * a[0] * a[1] * a[2] * b[2]


def weight_role(name: str) -> str:
    """The class of a product that multiplies parameter ``name``."""
    if "lora_" in name:
        return "LoRA A/B"
    for proj, role in (("q_proj", "q/o proj"), ("o_proj", "q/o proj"), ("k_proj", "k/v proj"),
                       ("v_proj", "k/v proj"), ("gate_proj", "MLP proj"), ("up_proj", "MLP proj"),
                       ("down_proj", "MLP proj")):
        if proj in name:
            return role
    if "lm_head" in name or "embed_tokens" in name:
        return "lm_head"
    return "other weight"


class Recorder(TorchDispatchMode):
    """Every GEMM (and the fused attention) dispatched inside, with its class and own time."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.names = {p.untyped_storage().data_ptr(): n for n, p in model.named_parameters()}
        self.products: dict[tuple[Any, ...], Product] = {}
        self.classes: dict[tuple[Any, ...], str] = {}
        self.attention = defaultdict(lambda: [0, 0.0])  # kind -> [calls, seconds]

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func not in GEMMS and func not in ATTENTION:
            return func(*args, **kwargs)
        t0 = clock()
        out = func(*args, **kwargs)
        dt = clock() - t0
        if func in ATTENTION:
            entry = self.attention[ATTENTION[func]]
            entry[0] += 1
            entry[1] += dt
            return out
        op = GEMMS[func]
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        layouts = tuple((tuple(t.shape), tuple(t.stride())) for t in tensors)
        scalars = tuple(sorted((k, float(v)) for k, v in kwargs.items() if isinstance(v, (int, float))))
        key = (op, layouts, scalars, self._role(tensors, op))
        p = self.products.get(key)
        if p is None:
            p = self.products[key] = Product(op, layouts, scalars, gemm_flop(op, [t.shape for t in tensors]))
        p.calls += 1
        p.in_update_s += dt
        return out

    def _role(self, tensors: list[torch.Tensor], op: str) -> str:
        backward = torch._C._current_autograd_node() is not None
        for t in tensors:
            name = self.names.get(t.untyped_storage().data_ptr())
            if name is not None:
                return f"{weight_role(name)} {'input-grad' if backward else 'fwd'}"
        if op in ("bmm", "baddbmm"):
            return "attention bmm " + ("bwd" if backward else "fwd")
        # no parameter among the operands: a weight's gradient (only the LoRA weights train)
        return "LoRA weight-grad" if backward else "other fwd"


# -- timing alone -------------------------------------------------------------------------------

def operands(p: Product) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    out = []
    for shape, stride in p.layouts:
        t = torch.empty_strided(shape, stride, dtype=torch.float32)
        t.copy_(torch.randn(shape, generator=g) * 0.1)
        out.append(t)
    return out


def caller(p: Product) -> Callable[[], Any]:
    func = {v: k for k, v in GEMMS.items()}[p.op]
    args, kwargs = operands(p), dict(p.scalars)
    return lambda: func(*args, **kwargs)


def best_per_call(fn: Callable[[], Any], min_s: float) -> float:
    """Time per call of a loop at least ``min_s`` long (one call when it is slower)."""
    fn()
    n, t = 1, 0.0
    while True:
        t0 = clock()
        for _ in range(n):
            fn()
        t = clock() - t0
        if t >= min_s:
            return t / n
        n = max(n * 2, int(n * min_s / max(t, 1e-9)) + 1)


def square_gemm(n: int) -> Callable[[], Any]:
    a, b = torch.randn(n, n), torch.randn(n, n)
    return lambda: torch.mm(a, b)


def time_alone(products: list[Product], peak_sizes: list[int], rounds: int, min_s: float) -> dict[int, float]:
    """Each distinct product's best time per call (into ``best_s``) and each square
    GEMM's best time, interleaved round by round so that both see the same load."""
    distinct: dict[tuple[Any, ...], list[Product]] = defaultdict(list)
    for p in products:
        distinct[(p.op, p.layouts, p.scalars)].append(p)
    calls = [(caller(ps[0]), ps) for ps in distinct.values()]
    squares = {n: square_gemm(n) for n in peak_sizes}
    best_square = dict.fromkeys(peak_sizes, float("inf"))
    for _ in range(rounds):
        for n, fn in squares.items():
            best_square[n] = min(best_square[n], best_per_call(fn, min_s))
        for fn, ps in calls:
            s = best_per_call(fn, min_s)
            for p in ps:
                p.best_s = min(p.best_s, s)
    return best_square


# -- one thread count ---------------------------------------------------------------------------

def measure(policy: Policy, samples: list[Sample], cfg: GRPOConfig, args: argparse.Namespace,
            threads: int) -> dict[str, Any]:
    torch.set_num_threads(threads)
    update = PolicyUpdate(policy, cfg, recompute_old=False)
    update.step(samples[: max(1, len(samples) // 8)])  # warm-up
    t0, c0 = time.perf_counter(), clock()
    update.step(samples)
    plain_s, plain_clock = time.perf_counter() - t0, clock() - c0
    recorder = Recorder(policy.model)
    c0 = clock()
    with recorder:
        update.step(samples)
    recorded_s = clock() - c0
    products = list(recorder.products.values())
    squares = time_alone(products, args.peak_sizes, args.rounds, args.min_seconds)

    flop = sum(p.flop * p.calls for p in products)
    alone_s = sum(p.best_s * p.calls for p in products)
    in_update_s = sum(p.in_update_s for p in products)
    square_gflops = {n: 2 * n**3 / s / 1e9 for n, s in squares.items()}
    best_shape = max(products, key=lambda p: p.flop / p.best_s)
    peak = max([*square_gflops.values(), best_shape.flop / best_shape.best_s / 1e9])
    classes: dict[str, dict[str, float]] = defaultdict(
        lambda: {"calls": 0, "flop": 0, "alone_s": 0.0, "in_update_s": 0.0, "shapes": 0})
    for (_, _, _, role), p in recorder.products.items():
        c = classes[role]
        c["calls"] += p.calls
        c["flop"] += p.flop * p.calls
        c["alone_s"] += p.best_s * p.calls
        c["in_update_s"] += p.in_update_s
        c["shapes"] += 1
    gflops = flop / alone_s / 1e9
    return {
        "threads": threads, "clock": args.clock, "update_wall_s": round(plain_s, 3),
        "update_s": round(plain_clock, 3), "recorded_update_s": round(recorded_s, 3),
        "products": sum(p.calls for p in products),
        "distinct_shapes": len({(p.op, p.layouts, p.scalars) for p in products}),
        "gflop": round(flop / 1e9, 3), "alone_s": round(alone_s, 4), "in_update_s": round(in_update_s, 4),
        "gflops": round(gflops, 2), "in_update_gflops": round(flop / in_update_s / 1e9, 2),
        "peak_gflops": round(peak, 2), "square_gflops": {str(n): round(g, 2) for n, g in square_gflops.items()},
        "best_shape": {"op": best_shape.op, "shapes": [s for s, _ in best_shape.layouts],
                       "gflops": round(best_shape.flop / best_shape.best_s / 1e9, 2)},
        "ratio": round(gflops / peak, 3), "in_update_ratio": round(flop / in_update_s / 1e9 / peak, 3),
        "target": TARGET, "target_met": gflops / peak >= TARGET,
        "matmul_share_of_update": round(in_update_s / recorded_s, 3),
        "attention": {k: {"calls": v[0], "in_update_s": round(v[1], 4)} for k, v in recorder.attention.items()},
        "classes": [{"class": role, "calls": int(c["calls"]), "shapes": int(c["shapes"]),
                     "gflop": round(c["flop"] / 1e9, 3), "alone_s": round(c["alone_s"], 4),
                     "in_update_s": round(c["in_update_s"], 4),
                     "gflops": round(c["flop"] / c["alone_s"] / 1e9, 2) if c["alone_s"] else 0.0,
                     "in_update_gflops": round(c["flop"] / c["in_update_s"] / 1e9, 2) if c["in_update_s"] else 0.0}
                    for role, c in sorted(classes.items(), key=lambda kv: -kv[1]["flop"])],
    }


def report(r: dict[str, Any], setup: dict[str, Any]) -> None:
    print(f"GRPO update's matrix products, {setup['model']}, LoRA r16 q/k/v/o, {setup['samples']} samples, "
          f"{setup['micro_batches']} micro-batches of <= {setup['micro_tokens']} tokens, {r['threads']} thread(s)")
    print(f"  times in {r['clock']} seconds; update {r['update_s']:.2f} s (wall {r['update_wall_s']:.2f} s; "
          f"recorded: {r['recorded_update_s']:.2f} s), {r['products']} products, "
          f"{r['distinct_shapes']} distinct, {r['gflop']:.1f} GFLOP")
    print(f"  alone: {r['gflops']:.1f} GFLOP/s (FLOP-weighted: {r['gflop']:.1f} GFLOP / {r['alone_s']:.3f} s)  "
          f"inside the update: {r['in_update_gflops']:.1f} GFLOP/s ({r['in_update_s']:.3f} s)")
    squares = ", ".join(f"{n}^3 {g:.1f}" for n, g in r["square_gflops"].items())
    print(f"  same-run peak: {r['peak_gflops']:.1f} GFLOP/s (square GEMMs: {squares}; best update shape "
          f"{r['best_shape']['op']} {r['best_shape']['shapes']}: {r['best_shape']['gflops']:.1f})")
    print(f"  ratio alone/peak {r['ratio']:.2f} (target >= {TARGET:.2f}: {'ok' if r['target_met'] else 'MISSED'}), "
          f"inside/peak {r['in_update_ratio']:.2f}; products take {100 * r['matmul_share_of_update']:.0f} % of the "
          f"update's {r['clock']} time")
    att = "; ".join(f"{k}: {v['calls']} calls {v['in_update_s']:.3f} s" for k, v in r["attention"].items())
    print(f"  fused attention (not GEMMs, not counted above): {att or 'none'}")
    print(f"  {'class':<24} {'calls':>6} {'shapes':>6} {'GFLOP':>8} {'alone s':>8} {'GFLOP/s':>8} {'in-upd':>8} "
          f"{'% peak':>6}")
    for c in r["classes"]:
        print(f"  {c['class']:<24} {c['calls']:>6} {c['shapes']:>6} {c['gflop']:>8.2f} {c['alone_s']:>8.3f} "
              f"{c['gflops']:>8.1f} {c['in_update_gflops']:>8.1f} {100 * c['gflops'] / r['peak_gflops']:>6.0f}")


def _load(model: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if model == "tiny":
        from agentbolt.models import tiny_model

        return tiny_model(seed=0, vocab="smollm2", hidden=64, n_layers=2)
    from agentbolt.models import smollm2

    path = smollm2()
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), AutoTokenizer.from_pretrained(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["smollm2", "tiny"], default="smollm2")
    ap.add_argument("--threads", default="1", help="torch thread counts, comma-separated (e.g. 1,2)")
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--prompt-tokens", type=int, default=177, help="each group's shared prompt (calc's: 177)")
    ap.add_argument("--micro-tokens", type=int, default=2048, help="micro-batch budget (examples/calc: 2048)")
    ap.add_argument("--rounds", type=int, default=5, help="stand-alone timing rounds (best kept)")
    ap.add_argument("--min-seconds", type=float, default=0.02, help="shortest timed loop per product and round")
    ap.add_argument("--peak-sizes", default="1024,2048", help="square GEMMs for the peak, comma-separated")
    ap.add_argument("--smoke", action="store_true", help="tiny model, small batch, 2 quick rounds (CI)")
    ap.add_argument("--json", action="store_true", help="one JSON line per thread count")
    ap.add_argument("--clock", choices=list(CLOCKS), default="cpu",
                    help="cpu: process CPU time (robust on a shared machine); wall: elapsed time")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.smoke:
        args.model, args.groups, args.group_size, args.prompt_tokens, args.micro_tokens = "tiny", 2, 4, 40, 512
        args.rounds, args.min_seconds, args.peak_sizes = 2, 0.002, "256"
    args.peak_sizes = [int(n) for n in str(args.peak_sizes).split(",")]
    global clock
    clock = CLOCKS[args.clock]
    torch.manual_seed(args.seed)

    model, tokenizer = _load(args.model)
    lora = LoraSettings(r=16, alpha=32.0, dropout=0.0)
    policy = Policy(model, tokenizer, lora=lora, dtype="float32")
    cfg = GRPOConfig(lora=lora, learning_rate=1e-5, max_grad_norm=1.0, kl_coef=0.0, ppo_epochs=1,
                     micro_batch_tokens=args.micro_tokens, dtype="float32")
    samples = calc_samples(len(tokenizer), args.groups, args.group_size, args.prompt_tokens, args.seed)
    samples = with_own_logprobs(policy, samples, args.micro_tokens)
    setup = {"model": args.model, "samples": len(samples), "micro_tokens": args.micro_tokens,
             "micro_batches": len(micro_batches(samples, args.micro_tokens)),
             "tokens": sum(len(s.token_ids) for s in samples), "trained_tokens": sum(trained_tokens(samples).values())}
    for threads in [int(n) for n in args.threads.split(",")]:
        r = measure(policy, samples, cfg, args, threads)
        if args.json:
            print(json.dumps({**setup, **r}), flush=True)
        else:
            report(r, setup)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
