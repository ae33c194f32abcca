"""Data parallelism under torchrun (gloo, 2 CPU processes): the trainer's own code,
unchanged, gives the one-process result.

* one update: each rank trains on its share of the rollouts and the summed gradients
  make exactly the one-process step (same gradient norm, loss and weights);
* the whole GRPO loop: rank 0 samples through the gateway, rank 1 follows; both end
  with the same weights, and rank 0's engine serves them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from tolerances import assert_same_sums, reduction_atol
from torchrun import torchrun  # noqa: E402

from algorithms.grpo import dp_worker

WORKER = Path(dp_worker.__file__)


def _torchrun(mode: str, out: Path, timeout: float) -> None:
    torchrun(WORKER, mode, str(out), timeout=timeout)


def adam_atol(stats: list[dict[str, Any]], name: str) -> float:
    """How far a weight may move apart after Adam steps on gradients equal up to rounding.

    Adam steps each element by ``lr · m̂/(√v̂ + ε)``, close to ``lr · g/(|g| + ε)`` per step.
    Its derivative in ``g`` is at most ``1/ε`` (at ``g = 0``): a gradient element off by
    ``δ`` (the reordered sum's rounding, ``reduction_atol``) moves the step by at most
    ``lr · δ/ε``, and never by more than the whole step's range, ``2·lr``. Elements whose
    gradient is near ε are where two exact runs part most (one element of 8,288 by
    1.1e-5 here, on a different CPU than the one this passed on with ``atol=1e-5``)."""
    total = 0.0
    for step in stats:
        delta = reduction_atol(step["grads"][name], step["tokens"])
        total += step["lr"] * min(delta / step["adam_eps"], 2.0)
    return total


@pytest.mark.slow
def test_two_ranks_make_the_one_process_update(tmp_path: Path) -> None:
    _torchrun("update", tmp_path, timeout=120)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]

    policy = dp_worker.build_policy()
    untrained = dp_worker.params(policy)
    single_stats = dp_worker.run_updates(policy)
    single = dp_worker.params(policy)

    for got in ranks:
        for a, b in zip(got["stats"], single_stats, strict=True):  # the gradient each step was taken on
            for name, want in b["grads"].items():
                assert_same_sums(a["grads"][name], want, terms=b["tokens"])
        for name, value in single.items():
            torch.testing.assert_close(got["params"][name], value, rtol=0, atol=adam_atol(single_stats, name), msg=name)
        for a, b in zip(got["stats"], single_stats, strict=True):
            assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)  # scale-sensitive, unlike Adam's step
            assert a["loss"] == pytest.approx(b["loss"], rel=1e-4, abs=1e-6)
            assert (a["tokens"], a["rollouts"], a["samples"]) == (b["tokens"], 5, 8)
    assert [s["stale"] for s in single_stats] == [0, 8]
    moved = sum(float((single[n] - untrained[n]).abs().max()) > 1e-3 for n in single)
    assert moved >= len(single) // 2  # the update did something: matching is not trivial


@pytest.mark.slow
def test_grpo_loop_under_torchrun_keeps_every_rank_and_the_engine_in_step(tmp_path: Path) -> None:
    _torchrun("fit", tmp_path, timeout=240)
    lead, follower = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))

    assert lead["steps"] == 3
    assert lead["policy_version"] == lead["served_version"] >= 1
    assert lead["trainable"].keys() == follower["trainable"].keys()
    assert any(float(v.abs().max()) > 0 for k, v in lead["trainable"].items() if "lora_B" in k)  # it trained
    for key, value in lead["trainable"].items():
        torch.testing.assert_close(follower["trainable"][key], value, rtol=1e-4, atol=1e-5, msg=key)
    torch.testing.assert_close(follower["policy_logits"], lead["policy_logits"], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(lead["engine_logits"], lead["policy_logits"], rtol=1e-4, atol=1e-4)  # served
