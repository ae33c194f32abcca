"""TRL's GRPO update on a fixed batch: the peer side of benchmarks/grpo_update.py.

Runs in the TRL venv (``benchmarks/peer/setup_trl.sh``: TRL 1.16.0 next to the main
venv's torch/transformers/peft, which it reuses unchanged). Reads the batch that
grpo_update.py wrote (``torch.save`` of prompt/completion ids, sampling logprobs and
advantages) and times, per update, exactly what TRL's own training loop does once the
completions exist:

* for each micro-batch: ``GRPOTrainer.training_step`` (HF Trainer's step: TRL's
  ``compute_loss`` — fused LM head over the completion tokens, log-probs + entropy,
  the ``grpo`` loss — then ``accelerator.backward``); generation and reward scoring are
  skipped by making ``_prepare_inputs`` hand back the prepared micro-batch;
* then clip the gradient norm, ``optimizer.step()``, ``lr_scheduler.step()``, zero grads.

Prints one JSON line: wall and CPU seconds of each timed update, peak RSS.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch


def peak_rss_mb() -> float:
    """This process's peak resident memory since the last :func:`reset_peak_rss` (VmHWM:
    unlike getrusage's ru_maxrss, which Linux carries over from the parent across
    fork + exec, it is this process's own)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak_rss() -> None:
    """Start the peak over from the current RSS (Linux: ``5`` to clear_refs): the peak
    measured is the update's, as on the agentbolt side."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _trainer(model_dir: str, lora_r: int, micro: int, accum: int, group_size: int, out_dir: str) -> Any:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    class PreparedBatchGRPOTrainer(GRPOTrainer):
        """GRPOTrainer whose inputs are already-generated, already-scored micro-batches."""

        def _prepare_inputs(self, generation_batch: dict[str, Any]) -> dict[str, Any]:
            return generation_batch

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    peft_config = None
    if lora_r > 0:
        peft_config = LoraConfig(r=lora_r, lora_alpha=2 * lora_r, lora_dropout=0.0, bias="none",
                                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], task_type="CAUSAL_LM")
    args = GRPOConfig(
        output_dir=out_dir, use_cpu=True, report_to=[], per_device_train_batch_size=micro,
        gradient_accumulation_steps=accum, num_generations=group_size, learning_rate=1e-5, weight_decay=0.0,
        lr_scheduler_type="constant", max_grad_norm=1.0, beta=0.0, loss_type="grpo", bf16=False,
        max_completion_length=64, save_strategy="no", logging_strategy="no",
    )
    ds = Dataset.from_dict({"prompt": ["unused"] * (micro * accum)})
    trainer = PreparedBatchGRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                                       args=args, train_dataset=ds, processing_class=tokenizer, peft_config=peft_config)
    trainer.create_optimizer_and_scheduler(num_training_steps=1000)
    trainer.current_gradient_accumulation_steps = accum
    return trainer


def _micro_batches(batch: dict[str, torch.Tensor], micro: int) -> list[dict[str, torch.Tensor]]:
    n = batch["prompt_ids"].shape[0]
    out = []
    for i in range(0, n, micro):
        sl = slice(i, i + micro)
        out.append({
            "prompt_ids": batch["prompt_ids"][sl], "prompt_mask": torch.ones_like(batch["prompt_ids"][sl]),
            "completion_ids": batch["completion_ids"][sl],
            "completion_mask": torch.ones_like(batch["completion_ids"][sl]),
            "old_per_token_logps": batch["old_logprobs"][sl], "advantages": batch["advantages"][sl],
        })
    return out


def _update(trainer: Any, micro_batches: list[dict[str, torch.Tensor]]) -> tuple[float, float]:
    """Wall and CPU seconds of one update."""
    model = trainer.model
    t0, c0 = time.perf_counter(), time.process_time()
    for mb in micro_batches:
        trainer.training_step(model, dict(mb), None)
    trainer.accelerator.clip_grad_norm_(model.parameters(), trainer.args.max_grad_norm)
    trainer.optimizer.step()
    trainer.lr_scheduler.step()
    trainer.optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - t0, time.process_time() - c0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", required=True, help="file written by grpo_update.py")
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--lora-r", type=int, default=16, help="0: full fine-tuning")
    ap.add_argument("--micro", type=int, required=True, help="sequences per micro-batch")
    ap.add_argument("--group-size", type=int, required=True)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    batch = torch.load(args.batch)
    n = batch["prompt_ids"].shape[0]
    if n % args.micro:
        raise SystemExit(f"the batch ({n} sequences) must split into micro-batches of {args.micro}")
    import trl

    with tempfile.TemporaryDirectory() as out_dir:
        trainer = _trainer(args.model_dir, args.lora_r, args.micro, n // args.micro, args.group_size, out_dir)
        mbs = _micro_batches(batch, args.micro)
        reset_peak_rss()
        _update(trainer, mbs[:1])  # warm-up on one micro-batch, like the agentbolt side
        timed = [_update(trainer, mbs) for _ in range(args.reps)]
    print(json.dumps({"peer": f"trl {trl.__version__}", "seconds": [w for w, _ in timed],
                      "cpu_seconds": [c for _, c in timed],
                      "max_rss_mb": peak_rss_mb()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
