"""The trainer's numbers are the ones the ratio needs: the shared-prefix forward under
gradient checkpointing, π_prox / π_ref without dropout, float32 master weights for full
fine-tuning in bf16, and π_old recomputed when the engine computes in another dtype."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from tolerances import assert_same_sums  # noqa: E402

from agentbolt.adapters.samples import Sample
from agentbolt.algorithms.grpo.config import GRPOConfig
from agentbolt.algorithms.grpo.update import PolicyUpdate
from agentbolt.algorithms.sft.update import assistant_nll
from agentbolt.models import tiny_model
from agentbolt.training.batch import collate
from agentbolt.training.lora import LoraSettings
from agentbolt.training.policy import Policy

LORA = LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"])
PREFIX = list(range(3, 23))  # 20 shared tokens: a shared-prefix forward


def _rows() -> tuple[torch.Tensor, torch.Tensor]:
    tails = [[40, 41, 42, 43], [50, 51], [60, 61, 62]]
    T = len(PREFIX) + max(len(t) for t in tails)
    ids = torch.zeros((len(tails), T), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, tail in enumerate(tails):
        row = PREFIX + tail
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    return ids, mask


@pytest.mark.parametrize("lora", [True, False])
def test_the_shared_prefix_forward_works_under_gradient_checkpointing(lora: bool) -> None:
    model, tok = tiny_model(seed=2, vocab="bytes", hidden=32, n_layers=2)
    policy = Policy(model, tok, lora=LORA if lora else None, gradient_checkpointing=True)
    ids, mask = _rows()
    P = len(PREFIX) - 1
    shared, _ = policy.token_logprobs(ids, mask, shared_prefix=P)  # before the fix: AttributeError on the cache
    shared.masked_select(mask.bool()).sum().backward()
    grads = [p.grad.clone() for p in policy.trainable_parameters()]
    policy.model.zero_grad(set_to_none=True)
    full, _ = policy.token_logprobs(ids, mask)
    full[:, P + 1 :].masked_select(mask[:, P + 1 :].bool()).sum().backward()
    valid = mask.bool().clone()
    valid[:, : P + 1] = False
    torch.testing.assert_close(shared[valid], full[valid], rtol=1e-5, atol=1e-5)
    # a weight's gradient sums over every position, in another order with the prefix run once
    for got, want in zip(grads, (p.grad for p in policy.trainable_parameters()), strict=True):
        assert_same_sums(got, want, terms=ids.numel())


def test_sft_assistant_nll_works_under_gradient_checkpointing() -> None:
    model, tok = tiny_model(seed=2, vocab="bytes", hidden=32, n_layers=2)
    policy = Policy(model, tok, lora=LORA, gradient_checkpointing=True)
    ids, mask = _rows()
    labels = torch.where(mask.bool(), ids, torch.full_like(ids, -100))
    labels[:, : len(PREFIX)] = -100
    shared, n = assistant_nll(policy.model, ids, mask, labels, shared_prefix=len(PREFIX) - 1)
    whole, m = assistant_nll(policy.model, ids, mask, labels)
    assert n == m == 9
    torch.testing.assert_close(shared, whole, rtol=1e-5, atol=1e-5)


def _sample(rollout: str, ids: list[int], n_prompt: int, logprobs: torch.Tensor, version: int = 0) -> Sample:
    mask = [0] * n_prompt + [1] * (len(ids) - n_prompt)
    lps = [float(x) if m else 0.0 for x, m in zip(logprobs.tolist(), mask, strict=True)]
    return Sample(rollout, "a", ids, mask, lps, [version if m else None for m in mask], ["s"], 1.0 if rollout == "r1" else -1.0)


def test_proximal_and_reference_logprobs_are_computed_without_dropout() -> None:
    model, tok = tiny_model(seed=2, vocab="bytes", hidden=32, n_layers=2, attention_dropout=0.3)
    policy = Policy(model, tok, lora=LoraSettings(r=4, alpha=8, dropout=0.5, target_modules=["q_proj", "v_proj"]),
                    keep_reference=True)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(0))
    ids, mask = _rows()
    batch = collate([_sample(f"r{i}", ids[i][mask[i].bool()].tolist(), 20, torch.zeros(int(mask[i].sum())))
                     for i in range(3)], policy.pad_id)
    update = PolicyUpdate(policy, GRPOConfig(kl_coef=0.1), recompute_old=True)
    prox_a, ref_a = update._extras(batch, True, True)
    prox_b, ref_b = update._extras(batch, True, True)
    assert prox_a is not None and ref_a is not None
    torch.testing.assert_close(prox_a, prox_b, rtol=0, atol=0)  # before the fix: dropout noise, |Δ| ~ 0.1
    torch.testing.assert_close(ref_a, ref_b, rtol=0, atol=0)
    assert policy.model.training  # the training forward keeps its dropout


def test_full_fine_tuning_in_bf16_keeps_float32_master_weights() -> None:
    model, tok = tiny_model(seed=2, vocab="bytes", hidden=64, n_layers=2)
    policy = Policy(model, tok, lora=None, dtype="bfloat16")
    assert policy.dtype == torch.bfloat16
    assert {p.dtype for p in policy.model.parameters()} == {torch.float32}
    before = [p.detach().clone() for p in policy.trainable_parameters()]
    ids, mask = _rows()
    with torch.no_grad():
        lp = policy.token_logprobs(ids, mask)[0]
    samples = [_sample(f"r{i}", ids[i][mask[i].bool()].tolist(), 20, lp[i][mask[i].bool()]) for i in range(3)]
    PolicyUpdate(policy, GRPOConfig(learning_rate=1e-5, lora=None, max_grad_norm=None)).step(samples, current_version=0)
    changed = sum(int((p.detach() != b).sum()) for p, b in zip(policy.trainable_parameters(), before, strict=True))
    total = sum(b.numel() for b in before)
    touched = sum(int(p.grad is not None) for p in policy.trainable_parameters())
    assert touched == 0  # gradients are freed after the step
    assert changed / total > 0.5, f"only {changed / total:.1%} of the weights moved"  # bf16 weights: most stay put


def test_an_engine_in_another_dtype_gets_pi_old_recomputed_and_the_first_ratio_is_one() -> None:
    model, tok = tiny_model(seed=2, vocab="bytes", hidden=64, n_layers=2)
    engine_model = model  # the engine: float32
    policy = Policy(tiny_model(seed=2, vocab="bytes", hidden=64, n_layers=2)[0], tok, lora=LORA, dtype="bfloat16")
    assert policy.dtype == torch.bfloat16
    ids, mask = _rows()
    with torch.no_grad():  # the engine's sampling-time logprobs, in float32
        served = Policy(engine_model, tok, dtype="float32").token_logprobs(ids, mask)[0]
    samples = [_sample(f"r{i}", ids[i][mask[i].bool()].tolist(), 20, served[i][mask[i].bool()]) for i in range(3)]
    cfg = GRPOConfig(learning_rate=1e-3)
    recomputed = PolicyUpdate(policy, cfg, recompute_old=True).step(samples, current_version=0)
    assert recomputed.ratio_mean == pytest.approx(1.0, abs=1e-4)
    assert recomputed.clip_fraction == 0.0
    assert recomputed.importance_weight_mean != pytest.approx(1.0, abs=1e-4)  # the bf16/fp32 gap, weighed
    engine_old = PolicyUpdate(policy, cfg, recompute_old=False).step(samples, current_version=0)
    assert engine_old.ratio_mean != pytest.approx(1.0, abs=1e-4)  # what GRPO did before: off by the dtype gap
