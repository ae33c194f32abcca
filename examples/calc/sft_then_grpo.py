"""SFT from a teacher's traces, then GRPO, on ONE engine: the documented warm start.

    python examples/calc/sft_then_grpo.py --fresh    # SFT as sft.py, then GRPO on top (~45 min on 2 cores)
    python examples/calc/sft_then_grpo.py --smoke    # the same path in a few minutes

One transformers engine serving SmolLM2 behind one ``Gateway`` is given to both trainers,
with one SQLite store (``--run-dir``/store.db):

1. the teacher is recorded through the gateway (as in ``sft.py``);
2. **SFT** fine-tunes a LoRA on the teacher's rollouts and publishes it;
3. **GRPO** copies the served model (SFT's LoRA merged in), trains a fresh LoRA on
   top with the calc reward and publishes it after every update.

What is trained is what is served: after every publish of either trainer, the engine's
logprobs are compared with the trainer's on a probe (``publish/max_abs_logprob_diff`` in
each run's ``metrics.jsonl``; a mismatch stops the run). It prints the held-out success
(greedy) before, after SFT and after GRPO, and the largest difference seen at a publish.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sft import record_teacher
from task import MAX_TOKENS, calc_agent, heldout_set, train_set

import agentbolt
from agentbolt.algorithms import GRPO, SFT, GRPOConfig, LoraSettings, SFTConfig
from agentbolt.metrics import read_jsonl


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="2 problems, 1 epoch, 1 GRPO step: the whole path, quickly")
    p.add_argument("--train-size", type=int, default=64)
    p.add_argument("--val-size", type=int, default=64)
    p.add_argument("--sft-epochs", type=int, default=2)
    p.add_argument("--sft-lr", type=float, default=1e-3)
    p.add_argument("--grpo-minutes", type=float, default=15.0, help="GRPO's training time budget")
    p.add_argument("--grpo-steps", type=int, default=20)
    p.add_argument("--grpo-lr", type=float, default=3e-4)
    p.add_argument("--tasks-per-step", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=32, help="engine batch size")
    p.add_argument("--run-dir", default="runs/calc-sft-grpo")
    p.add_argument("--fresh", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.smoke:
        args.train_size, args.val_size, args.sft_epochs, args.max_tokens = 2, 2, 1, 16
        args.grpo_steps, args.tasks_per_step, args.group_size, args.grpo_minutes = 1, 2, 4, 5.0
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import torch

    from agentbolt.engines.transformers_engine import TransformersEngine
    from agentbolt.gateway import Gateway
    from agentbolt.models import smollm2

    args = parse_args(argv)
    run_dir = Path(args.run_dir)
    if args.fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    store = f"sqlite:///{run_dir / 'store.db'}"
    train, heldout = train_set(args.train_size), heldout_set(args.val_size)
    t0 = time.perf_counter()
    teacher_ids = record_teacher(args, store, train, run_dir)

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    engine = TransformersEngine.from_pretrained(smollm2(), num_threads=args.threads, max_batch_size=args.batch,
                                                default_max_tokens=args.max_tokens)
    gateway = Gateway(engine)  # one engine for both trainers
    lora = LoraSettings(r=args.lora_r, alpha=2 * args.lora_r)
    llm = agentbolt.gateway_llm(max_tokens=args.max_tokens)

    def trainer(algorithm: Any) -> agentbolt.Trainer:
        return agentbolt.Trainer(algorithm=algorithm, store=store, gateway=gateway, resources={"llm": llm},
                                 runner=agentbolt.Runner(concurrency=args.batch))

    sft_config = SFTConfig(min_reward=1.0, epochs=args.sft_epochs, learning_rate=args.sft_lr, lora=lora,
                           batch_size=8, warmup_ratio=0.1, run_dir=str(run_dir / "sft"), seed=args.seed)
    sft = trainer(SFT(sft_config, rollouts=teacher_ids)).fit(calc_agent, train, heldout)
    grpo_config = GRPOConfig(max_steps=args.grpo_steps, time_budget_s=args.grpo_minutes * 60,
                             tasks_per_step=args.tasks_per_step, group_size=args.group_size,
                             learning_rate=args.grpo_lr, lora=lora, micro_batch_tokens=2048, eval_before=False,
                             run_dir=str(run_dir / "grpo"), seed=args.seed)
    grpo = trainer(GRPO(grpo_config)).fit(calc_agent, train, heldout)  # a copy of what SFT left served

    diffs = [row["publish/max_abs_logprob_diff"] for name in ("sft", "grpo")
             for row in read_jsonl(run_dir / name / "metrics.jsonl") if "publish/max_abs_logprob_diff" in row]
    out = {
        "held_out_before": None if sft.before is None else sft.before.success_rate,
        "held_out_after_sft": None if sft.after is None else sft.after.success_rate,
        "held_out_after_grpo": None if grpo.after is None else grpo.after.success_rate,
        "publishes": len(diffs), "max_publish_logprob_diff": max(diffs) if diffs else None,
        "grpo_steps": grpo.steps, "policy_version": grpo.policy_version,
        "wall_minutes": (time.perf_counter() - t0) / 60, "model_dir": str(grpo.export_dir),
    }

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.1f}%"

    print()
    print(f"held-out success (greedy, {args.val_size} problems): before {pct(out['held_out_before'])}, "
          f"after SFT {pct(out['held_out_after_sft'])}, after GRPO {pct(out['held_out_after_grpo'])}")
    print(f"trainer/engine agreement at {len(diffs)} publishes: max |Δ logprob| "
          f"{out['max_publish_logprob_diff'] if diffs else 'n/a'}")
    print(f"{out['wall_minutes']:.1f} min in all; trained model: {out['model_dir']}")
    (run_dir / "summary.json").write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
