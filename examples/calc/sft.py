"""Fine-tune SmolLM2 on a teacher's traces of the calc agent (SFT), on this machine's CPU.

    python examples/calc/sft.py --fresh        # SmolLM2-135M-Instruct, ~10-15 min on 2 cores
    python examples/calc/sft.py --smoke        # the same path in about a minute

Two phases, one SQLite store (``--run-dir``/store.db):

1. **record the teacher** — a scripted OpenAI-compatible server (``teacher.py``: it
   answers ``CALC(<expression>)`` for the training problems it knows, then
   ``ANSWER: <n>``) is put behind agentbolt's gateway, and the unchanged calc agent runs
   every training problem against it (``Evaluate`` in test mode: no learning, every call
   recorded as a span with its messages; the teacher's rewards grade it);
2. **fine-tune the student** — ``SFT(rollouts=<the teacher's rollout ids>)`` keeps the
   teacher's rollouts with reward ≥ 1, turns each of their two model calls into a chat
   record, fine-tunes a LoRA on SmolLM2 (loss on the assistant's tokens only,
   SmolLM2's chat template) and publishes it to the transformers engine that serves the
   agent. The held-out problems are solved greedily before and after.

Outputs in ``--run-dir`` (default ``runs/calc-sft``): ``store.db``, ``metrics.jsonl``,
``records/iteration-1.jsonl`` (what the student learned from), ``checkpoints/`` and
``model/``, the fine-tuned SmolLM2 as a Hugging Face model directory (LoRA merged).
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

from task import MAX_TOKENS, calc_agent, heldout_set, train_set
from teacher import serve_teacher

import agentbolt
from agentbolt.algorithms import SFT, Evaluate, LoraSettings, SFTConfig, SFTResult
from agentbolt.engines import EngineSpec


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="2 problems, 1 tiny epoch: checks the whole path in a minute")
    p.add_argument("--train-size", type=int, default=64, help="training problems the teacher solves")
    p.add_argument("--val-size", type=int, default=64, help="held-out problems, solved greedily before and after")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch-size", type=int, default=8, help="records per optimizer step")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=MAX_TOKENS, help="per model call")
    p.add_argument("--threads", type=int, default=2, help="torch threads of the engine")
    p.add_argument("--batch", type=int, default=32, help="engine batch size")
    p.add_argument("--run-dir", default="runs/calc-sft")
    p.add_argument("--fresh", action="store_true", help="delete --run-dir first instead of resuming")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.smoke:
        args.train_size, args.val_size, args.epochs, args.max_tokens = 2, 2, 1, 16
    return args


def record_teacher(args: argparse.Namespace, store: str, train: list[dict[str, Any]], run_dir: Path) -> list[str]:
    """Phase 1: the calc agent against the teacher, through the gateway; the ids of its
    rollouts (kept in ``teacher_rollouts.json``, so a resumed run does not record again)."""
    saved = run_dir / "teacher_rollouts.json"
    if saved.is_file():
        return list(json.loads(saved.read_text()))
    with serve_teacher(train) as url:
        trainer = agentbolt.Trainer(
            algorithm=Evaluate("train", mode="test", show=False), store=store,
            runner=agentbolt.Runner(concurrency=16),
            gateway=EngineSpec(kind="openai", url=url, model="teacher"),
            resources={"llm": agentbolt.gateway_llm(max_tokens=args.max_tokens)},
        )
        recorded = trainer.fit(calc_agent, train)
    rate = "n/a" if recorded.success_rate is None else f"{recorded.success_rate:.0%}"
    print(f"teacher: {recorded.n_total} training problems recorded, success {rate}")
    ids = [row.rollout_id for row in recorded.rows]
    saved.write_text(json.dumps(ids))
    return ids


def fine_tune(args: argparse.Namespace, store: str, train: list[dict[str, Any]], heldout: list[dict[str, Any]],
              run_dir: Path, teacher_ids: list[str]) -> SFTResult:
    """Phase 2: SFT of SmolLM2 on the teacher's rollouts, evaluated on the held-out problems."""
    import torch

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    config = SFTConfig(
        min_reward=1.0, epochs=args.epochs, learning_rate=args.lr, batch_size=args.batch_size,
        lora=LoraSettings(r=args.lora_r, alpha=2 * args.lora_r), micro_batch_tokens=4096, warmup_ratio=0.1,
        run_dir=str(run_dir), seed=args.seed,
    )
    engine = EngineSpec(kind="transformers", path="smollm2", num_threads=args.threads, max_batch_size=args.batch,
                        max_tokens=args.max_tokens)
    trainer = agentbolt.Trainer(
        algorithm=SFT(config, rollouts=teacher_ids), store=store,  # model: a copy of what the engine serves
        runner=agentbolt.Runner(concurrency=args.batch), gateway=engine,
        resources={"llm": agentbolt.gateway_llm(max_tokens=args.max_tokens)},
    )
    return trainer.fit(calc_agent, train, heldout)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    run_dir = Path(args.run_dir)
    if args.fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    store = f"sqlite:///{run_dir / 'store.db'}"
    train, heldout = train_set(args.train_size), heldout_set(args.val_size)
    t0 = time.perf_counter()
    teacher_ids = record_teacher(args, store, train, run_dir)
    t_teacher = time.perf_counter() - t0
    result = fine_tune(args, store, train, heldout, run_dir, teacher_ids)
    wall = time.perf_counter() - t0

    def pct(res: Any) -> str:
        return "n/a" if res is None or res.success_rate is None else f"{100 * res.success_rate:.1f}%"

    train_s = sum(h.get("time/update_s") or 0.0 for h in result.history)
    out = {
        "held_out_before": None if result.before is None else result.before.success_rate,
        "held_out_after": None if result.after is None else result.after.success_rate,
        "records": result.n_records, "teacher_rollouts": len(teacher_ids), "wall_minutes": wall / 60,
        "teacher_seconds": t_teacher, "train_seconds": train_s, "model_dir": str(result.export_dir),
    }
    print()
    print(f"held-out success before: {pct(result.before)} after: {pct(result.after)} "
          f"(greedy, {args.val_size} problems)")
    print(f"{sum(result.n_records)} chat records from {len(teacher_ids)} teacher rollouts; training {train_s:.0f} s, "
          f"{wall / 60:.1f} min in all (teacher {t_teacher:.0f} s, evaluations included)")
    print(f"fine-tuned model: {result.export_dir}")
    (run_dir / "summary.json").write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
