"""The SFT update: the loss it computes, how micro-batches add up, and the schedule."""

from __future__ import annotations

import itertools
import math

import pytest

torch = pytest.importorskip("torch")

from agentbolt.algorithms import SFTConfig
from agentbolt.training.policy import Policy
from agentbolt.algorithms.sft import encode_records
from agentbolt.algorithms.sft.chat_data import IGNORE_INDEX
from agentbolt.algorithms.sft.update import (
    SFTUpdate,
    assistant_nll,
    learning_rate_at,
)
from agentbolt.models import tiny_model
from agentbolt.training.batch import pack, pad, shared_prefix
from tolerances import assert_same_sums


def records(n: int) -> list[dict]:
    return [{"messages": [{"role": "user", "content": f"say {i % 3}" + "!" * i},
                          {"role": "assistant", "content": f"number {i % 3}"}]} for i in range(n)]


def collate(samples: list, pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``labels`` (-100 on untrained tokens)."""
    rows = pad(samples, pad_id).to(device)
    return rows.input_ids, rows.attention_mask, rows.labels(IGNORE_INDEX)


def policy(lora: bool = False) -> Policy:
    from agentbolt.algorithms import LoraSettings

    model, tok = tiny_model(seed=1, vocab="bytes", hidden=32, n_layers=1)
    return Policy(model, tok, lora=LoraSettings(r=4, alpha=8) if lora else None)


def test_nll_is_that_of_the_full_logits_on_assistant_tokens_only() -> None:
    pol = policy()
    samples = encode_records(records(3), pol.tokenizer, max_seq_len=512).samples
    ids, mask, labels = collate(samples, pol.pad_id, pol.device)
    with torch.no_grad():
        nll, n = assistant_nll(pol.model, ids, mask, labels)
        logits = pol.model(input_ids=ids, attention_mask=mask).logits[:, :-1]
        full = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                                                 ignore_index=-100, reduction="sum")
    assert n == sum(s.num_trained for s in samples) and n == int((labels != -100).sum())
    assert float(nll) == pytest.approx(float(full), rel=1e-5)


def test_micro_batches_respect_the_token_budget_and_add_up_to_the_batch_gradient() -> None:
    pol = policy(lora=True)
    samples = encode_records(records(6), pol.tokenizer, max_seq_len=512).samples
    groups = pack([[s] for s in samples], 2 * max(len(s) for s in samples))
    assert len(groups) > 1 and all(len(g) * max(len(s) for s in g) <= 2 * max(len(s) for s in samples) or len(g) == 1
                                   for g in groups)
    assert [s for g in groups for s in g] == samples

    def grads(parts: list[list]) -> list[torch.Tensor]:
        pol.model.zero_grad(set_to_none=True)
        N = sum(s.num_trained for s in samples)
        for part in parts:
            nll, _ = assistant_nll(pol.model, *collate(part, pol.pad_id, pol.device))
            (nll / N).backward()
        return [p.grad.clone() for p in pol.trainable_parameters()]

    positions = sum(len(s.input_ids) for s in samples)  # micro-batches add the same sums in another order
    for a, b in zip(grads(groups), grads([samples]), strict=True):
        assert_same_sums(a, b, terms=positions)


def test_learning_rate_warms_up_then_decays() -> None:
    lrs = [learning_rate_at(s, 10, 1.0, 0.2, "cosine") for s in range(10)]
    assert lrs[:2] == [0.5, 1.0] and lrs[2] == 1.0
    assert all(a > b for a, b in itertools.pairwise(lrs[2:])) and lrs[-1] > 0
    assert learning_rate_at(6, 10, 1.0, 0.2, "linear") == pytest.approx(1 - 4 / 8)
    assert learning_rate_at(9, 10, 1.0, 0.0, "constant") == 1.0
    assert learning_rate_at(5, 10, 1.0, 0.0, "cosine") == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.5)))


def test_training_lowers_the_loss_and_reports_what_it_did() -> None:
    pol = policy()
    samples = encode_records(records(8), pol.tokenizer, max_seq_len=512).samples
    cfg = SFTConfig(epochs=6, batch_size=4, learning_rate=1e-2, lora=None, micro_batch_tokens=64, warmup_ratio=0.1)
    steps: list[tuple[int, int]] = []
    stats = SFTUpdate(pol, cfg).run(samples, on_step=lambda s, t, loss, lr: steps.append((s, t)))
    assert steps[-1] == (12, 12) and stats.optimizer_steps == 12
    assert stats.loss < 0.5 * stats.first_epoch_loss
    assert stats.records == 8 and stats.trained_tokens == sum(s.num_trained for s in samples)
    metrics = stats.as_metrics()
    assert metrics["train/tokens_per_second"] > 0 and metrics["train/epochs"] == 6


def test_a_shared_prefix_computed_once_gives_the_same_loss_and_gradients() -> None:
    pol = policy(lora=True)
    system = {"role": "system", "content": "You answer with a number. Example: say 7 -> number 7."}
    recs = [{"messages": [system, *r["messages"]]} for r in records(4)]
    samples = encode_records(recs, pol.tokenizer, max_seq_len=512).samples
    P = shared_prefix(samples)
    first_label = min(s.labels.index(next(x for x in s.labels if x != -100)) for s in samples)
    assert 40 < P < first_label

    def loss_and_grads(prefix: int) -> tuple[float, list[torch.Tensor]]:
        pol.model.zero_grad(set_to_none=True)
        nll, _ = assistant_nll(pol.model, *collate(samples, pol.pad_id, pol.device), shared_prefix=prefix)
        nll.backward()
        return float(nll.detach()), [p.grad.clone() for p in pol.trainable_parameters()]

    (shared, g_shared), (plain, g_plain) = loss_and_grads(P), loss_and_grads(0)
    assert shared == pytest.approx(plain, rel=1e-5)
    positions = sum(len(s.input_ids) for s in samples)  # the prefix run once: the same sums reordered
    for a, b in zip(g_shared, g_plain, strict=True):
        assert_same_sums(a, b, terms=positions)
