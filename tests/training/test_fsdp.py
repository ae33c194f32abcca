"""The policy sharded with FSDP2 (``sharding="fsdp"``) under torchrun (gloo, 2 CPU
processes) trains as one process does, holding half of it per rank.

For full fine-tuning (with gradient checkpointing) and for a LoRA (without), on
the tiny model (two blocks), with the data-parallel test's batch
(:mod:`tests.algorithms.grpo.dp_worker`), two updates:

* the gradient of the first (gathered from the shards) is the one-process gradient up to
  the rounding of reordered sums; the weights after each update, the loss, the gradient
  norm and the logprobs match within Adam's amplification of that rounding;
* each rank holds about half of one process's parameter and optimizer-state bytes;
* a DCP checkpoint saved on 2 ranks resumes there (the next update is the same as the
  uninterrupted run's) and loads in one process with the same weights;
* the export gathered on rank 0 (a Hugging Face model, LoRA merged; the peft LoRA)
  equals the one-process export.

And SFT's step sharded is the one-process step; a bfloat16 update through FSDP's mixed
precision keeps float32 weights and steps as one process under autocast does.
``Trainer.fit`` with a sharded policy: ``test_fsdp_fit.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from algorithms.grpo.test_distributed import adam_atol
from safetensors.torch import load_file
from tolerances import assert_same_sums
from torchrun import torchrun  # noqa: E402

from agentbolt.algorithms.grpo.config import GRPOConfig
from agentbolt.algorithms.grpo.update import PolicyUpdate
from agentbolt.training import fsdp
from training import fsdp_worker

WORKER = Path(fsdp_worker.__file__)
LOGPROB_ATOL = 1e-4
"""Logprobs of the probe after the updates: the weights then differ by Adam's amplified
rounding (up to 1e-5 here), which moves a logprob of magnitude ~5 by ~1e-6; the
data-parallel test compares its ranks' logits with the same bound."""


def _torchrun(mode: str, out: Path) -> None:
    torchrun(WORKER, mode, str(out), timeout=180)


@pytest.fixture(scope="module", params=["full", "lora"])
def runs(request: Any, tmp_path_factory: Any) -> dict[str, Any]:
    """The 2-rank run's reports and the one-process run of the same function."""
    root = tmp_path_factory.mktemp(request.param)
    (root / "ranks").mkdir()
    (root / "one").mkdir()
    _torchrun(request.param, root / "ranks")
    ranks = [torch.load(root / "ranks" / f"rank{r}.pt") for r in (0, 1)]
    threads = torch.get_num_threads()
    with torch.random.fork_rng():  # the worker seeds and sets threads: later tests see neither
        single = fsdp_worker.run(request.param, root / "one")
    torch.set_num_threads(threads)
    return {"mode": request.param, "root": root, "ranks": ranks, "single": single}


def _trained(single: dict[str, Any]) -> set[str]:
    return set(single["steps"][0]["grads"])


def assert_same_weights(got: dict[str, Any], single: dict[str, Any], steps: list[dict[str, Any]]) -> None:
    """Trained weights within Adam's amplified rounding; the others untouched, exactly."""
    for name, value in single.items():
        if name in steps[0]["grads"]:
            torch.testing.assert_close(got[name], value, rtol=0, atol=adam_atol(steps, name), msg=name)
        else:
            assert torch.equal(got[name], value), name


def test_two_sharded_ranks_make_the_one_process_update(runs: dict[str, Any]) -> None:
    single = runs["single"]
    assert not single["sharded"]  # one process: nothing to shard over
    first, second = single["steps"]
    for got in runs["ranks"]:
        assert got["sharded"]
        for name, want in first["grads"].items():  # the same weights: the same gradient, up to the sums' order
            assert_same_sums(got["steps"][0]["grads"][name], want, terms=first["tokens"])
        assert_same_weights(got["steps"][0]["params"], first["params"], [first])
        assert_same_weights(got["params"], single["params"], [first, second])
        # the second gradient is taken at weights already apart by Adam's amplified rounding:
        # compared through its norm, as the data-parallel test does, and the weights it made
        for a, b in zip(got["steps"], single["steps"], strict=True):
            assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
            assert a["loss"] == pytest.approx(b["loss"], rel=1e-4, abs=1e-6)
            assert a["tokens"] == b["tokens"]
        assert_same_sums(got["logprobs_before"], single["logprobs_before"], terms=32)  # the same weights
        torch.testing.assert_close(got["logprobs_after"], single["logprobs_after"], rtol=0, atol=LOGPROB_ATOL)
    moved = [n for n in _trained(single) if float((single["params"][n] - first["params"][n]).abs().max()) > 1e-4]
    assert len(moved) >= len(_trained(single)) // 2  # the second update did something: matching is not trivial


def test_each_rank_holds_about_half_of_the_weights_and_optimizer_state(runs: dict[str, Any]) -> None:
    one = runs["single"]["bytes"]
    for got in runs["ranks"]:
        assert got["bytes"] <= 0.6 * one, (got["bytes"], one)
    assert sum(got["bytes"] for got in runs["ranks"]) >= one  # all of it is somewhere


def test_a_sharded_checkpoint_resumes_on_two_ranks_and_loads_in_one_process(runs: dict[str, Any]) -> None:
    for got in runs["ranks"]:
        for name, value in got["params"].items():
            assert torch.equal(got["loaded"][name], value), name
            assert torch.equal(got["resumed"][name], got["continued"][name]), name  # optimizer state came back too
    threads = torch.get_num_threads()
    with torch.random.fork_rng():
        policy = fsdp_worker.build_policy(runs["mode"])
    torch.set_num_threads(threads)
    update = PolicyUpdate(policy, GRPOConfig(learning_rate=1e-2, lora=None))
    fsdp.load_sharded(runs["root"] / "ranks" / "ckpt", policy.model, update.optimizer)
    for name, value in fsdp_worker.params(policy).items():
        assert torch.equal(value, runs["ranks"][0]["params"][name]), name
    assert len(update.optimizer.state) == len(_trained(runs["single"]))  # with AdamW's moments


def test_the_export_gathered_from_the_shards_is_the_one_process_model(runs: dict[str, Any]) -> None:
    single, root = runs["single"], runs["root"]
    got, want = load_file(root / "ranks" / "export" / "model.safetensors"), \
        load_file(root / "one" / "export" / "model.safetensors")
    assert got.keys() == want.keys()
    steps = single["steps"]
    if runs["mode"] == "full":
        assert_same_weights(got, want, steps)
        return
    # LoRA: the LoRA files match within Adam's rounding, and the merged weights W + s·B·A
    # within what those differences make of B·A (r terms of |B|·ΔA + |A|·ΔB)
    lora = load_file(root / "ranks" / "lora" / "adapter_model.safetensors")
    lora_one = load_file(root / "one" / "lora" / "adapter_model.safetensors")
    assert lora.keys() == lora_one.keys() and lora
    for key, value in lora_one.items():
        name = key.replace(".weight", ".default.weight")
        torch.testing.assert_close(lora[key], value, rtol=0, atol=adam_atol(steps, name), msg=key)
    scale = fsdp_worker.LORA.alpha / fsdp_worker.LORA.r
    merged = 0
    for key, value in want.items():
        module = "base_model.model." + key.removesuffix(".weight")
        a_key, b_key = f"{module}.lora_A.default.weight", f"{module}.lora_B.default.weight"
        if a_key not in single["params"]:
            assert torch.equal(got[key], value), key
            continue
        a, b = single["params"][a_key], single["params"][b_key]
        atol = scale * fsdp_worker.LORA.r * (float(b.abs().max()) * adam_atol(steps, a_key)
                                              + float(a.abs().max()) * adam_atol(steps, b_key))
        rounding = 4 * torch.finfo(torch.float32).eps * float(value.abs().max())  # of the merge itself
        torch.testing.assert_close(got[key], value, rtol=0, atol=atol + rounding, msg=key)
        merged += 1
    assert merged == 2 * len(fsdp_worker.LORA.target_modules)  # q and v of both blocks


@pytest.fixture(scope="module")
def sft_runs(tmp_path_factory: Any) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("sft")
    _torchrun("sft", out)
    threads = torch.get_num_threads()
    with torch.random.fork_rng():
        single, bf16, untrained = fsdp_worker.run_sft(), fsdp_worker.run_bf16(), \
            fsdp_worker.params(fsdp_worker.build_policy("full"))
    torch.set_num_threads(threads)
    return {"ranks": [torch.load(out / f"rank{r}.pt") for r in (0, 1)], "single": single, "bf16": bf16,
            "untrained": untrained}


def test_the_sft_step_sharded_is_the_one_process_step(sft_runs: dict[str, Any]) -> None:
    single = sft_runs["single"]
    step = single["steps"][0]
    for got in sft_runs["ranks"]:
        assert got["sharded"] and not single["sharded"]
        for name, want in step["grads"].items():
            assert_same_sums(got["steps"][0]["grads"][name], want, terms=step["tokens"])
        assert_same_weights(got["params"], single["params"], single["steps"])
        assert got["loss"] == pytest.approx(single["loss"], rel=1e-5)
        assert got["grad_norm"] == pytest.approx(single["grad_norm"], rel=1e-4)


def test_a_bfloat16_update_keeps_float32_weights_and_steps_as_one_process(sft_runs: dict[str, Any]) -> None:
    one, untrained = sft_runs["bf16"]["params"], sft_runs["untrained"]
    step = sum(float((v - untrained[n]).abs().sum()) for n, v in one.items())
    assert step > 0
    for got in sft_runs["ranks"]:
        weights = got["bf16"]["params"]
        assert {v.dtype for v in weights.values()} == {torch.float32}  # master weights; FSDP casts a gathered copy
        # bf16 rounding flips Adam's sign on elements whose gradient is near 0 (|Δ| up to 2·lr
        # there), so the steps are compared in aggregate: 0.4 % of the step apart here
        apart = sum(float((weights[n] - v).abs().sum()) for n, v in one.items())
        assert apart <= 0.05 * step
