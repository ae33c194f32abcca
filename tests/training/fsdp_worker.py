"""FSDP2 GRPO worker, launched by ``test_fsdp.py`` under torchrun (gloo, 2 CPU processes).

    python -m torch.distributed.run --nproc_per_node 2 --master_port P fsdp_worker.py full|lora|sft OUT

Every rank builds the same seeded policy with ``sharding="fsdp"`` and runs :func:`run`:
two ``PolicyUpdate.step`` calls on the data-parallel test's batch (gathered gradients,
weights, loss and logprobs recorded), the bytes it holds, a DCP checkpoint that a fresh
sharded policy resumes from (both then take a third step), and an export of the gathered
model (and LoRA). The test runs :func:`run` in one process, where nothing is sharded,
and compares. ``sft``: one SFT optimizer step on chat records (:func:`run_sft`), and a
bfloat16 update through FSDP's mixed precision. Each rank writes ``OUT/rank<r>.pt``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the data-parallel worker

from algorithms.grpo.dp_worker import build_samples  # noqa: E402

from agentbolt.algorithms.grpo.config import GRPOConfig  # noqa: E402
from agentbolt.algorithms.grpo.update import PolicyUpdate  # noqa: E402
from agentbolt.models import tiny_model  # noqa: E402
from agentbolt.training import fsdp  # noqa: E402
from agentbolt.training.lora import LoraSettings  # noqa: E402
from agentbolt.training.policy import Policy  # noqa: E402

LORA = LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"])
PROBE = torch.tensor([[1, 40, 41, 42, 43, 44, 45, 2], [7, 8, 9, 10, 11, 12, 13, 14]])


def build_policy(mode: str) -> Policy:
    """The same policy in every process: a seeded tiny model (two blocks), all weights
    trained with gradient checkpointing (``full``), or a seeded LoRA without (``lora``)."""
    torch.set_num_threads(1)
    model, tok = tiny_model(seed=1, vocab="bytes", hidden=32, n_layers=2)
    torch.manual_seed(5)  # the LoRA's initialisation
    return Policy(model, tok, lora=LORA if mode == "lora" else None, sharding="fsdp",
                  gradient_checkpointing=mode == "full")


UPDATE = GRPOConfig(learning_rate=1e-2, micro_batch_tokens=16, max_grad_norm=1.0, lora=None)
"""The update of the data-parallel test (small micro-batches: accumulation too)."""


def make_update(policy: Policy, config: GRPOConfig = UPDATE) -> tuple[PolicyUpdate, list[dict[str, torch.Tensor]]]:
    """``config``'s update (default: the data-parallel test's), its optimizer step
    recording the summed, clipped gradient it steps on (gathered)."""
    update = PolicyUpdate(policy, config)
    grads: list[dict[str, torch.Tensor]] = []
    optimizer_step = update.optimizer.step

    def step_keeping_the_gradient(*args: Any, **kwargs: Any) -> Any:
        grads.append({n: whole(p.grad) for n, p in policy.model.named_parameters() if p.grad is not None})
        return optimizer_step(*args, **kwargs)

    update.optimizer.step = step_keeping_the_gradient  # type: ignore[method-assign]
    return update, grads


def whole(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor of a shard (a collective: every rank calls it), or a copy."""
    from torch.distributed.tensor import DTensor

    return (t.full_tensor() if isinstance(t, DTensor) else t).detach().clone()


def params(policy: Policy) -> dict[str, torch.Tensor]:
    return {n: whole(p) for n, p in policy.model.named_parameters()}


def probe_logprobs(policy: Policy) -> torch.Tensor:
    return policy.inference_logprobs(PROBE, torch.ones_like(PROBE))


def run(mode: str, out: Path) -> dict[str, Any]:
    policy = build_policy(mode)
    update, grads = make_update(policy)
    samples = build_samples(policy)
    report: dict[str, Any] = {"sharded": policy.sharded, "logprobs_before": probe_logprobs(policy), "steps": []}
    for version in (0, 1):  # the second step sees the samples one version stale
        s = update.step(samples, current_version=version)
        report["steps"].append({"grad_norm": s.grad_norm, "loss": s.loss, "tokens": s.num_trained_tokens,
                                "grads": grads[-1], "lr": update.config.learning_rate,
                                "adam_eps": update.optimizer.defaults["eps"], "params": params(policy)})
    report["params"] = params(policy)
    report["logprobs_after"] = probe_logprobs(policy)
    report["bytes"] = fsdp.local_bytes(policy.model.parameters(), update.optimizer)
    policy.export(out / "export")  # sharded: rank 0 writes the gathered model
    if mode == "lora":
        lora = policy.lora_model()
        if lora is not None:
            lora.save_pretrained(out / "lora")

    fsdp.save_sharded(out / "ckpt", policy.model, update.optimizer)
    update.step(samples, current_version=2)
    report["continued"] = params(policy)
    resumed = build_policy(mode)
    resumed_update, _ = make_update(resumed)
    fsdp.load_sharded(out / "ckpt", resumed.model, resumed_update.optimizer)
    report["loaded"] = params(resumed)
    resumed_update.step(samples, current_version=2)
    report["resumed"] = params(resumed)

    return report


RECORDS = [{"messages": [{"role": "user", "content": f"say {i % 3}" + "!" * i},
                         {"role": "assistant", "content": f"number {i % 3}"}]} for i in range(5)]


def run_sft() -> dict[str, Any]:
    """One SFT optimizer step on five records in small micro-batches, full fine-tuning;
    the gradient it stepped on (gathered) and the weights after."""
    from agentbolt.algorithms.sft import SFTConfig, encode_records
    from agentbolt.algorithms.sft.update import SFTUpdate

    policy = build_policy("full")
    samples = encode_records(RECORDS, policy.tokenizer, max_seq_len=512).samples
    cfg = SFTConfig(epochs=1, batch_size=len(samples), learning_rate=1e-2, warmup_ratio=0.0, lr_schedule="constant",
                    micro_batch_tokens=64, lora=None)
    grads: list[dict[str, torch.Tensor]] = []

    def keep_gradient(*_: Any) -> None:  # after the step: the clipped gradient is still on the weights
        grads.append({n: whole(p.grad) for n, p in policy.model.named_parameters() if p.grad is not None})

    stats = SFTUpdate(policy, cfg).run(samples, on_step=keep_gradient)
    return {"sharded": policy.sharded, "params": params(policy), "loss": stats.loss, "grad_norm": stats.grad_norm,
            "steps": [{"grads": grads[0], "tokens": stats.trained_tokens, "lr": cfg.learning_rate, "adam_eps": 1e-8}]}


def run_bf16() -> dict[str, Any]:
    """A full fine-tuning update computed in bfloat16: loss and the (float32) weights after."""
    torch.set_num_threads(1)
    model, tok = tiny_model(seed=1, vocab="bytes", hidden=32, n_layers=2)
    policy = Policy(model, tok, lora=None, dtype="bfloat16", sharding="fsdp")
    update, _ = make_update(policy)
    stats = update.step(build_samples(policy), current_version=0)
    return {"loss": stats.loss, "params": params(policy)}


def main() -> None:
    import torch.distributed as tdist

    mode, out = sys.argv[1], Path(sys.argv[2])
    tdist.init_process_group("gloo")
    try:
        report = run(mode, out) if mode != "sft" else {**run_sft(), "bf16": run_bf16()}
        torch.save(report, out / f"rank{tdist.get_rank()}.pt")
    finally:
        tdist.destroy_process_group()


if __name__ == "__main__":
    main()
