"""Data-parallel GRPO worker, launched by ``test_distributed.py`` under torchrun (gloo, CPU).

    python -m torch.distributed.run --nproc_per_node 2 --master_port P dp_worker.py update OUT
    python -m torch.distributed.run --nproc_per_node 2 --master_port P dp_worker.py fit OUT

``update``: every rank builds the same seeded policy and runs :func:`run_updates` (two
``PolicyUpdate.step`` calls on a fixed batch); the test runs the same function in one
process and compares. ``fit``: the full GRPO loop — rank 0 runs ``Trainer.fit`` with an
in-process gateway, rank 1 follows. Each rank writes ``OUT/rank<r>.pt``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from agentbolt.algorithms.grpo import Sample
from agentbolt.algorithms.grpo.config import GRPOConfig
from agentbolt.training.lora import LoraSettings
from agentbolt.training.policy import Policy
from agentbolt.algorithms.grpo.update import PolicyUpdate
from agentbolt.models import tiny_model

# (rollout, [(prompt, response), ...], advantage): rollouts of 1-3 calls and many lengths
ROLLOUTS: list[tuple[str, list[tuple[list[int], list[int]]], float]] = [
    ("r1", [([5, 6, 7], [8, 9]), ([5, 6, 7, 8, 9, 10], [11, 12, 13])], 1.0),
    ("r2", [([20, 21], [22])], -0.5),
    ("r3", [([30, 31, 32, 33, 34, 35, 36], [37, 38, 39, 40, 41, 42, 43, 44])], -0.5),
    ("r4", [([50], [51, 52]), ([60, 61], [62]), ([70, 71, 72], [73, 74, 75, 76])], 0.75),
    ("r5", [([90, 91, 92, 93], [94])], -0.75),
]


def build_policy() -> Policy:
    """The same policy in every process: a seeded tiny model, all weights trained."""
    torch.set_num_threads(1)
    model, tok = tiny_model(seed=1, vocab="bytes", hidden=32, n_layers=1)
    return Policy(model, tok, lora=None)


def build_samples(policy: Policy) -> list[Sample]:
    out = []
    for rollout, calls, advantage in ROLLOUTS:
        for prompt, response in calls:
            ids = prompt + response
            with torch.no_grad():
                lp, _ = policy.token_logprobs(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long))
            mask = [0] * len(prompt) + [1] * len(response)
            lps = [float(x) if m else 0.0 for x, m in zip(lp[0].tolist(), mask, strict=True)]
            out.append(Sample(rollout, "a", ids, mask, lps, [0 if m else None for m in mask], ["s"], advantage))
    return out


def run_updates(policy: Policy) -> list[dict[str, Any]]:
    """Two updates on the same batch (the second sees the samples one version stale);
    small micro-batches so gradient accumulation is exercised too."""
    cfg = GRPOConfig(learning_rate=1e-2, micro_batch_tokens=16, max_grad_norm=1.0, lora=None)
    update = PolicyUpdate(policy, cfg)
    samples = build_samples(policy)
    grads: list[dict[str, torch.Tensor]] = []
    optimizer_step = update.optimizer.step

    def step_keeping_the_gradient(*args: Any, **kwargs: Any) -> Any:  # the summed, clipped gradient it steps on
        grads.append({n: p.grad.detach().clone() for n, p in policy.model.named_parameters() if p.grad is not None})
        return optimizer_step(*args, **kwargs)

    update.optimizer.step = step_keeping_the_gradient  # type: ignore[method-assign]
    stats = []
    for version in (0, 1):
        s = update.step(samples, current_version=version)
        stats.append({"grad_norm": s.grad_norm, "loss": s.loss, "tokens": s.num_trained_tokens,
                      "rollouts": s.num_rollouts, "samples": s.num_samples, "stale": s.stale_samples,
                      "grads": grads[-1], "lr": cfg.learning_rate, "adam_eps": update.optimizer.defaults["eps"]})
    return stats


def params(policy: Policy) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in policy.model.named_parameters()}


# ---------------------------------------------------------------------- fit mode
FIT_TASKS = [{"prompt": f"task {i}"} for i in range(6)]
PROBE = torch.tensor([[1, 40, 41, 42, 43, 44, 45, 2]])


async def byte_agent(task: dict[str, str], llm: Any) -> float:
    import openai

    client = openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5)
    async with client:
        answer = await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["prompt"]}], max_tokens=3)
    text = answer.choices[0].message.content or ""
    return ord(text[0]) / 1000 if text else 0.0  # rewards that differ within a group


def fit(out: Path, rank: int) -> None:
    import agentbolt
    from agentbolt.algorithms.grpo import GRPO
    from agentbolt.engines.transformers_engine import TransformersEngine
    from agentbolt.gateway import Gateway, GatewayConfig

    torch.set_num_threads(1)
    if rank != 0:  # consume RNG differently from rank 0: the LoRA init must still agree
        torch.manual_seed(1234)
    model, tok = tiny_model(seed=3, vocab="bytes", hidden=32, n_layers=1)
    cfg = GRPOConfig(max_steps=3, tasks_per_step=3, group_size=4, learning_rate=5e-2, seed=0, progress=False,
                     lora=LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]),
                     eval_before=False, eval_after=False, run_dir=str(out / "run"), loggers=["jsonl"])
    algorithm = GRPO(cfg, model=model, tokenizer=tok)
    gateway = None
    if rank == 0:
        served, served_tok = tiny_model(seed=3, vocab="bytes", hidden=32, n_layers=1)
        engine = TransformersEngine(served, served_tok, max_batch_size=16, num_threads=1, default_max_tokens=3)
        gateway = Gateway(engine, GatewayConfig(retry_after=1))
    trainer = agentbolt.Trainer(algorithm=algorithm, n_runners=1, runner=agentbolt.Runner(concurrency=16),
                                gateway=gateway)
    result = trainer.fit(byte_agent, FIT_TASKS)
    policy = algorithm.policy
    with torch.no_grad():
        policy_logits = policy.model(input_ids=PROBE).logits
    report: dict[str, Any] = {"trainable": policy.trainable_state(), "policy_logits": policy_logits}
    if rank == 0:
        with torch.no_grad():
            report["engine_logits"] = gateway.engine.model(input_ids=PROBE).logits  # type: ignore[union-attr]
        report["policy_version"] = result.policy_version
        report["steps"] = result.steps
        report["served_version"] = gateway.engine.policy_version  # type: ignore[union-attr]
    torch.save(report, out / f"rank{rank}.pt")


def main() -> None:
    import torch.distributed as tdist

    mode, out = sys.argv[1], Path(sys.argv[2])
    tdist.init_process_group("gloo")
    rank = tdist.get_rank()
    try:
        if mode == "update":
            policy = build_policy()
            stats = run_updates(policy)
            torch.save({"params": params(policy), "stats": stats}, out / f"rank{rank}.pt")
        elif mode == "fit":
            fit(out, rank)
        else:
            raise SystemExit(f"unknown mode {mode!r}")
    finally:
        tdist.destroy_process_group()


if __name__ == "__main__":
    main()
