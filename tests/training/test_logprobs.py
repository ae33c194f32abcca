"""Token logprobs computed only where wanted, with each task's prompt run once, are the
full forward's: same values at the wanted positions, same gradients."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from tolerances import assert_same_sums  # noqa: E402

from agentbolt.adapters.samples import Sample  # noqa: E402
from agentbolt.models import tiny_model  # noqa: E402
from agentbolt.training.batch import collate, prefix_groups  # noqa: E402
from agentbolt.training.logprobs import chosen_logprobs  # noqa: E402
from agentbolt.training.lora import LoraSettings  # noqa: E402
from agentbolt.training.policy import Policy  # noqa: E402

LORA = LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"])


def _policy(lora: bool) -> Policy:
    model, tok = tiny_model(seed=3, vocab="bytes", hidden=32, n_layers=2)
    return Policy(model, tok, lora=LORA if lora else None)


def _soft_capped_policy() -> Policy:
    """A tiny Gemma 2 (final-logit soft-capping: its logits are more than lm_head(h)), built from a config."""
    from transformers import Gemma2Config, Gemma2ForCausalLM

    from agentbolt.models import byte_tokenizer

    tok = byte_tokenizer()
    config = Gemma2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
                          final_logit_softcapping=3.0, sliding_window=64, pad_token_id=tok.pad_token_id,
                          bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        model = Gemma2ForCausalLM(config)
    model.eval()
    return Policy(model, tok, lora=LORA)


def _sample(rollout: str, prompt: list[int], response: list[int]) -> Sample:
    ids = prompt + response
    mask = [0] * len(prompt) + [1] * len(response)
    return Sample(rollout, "a", ids, mask, [0.0] * len(ids), [0 if m else None for m in mask], ["s"], 1.0)


def _two_tasks() -> list[Sample]:
    """Two tasks' groups in one micro-batch: each group's prompt is its own from the first token."""
    a, b = list(range(40, 70)), list(range(100, 124))  # 30 and 24 prompt tokens
    return [_sample("r1", a, [5, 6, 7]), _sample("r2", a, [8, 9]), _sample("r3", b, [10, 11, 12, 13]),
            _sample("r4", b, [14]), _sample("r5", a, [15, 16])]


def _logprobs_and_grads(policy: Policy, batch, **kw) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    policy.model.zero_grad(set_to_none=True)
    lp, ent = policy.token_logprobs(batch.input_ids, batch.attention_mask, with_entropy=True, **kw)
    (lp * batch.loss_mask * torch.arange(1.0, lp.shape[1] + 1)).sum().backward()
    grads = [p.grad.clone() for p in policy.trainable_parameters()]
    return (lp * batch.loss_mask).detach(), (ent * batch.loss_mask), grads


def test_each_tasks_prompt_becomes_a_prefix_group_cut_to_the_shortest() -> None:
    P, group = prefix_groups(_two_tasks())
    assert P == 23  # the shorter prompt (24 tokens) less the one kept in every row's own part
    assert group == [0, 0, 1, 1, 0]
    assert prefix_groups(_two_tasks()[:2])[1] is None  # one task: the prefix every row shares


@pytest.mark.parametrize("lora", [True, False])
def test_trained_positions_only_and_per_task_prefixes_match_the_full_forward(lora: bool) -> None:
    policy = _policy(lora)
    batch = collate(_two_tasks(), policy.pad_id)
    assert batch.shared_prefix == 23 and batch.prefix_group is not None
    full, full_ent, full_grads = _logprobs_and_grads(policy, batch)
    fast, fast_ent, fast_grads = _logprobs_and_grads(policy, batch, shared_prefix=batch.shared_prefix,
                                                     prefix_group=batch.prefix_group, positions=batch.loss_mask)
    torch.testing.assert_close(fast, full, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fast_ent, full_ent, rtol=1e-5, atol=1e-5)
    # a weight's gradient sums over every position of the batch, in another order on each path
    for got, want in zip(fast_grads, full_grads, strict=True):
        assert_same_sums(got, want, terms=batch.input_ids.numel())


def test_a_soft_capped_model_conditions_each_task_on_its_own_prompt() -> None:
    """Gemma 2 takes the full-logits path; its rows still continue from their own group's
    prompt (before the fix every row continued from row 0's: |Δ| up to 0.43 per token here)."""
    policy = _soft_capped_policy()
    from agentbolt.training.logprobs import split_head

    assert split_head(policy.model) is None  # the full-logits path
    batch = collate(_two_tasks(), policy.pad_id)
    assert batch.prefix_group is not None and batch.prefix_group.tolist() == [0, 0, 1, 1, 0]
    full, full_ent, full_grads = _logprobs_and_grads(policy, batch)
    fast, fast_ent, fast_grads = _logprobs_and_grads(policy, batch, shared_prefix=batch.shared_prefix,
                                                     prefix_group=batch.prefix_group, positions=batch.loss_mask)
    torch.testing.assert_close(fast, full, rtol=1e-5, atol=1e-5)  # float32, 2 layers: rounding only
    torch.testing.assert_close(fast_ent, full_ent, rtol=1e-5, atol=1e-5)
    for got, want in zip(fast_grads, full_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def test_untrained_positions_are_zero_and_not_computed() -> None:
    policy = _policy(True)
    batch = collate(_two_tasks(), policy.pad_id)
    with torch.no_grad():
        lp, _ = policy.token_logprobs(batch.input_ids, batch.attention_mask, positions=batch.loss_mask)
    assert bool((lp[batch.loss_mask == 0] == 0).all())
    assert bool((lp[batch.loss_mask == 1] < 0).all())


def test_the_chosen_logprob_gradient_is_that_of_log_softmax() -> None:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 11, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 11, (6,), generator=g)
    weights = torch.randn(6, generator=g, dtype=torch.float64)
    lp, ent = chosen_logprobs(logits, targets, with_entropy=True)
    (grad,) = torch.autograd.grad((lp * weights).sum(), logits)
    ref_lp = torch.log_softmax(logits, -1).gather(-1, targets[:, None]).squeeze(-1)
    (ref_grad,) = torch.autograd.grad((ref_lp * weights).sum(), logits)
    p = torch.softmax(logits, -1)
    torch.testing.assert_close(lp, ref_lp)
    torch.testing.assert_close(grad, ref_grad)
    assert ent is not None
    torch.testing.assert_close(ent, -(p * p.log()).sum(-1).detach())
