"""GRPO and SFT under ``Trainer.fit`` with the policy sharded by FSDP2, launched by
``test_fsdp_fit.py`` under torchrun (gloo, 2 CPU processes)::

    python -m torch.distributed.run --nproc_per_node 2 --master_port P fsdp_fit_worker.py MODE OUT RUN_DIR

``fit<max_steps>``: :func:`fit` — GRPO on the byte agent of the data-parallel test, all weights
trained (``sharding="fsdp"``), the transformers engine in rank 0's process behind the
gateway; rank 1 runs the same ``Trainer.fit``, which follows rank 0. It runs to
``max_steps`` in ``RUN_DIR`` with a checkpoint after every step, resuming from the newest
one there (the test runs it to step 3, then again to step 4 on 2 ranks, and to step 4 in
one process on a copy). Rank 0 records what every update trained on and every weight
load the engine made; every rank the gathered policy.

``lora``: :func:`fit` to step 2, training a LoRA (the FSDP update test's), from a fresh
``RUN_DIR``. ``sft``: :func:`sft` — one SFT iteration on chat records, all weights trained
and sharded.

``publish``: :func:`_publish` — rank 0's peak memory while it publishes a bigger sharded
policy to its engine in parts, and, for scale, while it publishes the same weights
unsharded in one piece; between the two, the sharded policy published again to the same
engine in a server (over HTTP). Each rank writes ``OUT/rank<r>.pt``.
"""

from __future__ import annotations

import asyncio
import gc
import re
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the other workers

from algorithms.grpo.dp_worker import FIT_TASKS, byte_agent  # noqa: E402

from agentbolt.algorithms.grpo.config import GRPOConfig  # noqa: E402
from agentbolt.algorithms.grpo.update import PolicyUpdate  # noqa: E402
from agentbolt.engines.transformers_engine import TransformersEngine  # noqa: E402
from agentbolt.engines.weight_update import WeightUpdate  # noqa: E402
from agentbolt.models import tiny_model  # noqa: E402
from agentbolt.training.lora import LoraSettings  # noqa: E402
from training.fsdp_worker import LORA, RECORDS, whole  # noqa: E402

PROBE = [1, 40, 41, 42, 43, 44, 45, 2]


def model() -> tuple[Any, Any]:
    """The policy's starting weights, the same in every process: a seeded two-block model."""
    return tiny_model(seed=3, vocab="bytes", hidden=32, n_layers=2)


def config(run_dir: Path, max_steps: int, lora: LoraSettings | None = None) -> GRPOConfig:
    """The run's settings: all weights trained (or ``lora``), sharded, small micro-batches
    (accumulation and the filler passes of a rank with fewer of them), a checkpoint every
    step; a learning rate small enough that the policy does not collapse within 4 steps
    (a group whose answers all start alike has no advantage, and a step with none trains nothing)."""
    return GRPOConfig(max_steps=max_steps, tasks_per_step=3, group_size=6, learning_rate=2e-3, micro_batch_tokens=16,
                      seed=0, progress=False, lora=lora, sharding="fsdp", eval_before=False, eval_after=False,
                      run_dir=str(run_dir), loggers=["jsonl"], resume=True, checkpoint_every=1)


class RecordingEngine(TransformersEngine):
    """The transformers engine, noting every weight load it makes: each part of an update
    in parts (with the version served meanwhile), each commit, each whole update."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loads: list[tuple[str, Any]] = []

    async def load_weight_part(self, update: WeightUpdate) -> None:
        await super().load_weight_part(update)
        self.loads.append(("part", (self.policy_version, sorted(update.state_dict or {}))))

    async def commit_weights(self, *, version: int | None = None) -> int:
        served = await super().commit_weights(version=version)
        self.loads.append(("commit", served))
        return served

    async def load_weights(self, update: WeightUpdate, *, version: int | None = None) -> int:
        served = await super().load_weights(update, version=version)
        self.loads.append(("whole", served))
        return served


def fit(out: Path, rank: int, run_dir: Path, max_steps: int, lora: LoraSettings | None = None) -> dict[str, Any]:
    """``Trainer.fit`` of :func:`config` (see the module doc); this rank's report."""
    import agentbolt
    from agentbolt.algorithms.grpo import GRPO
    from agentbolt.gateway import Gateway, GatewayConfig

    torch.set_num_threads(1)
    policy_model, tok = model()
    if rank != 0:  # another LoRA initialisation than rank 0's: every rank must still start from rank 0's
        torch.manual_seed(1234)
    algorithm = GRPO(config(run_dir, max_steps, lora), model=policy_model, tokenizer=tok)
    engine, gateway = None, None
    if rank == 0:
        engine = RecordingEngine(*model(), max_batch_size=16, num_threads=1, default_max_tokens=3)
        gateway = Gateway(engine, GatewayConfig(retry_after=1))
    updates: list[dict[str, Any]] = []
    step = PolicyUpdate.step

    def recording(self: PolicyUpdate, samples: Any, *, current_version: int | None = None) -> Any:
        if engine is not None:
            served = {k: v.clone() for k, v in engine.model.state_dict().items()}
            updates.append({"samples": list(samples), "version": current_version, "served": served})
        return step(self, samples, current_version=current_version)

    PolicyUpdate.step = recording  # type: ignore[method-assign]
    try:
        result = agentbolt.Trainer(algorithm=algorithm, n_runners=1, runner=agentbolt.Runner(concurrency=16),
                                   gateway=gateway).fit(byte_agent, FIT_TASKS)
    finally:
        PolicyUpdate.step = step  # type: ignore[method-assign]
    report: dict[str, Any] = {"params": {n: whole(p) for n, p in algorithm.policy.model.named_parameters()}}
    if engine is not None:
        report.update(updates=updates, loads=engine.loads, steps=result.steps, history=result.history,
                      policy_version=result.policy_version, served_version=engine.policy_version,
                      served={k: v.clone() for k, v in engine.model.state_dict().items()},
                      export=sorted(p.name for p in (run_dir / "model").iterdir()))
    return report


def sft(out: Path, rank: int, run_dir: Path) -> dict[str, Any]:
    """``Trainer.fit`` of SFT on the FSDP update test's chat records (its one-process step:
    :func:`training.fsdp_worker.run_sft`), all weights trained and sharded; this rank's report."""
    import agentbolt
    from agentbolt.algorithms.sft import SFT, SFTConfig
    from agentbolt.gateway import Gateway, GatewayConfig

    torch.set_num_threads(1)
    cfg = SFTConfig(epochs=1, batch_size=len(RECORDS), learning_rate=1e-2, warmup_ratio=0.0, lr_schedule="constant",
                    micro_batch_tokens=64, lora=None, sharding="fsdp", gradient_checkpointing=True, eval_before=False,
                    eval_after=False, run_dir=str(run_dir), loggers=["jsonl"], progress=False)
    algorithm = SFT(cfg, model=tiny_model(seed=1, vocab="bytes", hidden=32, n_layers=2)[0],
                    tokenizer=tiny_model(seed=1, vocab="bytes", hidden=32, n_layers=2)[1], records=RECORDS)
    engine, gateway = None, None
    if rank == 0:
        engine = RecordingEngine(*tiny_model(seed=1, vocab="bytes", hidden=32, n_layers=2), num_threads=1,
                                 default_max_tokens=3)
        gateway = Gateway(engine, GatewayConfig(retry_after=1))
    result = agentbolt.Trainer(algorithm=algorithm, gateway=gateway).fit(byte_agent, FIT_TASKS)
    report: dict[str, Any] = {"params": {n: whole(p) for n, p in algorithm.policy.model.named_parameters()}}
    if engine is not None:
        report.update(loads=engine.loads, history=result.history, policy_version=result.policy_version,
                      served={k: v.clone() for k, v in engine.model.state_dict().items()},
                      checkpoints=sorted(p.name for p in (run_dir / "checkpoints" / "step-000001").iterdir()))
    return report


def _memory(field: str) -> int:
    """This process's ``VmRSS`` or ``VmHWM`` (its peak since :func:`_reset_peak`), bytes."""
    found = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    assert found is not None
    return int(found.group(1)) * 1024


def _reset_peak() -> None:
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM back to VmRSS


async def _publish(out: Path, rank: int) -> dict[str, Any]:
    from agentbolt.gateway import Gateway, GatewayConfig, LocalGatewayControl, RemoteGateway
    from agentbolt.server.testing import serve_in_thread
    from agentbolt.store.memory import MemoryStore
    from agentbolt.training import ranks
    from agentbolt.training.policy import Policy
    from agentbolt.training.publish import Publisher, engine_info

    torch.set_num_threads(1)
    big = {"seed": 3, "vocab": "bytes", "hidden": 256, "n_layers": 8}
    policy = await asyncio.to_thread(lambda: Policy(*tiny_model(**big), lora=None, sharding="fsdp"))  # type: ignore[arg-type]
    if rank != 0:
        await ranks.follow(ranks.policy_reads(policy))
        return {}
    served, tok = tiny_model(**big)  # type: ignore[arg-type]
    engine = RecordingEngine(served, tok, max_batch_size=1, num_threads=1, context_length=64)
    control = LocalGatewayControl(Gateway(engine, GatewayConfig()))
    info = await engine_info(control)
    model_bytes = sum(p.numel() * p.element_size() for p in served.parameters())
    report: dict[str, Any] = {"model_bytes": model_bytes}
    try:
        publisher = Publisher(control, policy, info, lora_dir=out / "loras")
        _reset_peak()
        before = _memory("VmRSS")
        report["version"], _ = await publisher.publish(1)
        report["streamed"] = _memory("VmHWM") - before
        report["probe"] = await publisher.agreement(PROBE)
        with serve_in_thread(MemoryStore(), admin_token="admin", gateway=control.gateway) as url:  # over HTTP
            remote = RemoteGateway(url, token="admin")
            try:
                publisher = Publisher(remote, policy, await engine_info(remote), lora_dir=out / "loras")
                report["remote_version"], values = await publisher.publish(2, PROBE)
                report["remote_probe"] = values["publish/max_abs_logprob_diff"]
            finally:
                await remote.aclose()
    finally:
        ranks.stop()
    whole_policy = Policy(*tiny_model(**big), lora=None)  # type: ignore[arg-type]
    publisher = Publisher(control, whole_policy, info, lora_dir=out / "loras")
    _reset_peak()
    before = _memory("VmRSS")
    await publisher.publish(3)
    report["one_piece"] = _memory("VmHWM") - before
    report["loads"] = engine.loads
    await engine.close()
    return report


def main() -> None:
    import torch.distributed as tdist

    mode, out, run_dir = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    tdist.init_process_group("gloo")
    rank = tdist.get_rank()
    try:
        if mode == "publish":
            report = asyncio.run(_publish(out, rank))
        elif mode == "sft":
            report = sft(out, rank, run_dir)
        elif mode == "lora":
            report = fit(out, rank, run_dir, 2, LORA)
        else:
            report = fit(out, rank, run_dir, int(mode.removeprefix("fit")))
        torch.save(report, out / f"rank{rank}.pt")
    finally:
        tdist.destroy_process_group()


if __name__ == "__main__":
    main()
