"""The GRPO update: micro-batching adds up to the whole-batch gradient, a positive
advantage raises the logprob of the trained tokens, and stale samples get proximal
logprobs."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from tolerances import assert_same_sums  # noqa: E402

from agentbolt.algorithms.grpo import Sample  # noqa: E402
from agentbolt.algorithms.grpo.config import GRPOConfig  # noqa: E402
from agentbolt.algorithms.grpo.update import PolicyUpdate  # noqa: E402
from agentbolt.models import tiny_model  # noqa: E402
from agentbolt.training.lora import LoraSettings  # noqa: E402
from agentbolt.training.policy import Policy  # noqa: E402


def _policy(lora: bool = True) -> Policy:
    model, tok = tiny_model(seed=1, vocab="bytes", hidden=32, n_layers=1)
    settings = LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]) if lora else None
    return Policy(model, tok, lora=settings)


def _sample(policy: Policy, rollout: str, prompt: list[int], response: list[int], advantage: float,
            version: int | None = 0) -> Sample:
    ids = prompt + response
    with torch.no_grad():
        lp, _ = policy.token_logprobs(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long))
    mask = [0] * len(prompt) + [1] * len(response)
    lps = [float(x) if m else 0.0 for x, m in zip(lp[0].tolist(), mask, strict=True)]
    return Sample(rollout, "a", ids, mask, lps, [version if m else None for m in mask], ["s"], advantage)


def _batch(policy: Policy) -> list[Sample]:
    return [
        _sample(policy, "r1", [5, 6, 7], [8, 9], 1.0),
        _sample(policy, "r1", [5, 6, 7, 8, 9, 10], [11, 12, 13], 1.0),
        _sample(policy, "r2", [20, 21], [22], -0.5),
        _sample(policy, "r3", [30, 31, 32, 33], [34, 35, 36, 37], -0.5),
    ]


def _trained(policy: Policy) -> list[torch.Tensor]:
    return [p.detach().clone() for p in policy.trainable_parameters()]


@pytest.mark.parametrize("lora", [True, False])
def test_micro_batches_add_up_to_the_whole_batch_update(lora: bool) -> None:
    base = _policy(lora)
    samples = _batch(base)
    results = []
    for budget in (10_000, 1):  # one micro-batch vs one rollout per micro-batch
        policy = copy.deepcopy(base)
        cfg = GRPOConfig(learning_rate=1e-2, micro_batch_tokens=budget, max_grad_norm=None, lora=None)
        stats = PolicyUpdate(policy, cfg).step(samples, current_version=0)
        results.append((_trained(policy), stats))
    (a, sa), (b, sb) = results
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-3, atol=1e-4)  # Adam steps are ~lr = 1e-2
    assert sa.loss == pytest.approx(sb.loss, rel=1e-5, abs=1e-6)  # the loss is ~0 here: float sums differ by ~1e-8
    assert sa.num_rollouts == 3 and sa.num_samples == 4 and sa.num_trained_tokens == 10


def test_a_positive_advantage_raises_the_trained_tokens_logprob() -> None:
    policy = _policy()
    good = _sample(policy, "good", [1, 2, 3], [4, 5], 1.0)
    bad = _sample(policy, "bad", [1, 2, 3], [6, 7], -1.0)
    update = PolicyUpdate(policy, GRPOConfig(learning_rate=5e-2, max_grad_norm=None))
    for _ in range(5):
        stats = update.step([good, bad], current_version=0)
    after_good = _sample(policy, "x", [1, 2, 3], [4, 5], 0.0)
    after_bad = _sample(policy, "x", [1, 2, 3], [6, 7], 0.0)
    assert sum(after_good.logprobs) > sum(good.logprobs)
    assert sum(after_bad.logprobs) < sum(bad.logprobs)
    assert stats.ratio_mean != 1.0 and 0.0 <= stats.clip_fraction <= 1.0
    assert stats.entropy is not None and stats.entropy > 0


def test_fresh_samples_start_at_ratio_one_and_no_clipping() -> None:
    policy = _policy()
    stats = PolicyUpdate(policy, GRPOConfig(learning_rate=1e-3)).step(_batch(policy), current_version=0)
    assert stats.ratio_mean == pytest.approx(1.0, abs=1e-4)
    assert stats.clip_fraction == 0.0
    assert stats.importance_weight_mean == pytest.approx(1.0)
    assert stats.stale_samples == 0


def test_stale_samples_are_importance_weighted_against_the_current_policy() -> None:
    policy = _policy()
    samples = _batch(policy)
    update = PolicyUpdate(policy, GRPOConfig(learning_rate=5e-2, max_grad_norm=None))
    update.step(samples, current_version=0)  # the policy moves; the samples are now one version old
    stats = update.step(samples, current_version=1)
    assert stats.stale_samples == 4
    assert stats.ratio_mean == pytest.approx(1.0, abs=1e-4)  # clipped around π_prox, which is π_θ now
    assert stats.importance_weight_mean != pytest.approx(1.0, abs=1e-4)


def test_kl_to_the_reference_is_zero_before_training_and_grows_after() -> None:
    policy = _policy()
    samples = _batch(policy)
    update = PolicyUpdate(policy, GRPOConfig(learning_rate=5e-2, kl_coef=0.1, max_grad_norm=None))
    first = update.step(samples, current_version=0)
    second = update.step(samples, current_version=0)
    assert first.kl == pytest.approx(0.0, abs=1e-6)
    assert second.kl is not None and second.kl > 1e-6


def test_samples_without_trained_tokens_are_refused() -> None:
    policy = _policy()
    empty = Sample("r", "a", [1, 2], [0, 0], [0.0, 0.0], [None, None], ["s"], 1.0)
    with pytest.raises(ValueError, match="no sample has a trained token"):
        PolicyUpdate(policy, GRPOConfig()).step([empty])


def test_engine_update_carries_the_lora_and_its_scale() -> None:
    policy = _policy()
    update = policy.engine_update()
    assert update["lora_scale"] == pytest.approx(2.0)
    assert update["lora"] and all(".lora_" in k for k in update["lora"])
    full = _policy(lora=False).engine_update()
    assert "state_dict" in full and "model.embed_tokens.weight" in full["state_dict"]


def _group(policy: Policy, prompt_len: int = 24) -> list[Sample]:
    prompt = list(range(40, 40 + prompt_len))
    return [
        _sample(policy, "g1", prompt, [7, 8, 9], 1.0),
        _sample(policy, "g2", prompt, [7, 10], -0.5),
        _sample(policy, "g3", prompt + [3, 3, 3, 3], [11, 12, 13, 14], -0.5),
    ]


@pytest.mark.parametrize("lora", [True, False])
def test_a_shared_prompt_goes_through_the_model_once_with_the_same_logprobs_and_gradients(lora: bool) -> None:
    from agentbolt.training.batch import collate, shared_prefix

    policy = _policy(lora)
    samples = _group(policy)
    assert shared_prefix(samples) == 23  # 24 common prompt tokens; the last one stays in every row's own part
    batch = collate(samples, policy.pad_id)
    grads = []
    for P in (0, batch.shared_prefix):
        policy.model.zero_grad()
        lp, ent = policy.token_logprobs(batch.input_ids, batch.attention_mask, with_entropy=True, shared_prefix=P)
        ((lp * batch.loss_mask).sum() + 0.0).backward()
        grads.append([p.grad.clone() for p in policy.trainable_parameters()])
        masked = (lp * batch.loss_mask).detach()
        if P == 0:
            reference = masked
        else:
            torch.testing.assert_close(masked, reference, rtol=1e-4, atol=1e-5)
    for a, b in zip(*grads, strict=True):  # sums over the batch's positions, reordered by the shared prefix
        assert_same_sums(a, b, terms=batch.input_ids.numel())


def test_no_shared_prefix_when_prompts_differ_early_or_a_row_is_alone() -> None:
    from agentbolt.training.batch import shared_prefix

    policy = _policy()
    assert shared_prefix(_group(policy)[:1]) == 0
    assert shared_prefix(_batch(policy)) == 0


def test_export_writes_a_hugging_face_model_with_the_lora_merged(tmp_path) -> None:
    from transformers import AutoModelForCausalLM

    policy = _policy()
    samples = _batch(policy)
    PolicyUpdate(policy, GRPOConfig(learning_rate=5e-2, max_grad_norm=None)).step(samples, current_version=0)
    out = policy.export(tmp_path / "model")
    loaded = AutoModelForCausalLM.from_pretrained(out).eval()
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        mine = policy.model(input_ids=ids).logits
        theirs = loaded(input_ids=ids).logits
        base = policy.reference_logprobs(ids, torch.ones_like(ids))
    torch.testing.assert_close(theirs, mine, rtol=1e-4, atol=1e-5)
    assert not torch.allclose(base, policy.token_logprobs(ids, torch.ones_like(ids))[0].detach())  # it did train
    assert (out / "tokenizer.json").is_file() and not (out / "adapter_config.json").exists()


def _long_rollout(policy: Policy) -> list[Sample]:
    """One agent's 4 calls (4 samples, 44 tokens padded to 4 × 13) next to two short rollouts."""
    calls = [_sample(policy, "long", list(range(40, 40 + 3 * k)), [60 + k, 61 + k, 62 + k, 63 + k], -1.0)
             for k in range(1, 5)]
    return [*calls, _sample(policy, "short", [5, 6, 7], [8], 1.0), _sample(policy, "tiny", [9], [10, 11], 0.5)]


def _gradients(policy: Policy, samples: list[Sample], budget: int) -> tuple[list[torch.Tensor], int]:
    from agentbolt.algorithms.grpo.loss import grpo_loss
    from agentbolt.training.batch import collate, micro_batches, trained_tokens

    policy.model.zero_grad(set_to_none=True)
    groups = micro_batches(samples, budget)
    for mb in groups:
        b = collate(mb, policy.pad_id, trained_tokens(samples))
        lp, _ = policy.token_logprobs(b.input_ids, b.attention_mask)
        out = grpo_loss(lp, b.old_logprobs + 0.05 * b.loss_mask, b.advantages, b.loss_mask, b.rollout_index,
                        rollout_tokens=b.rollout_tokens, num_rollouts=3)
        out.loss.backward()
    return [p.grad.detach().clone() for p in policy.trainable_parameters()], len(groups)


def test_a_rollout_over_the_token_budget_is_split_and_the_gradient_does_not_change() -> None:
    policy = _policy()
    samples = _long_rollout(policy)
    whole, n_whole = _gradients(policy, samples, 10_000)
    split, n_split = _gradients(policy, samples, 30)  # "long" is 52 padded tokens: split between its samples
    assert n_whole == 1 and n_split == 4
    for got, want in zip(split, whole, strict=True):  # float32 sums in another order: rounding only
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


def test_micro_batches_keep_rollouts_whole_when_they_fit_and_split_only_between_samples() -> None:
    from agentbolt.training.batch import micro_batches

    samples = _long_rollout(_policy())
    parts = micro_batches(samples, 30)
    assert [[s.rollout_id for s in p] for p in parts] == [["long", "long"], ["long"], ["long"], ["short", "tiny"]]
    assert all(len(p) * max(len(s.token_ids) for s in p) <= 30 for p in parts)
    assert [[s.rollout_id for s in p] for p in micro_batches(samples, 10_000)] == [[s.rollout_id for s in samples]]
