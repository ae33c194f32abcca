"""Prefix groups across the samples of one rollout: when a compacted history starts a new
sample, the tokens it shares with the rollout's earlier sample go through the model once
— chosen even beside other tasks' rows — with the same loss gradient as computing each
sample on its own."""

from __future__ import annotations

from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from adapters.test_samples import call  # noqa: E402
from tolerances import assert_same_sums  # noqa: E402

from agentbolt.adapters import extract_model_calls  # noqa: E402
from agentbolt.adapters.samples import Sample, build_samples  # noqa: E402
from agentbolt.algorithms.grpo.loss import grpo_loss  # noqa: E402
from agentbolt.models import tiny_model  # noqa: E402
from agentbolt.training.batch import collate, prefix_groups, trained_tokens  # noqa: E402
from agentbolt.training.lora import LoraSettings  # noqa: E402
from agentbolt.training.policy import Policy  # noqa: E402

SYSTEM = list(range(30, 100))  # 70 tokens the compaction keeps
TASK = list(range(100, 140))  # 40 tokens of history it summarises
SUMMARY = list(range(140, 160))


def _compacted_rollout() -> list[Sample]:
    """One rollout: SYSTEM TASK → answer, then the compacted SYSTEM SUMMARY → answers."""
    spans = [
        call("m1", SYSTEM + TASK, [5, 6, 7], [-1.1, -1.2, -1.3], t=0, rollout="r1"),
        call("m2", SYSTEM + SUMMARY, [8, 9], [-0.9, -1.0], t=1, rollout="r1"),
        call("m3", SYSTEM + SUMMARY + [8, 9, 10, 11], [12], [-0.7], t=2, rollout="r1"),
    ]
    found = build_samples(extract_model_calls(spans))
    assert found is not None
    _, after = found.samples
    assert after.origin.cause == "diverged" and after.origin.diverged_at == len(SYSTEM)
    assert found.counts.tokens_shared == len(SYSTEM) - 1
    return [replace(s, advantage=0.8) for s in found.samples]


def _other_task(rollout: str, response: list[int], advantage: float) -> Sample:
    prompt = list(range(155, 255))  # another task's 100-token prompt: nothing in common with r1
    ids = prompt + response
    mask = [0] * len(prompt) + [1] * len(response)
    return Sample(rollout, "a", ids, mask, [-1.0 if m else 0.0 for m in mask], [0 if m else None for m in mask],
                  [rollout], advantage)


def _batch() -> list[Sample]:
    return [_other_task("r2", [13, 14], -0.4), _other_task("r3", [15], -0.4), *_compacted_rollout()]


def test_the_samples_of_a_rollout_that_diverged_share_their_common_history() -> None:
    # alone: the two samples' common system prompt, less the token each row keeps
    assert prefix_groups(_compacted_rollout()) == (len(SYSTEM) - 1, None)
    # beside another task's rows: each task's prompt cut to the shortest (P = 89) would leave
    # the rollout's two samples apart (3 groups, 89 tokens saved); one group per prompt
    # history at P = 69 saves 2 × 69
    assert prefix_groups(_batch()) == (len(SYSTEM) - 1, [0, 0, 1, 1])


@pytest.mark.parametrize("lora", [True, False])
def test_the_shared_history_computed_once_gives_the_gradient_of_the_samples_computed_apart(lora: bool) -> None:
    model, tok = tiny_model(seed=2, vocab="bytes", hidden=32, n_layers=2)
    settings = LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]) if lora else None
    policy = Policy(model, tok, lora=settings)
    samples = _batch()
    tokens = trained_tokens(samples)

    def loss_gradient(rows: list[list[Sample]]) -> list[torch.Tensor]:
        policy.model.zero_grad(set_to_none=True)
        for part in rows:
            b = collate(part, policy.pad_id, tokens)
            lp, _ = policy.token_logprobs(b.input_ids, b.attention_mask, shared_prefix=b.shared_prefix,
                                          prefix_group=b.prefix_group, positions=b.loss_mask)
            grpo_loss(lp, b.old_logprobs, b.advantages, b.loss_mask, b.rollout_index,
                      rollout_tokens=b.rollout_tokens, num_rollouts=3).loss.backward()
        return [p.grad.clone() for p in policy.trainable_parameters()]

    together = collate(samples, policy.pad_id, tokens)
    assert together.shared_prefix == len(SYSTEM) - 1 and together.prefix_group is not None
    once = loss_gradient([samples])
    apart = loss_gradient([[s] for s in samples])  # one row a forward: nothing shared
    assert all(collate([s], policy.pad_id).shared_prefix == 0 for s in samples)
    assert any(float(g.abs().max()) > 0 for g in once)
    for got, want in zip(once, apart, strict=True):  # sums over the batch's positions, reordered
        assert_same_sums(got, want, terms=together.input_ids.numel())
