"""Time of one GRPO policy update on a fixed batch: agentbolt vs TRL's GRPOTrainer (CPU).

Both sides train the same model (SmolLM2-135M by default, ``--model tiny`` for a quick
run) with the same LoRA (r=16, α=32, q/k/v/o; ``--full`` for every weight) on the same
batch: ``--groups`` x ``--group-size`` sequences of ``--prompt-tokens`` prompt tokens
(shared within a group) + ``--completion-tokens`` trained tokens, seeded random ids,
sampling logprobs = the policy's own (ratio 1), advantages = reward − group mean.
Same micro-batch (``--micro`` sequences) and gradient accumulation over the batch,
AdamW lr 1e-5, grad-norm clip 1.0, no KL, float32, ``--threads`` torch threads.

What is timed, per update (after a warm-up update on one micro-batch):

* agentbolt: ``PolicyUpdate.step(samples)`` — collate, per micro-batch forward (each
  group's prompt once, logits at the completion positions only, log-probs + entropy) +
  loss + backward, clip, AdamW step;
* TRL (peer, in its own venv: ``benchmarks/peer/setup_trl.sh``): per micro-batch
  ``GRPOTrainer.training_step`` on the prepared completions (generation and rewards are
  skipped), then clip, optimizer and scheduler step (see benchmarks/peer/trl_grpo_peer.py).

Reported: seconds per update (mean of ``--reps``), trained (completion) tokens/s, all
tokens/s, CPU seconds per update (less sensitive to a busy shared machine: the two sides
run one after the other), each side's peak RSS from the warm-up on (model and batch
loaded; VmHWM of its own process, reset before the warm-up), and the ratio TRL time /
agentbolt time (> 1: agentbolt is faster).

    python benchmarks/grpo_update.py                  # SmolLM2-135M, LoRA, with the TRL peer
    python benchmarks/grpo_update.py --model tiny     # tiny random model, seconds
    python benchmarks/grpo_update.py --smoke --json   # tiny, 1 repetition, no peer (CI)

Figures: docs/benchmarks.md, "GRPO policy update vs TRL".
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch

from agentbolt.algorithms.grpo.config import GRPOConfig
from agentbolt.training.lora import LoraSettings
from agentbolt.training.policy import Policy
from agentbolt.adapters.samples import Sample
from agentbolt.algorithms.grpo.update import PolicyUpdate

PEER_PYTHON = ROOT / ".bench-venv-trl" / "bin" / "python"
PEER_SCRIPT = ROOT / "benchmarks" / "peer" / "trl_grpo_peer.py"


def peak_rss_mb() -> float:
    """This process's peak resident memory since the last :func:`reset_peak_rss` (VmHWM:
    unlike getrusage's ru_maxrss, which Linux carries over from the parent across
    fork + exec and cannot reset, it is this process's own and can be reset)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak_rss() -> None:
    """Start the peak over from the current RSS (Linux: ``5`` to clear_refs), so that the
    peak measured is the update's — the model and batch loaded, not their preparation."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _load(model: str, model_dir: Path) -> tuple[Any, Any, Path]:
    """The model, its tokenizer and a directory holding both (for the peer)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if model == "tiny":
        from agentbolt.models import tiny_model

        m, tok = tiny_model(seed=0, vocab="smollm2", hidden=64, n_layers=2)
        m.save_pretrained(model_dir)
        tok.save_pretrained(model_dir)
        return m, tok, model_dir
    from agentbolt.models import smollm2

    path = smollm2()
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), AutoTokenizer.from_pretrained(path), path


def make_batch(vocab: int, groups: int, group_size: int, prompt: int, completion: int, seed: int) -> dict[str, torch.Tensor]:
    """Seeded random token ids; one prompt per group; rewards 0/1, advantage = r − group mean."""
    g = torch.Generator().manual_seed(seed)
    low = min(100, vocab // 2)  # keep clear of special tokens
    prompts = torch.randint(low, vocab, (groups, prompt), generator=g).repeat_interleave(group_size, dim=0)
    completions = torch.randint(low, vocab, (groups * group_size, completion), generator=g)
    rewards = torch.randint(0, 2, (groups, group_size), generator=g).float()
    advantages = (rewards - rewards.mean(dim=1, keepdim=True)).flatten()
    return {"prompt_ids": prompts, "completion_ids": completions, "advantages": advantages}


def sampling_logprobs(policy: Policy, batch: dict[str, torch.Tensor], micro: int) -> torch.Tensor:
    """The policy's own logprobs of the completion tokens (the ratio starts at 1, as with
    on-policy samples)."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    C = batch["completion_ids"].shape[1]
    out = []
    with torch.no_grad():
        for i in range(0, ids.shape[0], micro):
            chunk = ids[i:i + micro]
            completion = torch.zeros_like(chunk)
            completion[:, -C:] = 1
            lp, _ = policy.token_logprobs(chunk, torch.ones_like(chunk), positions=completion)
            out.append(lp[:, -C:])
    return torch.cat(out)


def to_samples(batch: dict[str, torch.Tensor], group_size: int) -> list[Sample]:
    P, C = batch["prompt_ids"].shape[1], batch["completion_ids"].shape[1]
    samples = []
    for n in range(batch["prompt_ids"].shape[0]):
        ids = batch["prompt_ids"][n].tolist() + batch["completion_ids"][n].tolist()
        samples.append(Sample(
            rollout_id=f"r{n}", attempt_id=f"a{n}", token_ids=ids, loss_mask=[0] * P + [1] * C,
            logprobs=[0.0] * P + batch["old_logprobs"][n].tolist(), versions=[None] * (P + C), span_ids=[],
            advantage=float(batch["advantages"][n]),
        ))
    return samples


def run_agentbolt(model: Any, tokenizer: Any, batch: dict[str, torch.Tensor],
                  args: argparse.Namespace) -> dict[str, Any]:
    seq = batch["prompt_ids"].shape[1] + batch["completion_ids"].shape[1]
    lora = None if args.full else LoraSettings(r=16, alpha=32.0, dropout=0.0)
    policy = Policy(model, tokenizer, lora=lora, dtype="float32")
    cfg = GRPOConfig(lora=lora, learning_rate=1e-5, max_grad_norm=1.0, kl_coef=0.0, ppo_epochs=1,
                     micro_batch_tokens=args.micro * seq, dtype="float32")
    batch["old_logprobs"] = sampling_logprobs(policy, batch, args.micro)
    samples = to_samples(batch, args.group_size)
    update = PolicyUpdate(policy, cfg)
    reset_peak_rss()
    update.step(samples[: args.micro])  # warm-up: one micro-batch
    seconds, cpu = [], []
    for _ in range(args.reps):
        t0, c0 = time.perf_counter(), time.process_time()
        update.step(samples)
        seconds.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"peer": "agentbolt", "seconds": seconds, "cpu_seconds": cpu,
            "max_rss_mb": peak_rss_mb()}


def run_peer(model_dir: Path, batch_file: Path, args: argparse.Namespace) -> dict[str, Any] | None:
    if not PEER_PYTHON.exists():
        print(f"(TRL peer skipped: no {PEER_PYTHON.parent.parent.name}; run benchmarks/peer/setup_trl.sh)", file=sys.stderr)
        return None
    cmd = [str(PEER_PYTHON), str(PEER_SCRIPT), "--batch", str(batch_file), "--model-dir", str(model_dir),
           "--lora-r", "0" if args.full else "16", "--micro", str(args.micro), "--group-size", str(args.group_size),
           "--reps", str(args.reps), "--threads", str(args.threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    if out.returncode != 0:
        print(f"TRL peer failed:\n{out.stderr[-3000:]}", file=sys.stderr)
        return None
    return json.loads([line for line in out.stdout.splitlines() if line.startswith("{")][-1])


def _row(found: dict[str, Any], trained: int, total: int) -> dict[str, Any]:
    s = statistics.fmean(found["seconds"])
    return {"impl": found["peer"], "seconds_per_update": round(s, 3),
            "all_seconds": [round(x, 3) for x in found["seconds"]],
            "cpu_seconds_per_update": round(statistics.fmean(found["cpu_seconds"]), 3),
            "trained_tokens_per_s": round(trained / s, 1), "tokens_per_s": round(total / s, 1),
            "max_rss_mb": round(found["max_rss_mb"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["smollm2", "tiny"], default="smollm2")
    ap.add_argument("--full", action="store_true", help="train every weight instead of LoRA r=16 q/k/v/o")
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--prompt-tokens", type=int, default=150)
    ap.add_argument("--completion-tokens", type=int, default=64)
    ap.add_argument("--micro", type=int, default=16, help="sequences per micro-batch (gradient accumulation over the batch)")
    ap.add_argument("--reps", type=int, default=2, help="timed updates per side")
    ap.add_argument("--threads", type=int, default=2, help="torch threads, both sides")
    ap.add_argument("--peer", choices=["auto", "off"], default="auto", help="auto: run TRL when its venv exists")
    ap.add_argument("--smoke", action="store_true", help="tiny model, small batch, 1 repetition, no peer (CI)")
    ap.add_argument("--json", action="store_true", help="one JSON line per implementation, then the ratio")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.smoke:
        args.model, args.reps, args.peer = "tiny", 1, "off"
        args.groups, args.group_size, args.prompt_tokens, args.completion_tokens, args.micro = 2, 4, 24, 8, 4
    if (args.groups * args.group_size) % args.micro:
        ap.error("--micro must divide groups x group-size (both sides use equal micro-batches)")
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    torch.manual_seed(args.seed)

    with tempfile.TemporaryDirectory(prefix="grpo-update-") as tmp:
        model, tokenizer, model_dir = _load(args.model, Path(tmp) / "model")
        batch = make_batch(len(tokenizer), args.groups, args.group_size, args.prompt_tokens, args.completion_tokens,
                           args.seed)
        N = args.groups * args.group_size
        trained, total = N * args.completion_tokens, N * (args.prompt_tokens + args.completion_tokens)
        rows = [_row(run_agentbolt(model, tokenizer, batch, args), trained, total)]
        del model
        if args.peer != "off":
            batch_file = Path(tmp) / "batch.pt"
            torch.save(batch, batch_file)
            peer = run_peer(model_dir, batch_file, args)
            if peer is not None:
                rows.append(_row(peer, trained, total))

    setup = {"model": args.model, "lora": None if args.full else "r16 q/k/v/o", "sequences": N,
             "prompt_tokens": args.prompt_tokens, "completion_tokens": args.completion_tokens,
             "micro_batch": args.micro, "accumulation": N // args.micro, "threads": args.threads, "reps": args.reps}
    ratio = rows[1]["seconds_per_update"] / rows[0]["seconds_per_update"] if len(rows) > 1 else None
    if args.json:
        for row in rows:
            print(json.dumps({**setup, **row}), flush=True)
        print(json.dumps({"peer_over_agentbolt_time": None if ratio is None else round(ratio, 3)}))
    else:
        print(f"GRPO update, {args.model}, {setup['lora'] or 'full'}: {N} sequences x "
              f"({args.prompt_tokens} prompt + {args.completion_tokens} trained tokens), micro-batch {args.micro} "
              f"x {N // args.micro}, {args.threads} threads, {args.reps} reps")
        for row in rows:
            print(f"  {row['impl']:>12}: {row['seconds_per_update']:.2f} s/update  "
                  f"{row['trained_tokens_per_s']:.0f} trained tokens/s  {row['tokens_per_s']:.0f} tokens/s  "
                  f"CPU {row['cpu_seconds_per_update']:.1f} s  peak RSS {row['max_rss_mb']} MB (runs {row['all_seconds']})")
        if ratio is not None:
            print(f"  TRL time / agentbolt time: {ratio:.2f}x ({'agentbolt faster' if ratio > 1 else 'TRL faster'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
