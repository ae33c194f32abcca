"""The GRPO loss: clipped ratio, truncated importance weights, KL, per-rollout normalisation."""

from __future__ import annotations

import math

import pytest
import torch

from agentbolt.algorithms.grpo import grpo_loss, per_rollout_mean


def t(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def logs(*probs: float) -> list[float]:
    return [math.log(p) for p in probs]


def test_clipped_ratio_with_a_positive_advantage() -> None:
    # π_old = 0.5 for every token; π_θ = 0.75, 0.5, 0.25 → ρ = 1.5, 1.0, 0.5.  A = +1, ε = 0.2
    # min(ρA, clip(ρ, 0.8, 1.2)A) = min(1.5, 1.2) = 1.2 | min(1, 1) = 1 | min(0.5, 0.8) = 0.5
    # loss = -(1.2 + 1 + 0.5)/3 = -0.9; ρ outside [0.8, 1.2]: tokens 1 and 3 (2/3), but the
    # clip is active (the gradient cut) on token 1 only: ρ < 0.8 with A > 0 keeps ρA → clip fraction 1/3
    logp = t([logs(0.75, 0.5, 0.25)]).requires_grad_()
    out = grpo_loss(logp, t([logs(0.5, 0.5, 0.5)]), t([[1.0]])[0], t([[1, 1, 1]]), torch.tensor([0]))
    assert out.loss.item() == pytest.approx(-0.9)
    assert out.clip_fraction == pytest.approx(1 / 3)  # verl's pg_clipfrac, TRL's clip_ratio
    assert out.ratio_outside_fraction == pytest.approx(2 / 3)
    assert out.ratio_mean == pytest.approx((1.5 + 1.0 + 0.5) / 3) and out.importance_weight_mean == 1.0
    out.loss.backward()
    # d/dlogπ of -ρ/3 = -ρ/3 where unclipped; the clipped token 1 gets no gradient
    assert logp.grad[0].tolist() == pytest.approx([0.0, -1 / 3, -0.5 / 3])


def test_clipped_ratio_with_a_negative_advantage() -> None:
    # same ρ = 1.5, 1.0, 0.5 with A = -1:
    # min(-1.5, -1.2) = -1.5 | -1 | min(-0.5, -0.8) = -0.8 → loss = (1.5 + 1 + 0.8)/3 = 1.1
    out = grpo_loss(t([logs(0.75, 0.5, 0.25)]), t([logs(0.5, 0.5, 0.5)]), torch.tensor([-1.0]),
                    t([[1, 1, 1]]), torch.tensor([0]))
    assert out.loss.item() == pytest.approx(1.1)
    assert out.clip_fraction == pytest.approx(1 / 3)  # token 3: ρ = 0.5 < 0.8 with A < 0 is held at 0.8


def test_the_dual_clip_bounds_a_negative_advantage_when_the_ratio_runs_away() -> None:
    # π_old = 0.1, π_θ = 0.5 → ρ = 5; A = -1: min(-5, -1.2) = -5, and with c = 3: max(-5, -3) = -3
    logp = t([logs(0.5, 0.5)]).requires_grad_()
    args = (t([logs(0.1, 0.45)]), torch.tensor([-1.0]), t([[1, 1]]), torch.tensor([0]))
    plain = grpo_loss(logp, *args)
    assert plain.loss.item() == pytest.approx((5.0 + 0.5 / 0.45) / 2)
    dual = grpo_loss(logp, *args, clip_ratio_c=3.0)
    assert dual.loss.item() == pytest.approx((3.0 + 0.5 / 0.45) / 2)  # token 2 (ρ ≈ 1.11) unchanged
    assert dual.dual_clip_fraction == pytest.approx(1 / 2) and plain.dual_clip_fraction == 0.0
    dual.loss.backward()
    assert logp.grad[0, 0].item() == 0.0  # the held token gets no gradient
    with pytest.raises(ValueError, match="clip_ratio_c must be > 1"):
        grpo_loss(logp, *args, clip_ratio_c=0.5)


def test_rollout_sum_weighs_every_token_alike_dr_grpo() -> None:
    # ρ = 1; rollout 0 has 4 trained tokens with A = -1, rollout 1 has 1 with A = +1.
    # rollout_token_mean: ((4·1)/4 + (−1)/1)/2 = 0 — the long wrong rollout is pushed down 1/4 per token;
    # rollout_sum with L = 4: (4/4 − 1/4)/2 = 0.375 — each token of either is pushed by 1/(R·L)
    mask = t([[1, 1, 1, 1], [1, 0, 0, 0]])
    logp = torch.full((2, 4), math.log(0.5), dtype=torch.float64, requires_grad=True)
    args = (logp.detach().clone(), torch.tensor([-1.0, 1.0]), mask, torch.tensor([0, 1]))
    assert grpo_loss(logp, *args).loss.item() == pytest.approx(0.0)
    out = grpo_loss(logp, *args, loss_norm="rollout_sum", norm_tokens=4)
    assert out.loss.item() == pytest.approx(0.375)
    out.loss.backward()
    grad = logp.grad * mask
    assert grad[0, 0].item() == pytest.approx(1 / 8) and grad[1, 0].item() == pytest.approx(-1 / 8)


@pytest.mark.parametrize("loss_norm", ["rollout_token_mean", "rollout_sum"])
def test_the_parts_of_a_split_rollout_add_up_to_the_whole(loss_norm: str) -> None:
    # rollout 0 = samples 0, 1, 2 (3 + 2 + 1 tokens); rollout 1 = sample 3. Split after sample 1.
    g = torch.Generator().manual_seed(0)
    logp = torch.randn(4, 3, generator=g, dtype=torch.float64).clamp(max=-0.1)
    old = logp + 0.1 * torch.randn(4, 3, generator=g, dtype=torch.float64)
    mask, A, index = t([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 0]]), torch.tensor([0.5, 0.5, 0.5, -1.0]), torch.tensor(
        [0, 0, 0, 1])
    kw = {"loss_norm": loss_norm, "norm_tokens": 3.0}
    whole = grpo_loss(logp, old, A, mask, index, **kw).loss
    tokens = torch.tensor([6.0, 6.0, 6.0, 2.0])  # |T_r| of each sample's rollout
    parts = [grpo_loss(logp[rows], old[rows], A[rows], mask[rows], index[rows], rollout_tokens=tokens[rows],
                       num_rollouts=2, **kw).loss for rows in ([0, 1], [2, 3])]
    assert (parts[0] + parts[1]).item() == pytest.approx(whole.item(), rel=1e-12)


def test_asymmetric_clip_range() -> None:
    # ρ = 1.5 with ε_high = 0.28 → clip at 1.28; A = +1 → loss = -1.28
    out = grpo_loss(t([logs(0.75)]), t([logs(0.5)]), torch.tensor([1.0]), t([[1]]), torch.tensor([0]), eps_high=0.28)
    assert out.loss.item() == pytest.approx(-1.28)


def test_truncated_importance_weights_when_the_policy_moved() -> None:
    # behaviour (sampling-time) π = 0.25, 0.5; proximal (trainer, start of update) π = 0.5, 0.25
    # w = min(π_prox/π_behav, C=1.5) = min(2, 1.5) = 1.5 | min(0.5, 1.5) = 0.5
    # π_θ = π_prox → ρ = 1; A = +1 → loss = -(1.5·1 + 0.5·1)/2 = -1.0; mean weight (1.5+0.5)/2 = 1.0
    prox = t([logs(0.5, 0.25)])
    behav = t([logs(0.25, 0.5)])
    args = (prox.clone(), behav, torch.tensor([1.0]), t([[1, 1]]), torch.tensor([0]))
    out = grpo_loss(*args, prox_logprobs=prox, is_cap=1.5)
    assert out.loss.item() == pytest.approx(-1.0)
    assert out.importance_weight_mean == pytest.approx(1.0) and out.clip_fraction == 0.0
    # with a cap that does not bite: w = 2, 0.5 → loss = -(2 + 0.5)/2 = -1.25
    assert grpo_loss(*args, prox_logprobs=prox, is_cap=10.0).loss.item() == pytest.approx(-1.25)


def test_the_ratio_is_clipped_around_the_proximal_policy() -> None:
    # π_behav = 0.25, π_prox = 0.5, π_θ = 0.75 → ρ = 0.75/0.5 = 1.5 (not 3), clipped to 1.2;
    # w = min(0.5/0.25, 2) = 2 → loss = -2 · 1.2 = -2.4
    out = grpo_loss(t([logs(0.75)]), t([logs(0.25)]), torch.tensor([1.0]), t([[1]]), torch.tensor([0]),
                    prox_logprobs=t([logs(0.5)]), is_cap=2.0)
    assert out.loss.item() == pytest.approx(-2.4)


def test_an_agent_with_five_calls_weighs_the_same_as_one_with_one() -> None:
    # rollout 0: 5 samples (5 calls) with 1..5 trained tokens = 15 tokens, A = +1
    # rollout 1: 1 sample with 2 trained tokens, A = -1.  ρ = 1 everywhere (θ = old).
    # per rollout: ℓ̄_0 = -1, ℓ̄_1 = +1 → loss = (-1 + 1)/2 = 0
    # (a token mean would give (-15 + 2)/17 ≈ -0.765: the chatty agent would dominate)
    mask = t([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    logp = torch.full((6, 5), math.log(0.5), dtype=torch.float64, requires_grad=True)
    A = torch.tensor([1.0, 1, 1, 1, 1, -1])
    out = grpo_loss(logp, logp.detach().clone(), A, mask, torch.tensor([0, 0, 0, 0, 0, 1]))
    assert out.loss.item() == pytest.approx(0.0) and out.num_rollouts == 2
    out.loss.backward()
    # each token of rollout 0 gets -1/(2·15); each of rollout 1 gets +1/(2·2): both rollouts pull 1/2 in total
    g = logp.grad * mask
    assert g[:5].tolist()[4] == pytest.approx([-1 / 30] * 5)
    assert g[5, :2].tolist() == pytest.approx([0.25, 0.25])
    assert g[:5].sum().item() == pytest.approx(-0.5) and g[5].sum().item() == pytest.approx(0.5)
    assert g[mask == 0].abs().sum().item() == 0.0  # padding and context never get gradient


def test_kl_to_a_reference_with_the_k3_estimator() -> None:
    # q = log π_ref - log π_θ = log 2 on token 1, 0 on token 2:
    # k3 = e^q - q - 1 = 2 - 0.693147 - 1 = 0.306853 | 0 → mean KL = 0.153426
    # A = 0 → loss = β · mean KL = 0.1 · 0.153426 = 0.0153426
    logp = t([logs(0.25, 0.5)])
    out = grpo_loss(logp, logp, torch.tensor([0.0]), t([[1, 1]]), torch.tensor([0]),
                    ref_logprobs=t([logs(0.5, 0.5)]), kl_coef=0.1)
    assert out.kl == pytest.approx((1 - math.log(2)) / 2)
    assert out.loss.item() == pytest.approx(0.1 * (1 - math.log(2)) / 2)


def test_entropy_is_logged_over_trained_tokens_only() -> None:
    logp = t([logs(0.5, 0.5, 0.5)])
    out = grpo_loss(logp, logp, torch.tensor([1.0]), t([[0, 1, 1]]), torch.tensor([0]), entropy=t([[9.0, 1.0, 2.0]]))
    assert out.entropy == pytest.approx(1.5) and out.kl is None


def test_per_rollout_mean_skips_rollouts_without_trained_tokens() -> None:
    # rollout 0: mean(2, 4) = 3; rollout 1: no masked token (skipped); rollout 2: 6 → (3 + 6)/2 = 4.5
    values = t([[2.0, 4.0], [100.0, 100.0], [6.0, 100.0]])
    mask = t([[1, 1], [0, 0], [1, 0]])
    assert per_rollout_mean(values, mask, torch.tensor([0, 1, 2])).item() == pytest.approx(4.5)


def test_mismatched_shapes_say_what_is_expected() -> None:
    logp = t([logs(0.5, 0.5)])
    with pytest.raises(ValueError, match=r"must be \[N\]"):
        grpo_loss(logp, logp, torch.tensor([1.0, 1.0]), t([[1, 1]]), torch.tensor([0]))
    with pytest.raises(ValueError, match=r"must all be \[N, T\]"):
        grpo_loss(logp, logp, torch.tensor([1.0]), t([[1]]), torch.tensor([0]))


def test_the_loss_options_are_config_fields_with_what_to_set() -> None:
    from agentbolt.algorithms.grpo import GRPOConfig

    cfg = GRPOConfig()
    assert (cfg.loss_norm, cfg.clip_ratio_c, cfg.loss_norm_tokens) == ("rollout_token_mean", None, None)
    assert GRPOConfig(loss_norm="rollout_sum", loss_norm_tokens=512).loss_norm_tokens == 512
    with pytest.raises(ValueError, match="set loss_norm_tokens"):
        GRPOConfig(loss_norm="rollout_sum")
    with pytest.raises(ValueError):
        GRPOConfig(clip_ratio_c=0.9)
