"""Seeded random tiny models: offline, reproducible, chat-ready, fast to train."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="tiny models need the [torch] extra")
pytest.importorskip("transformers", reason="tiny models need the [torch] extra")

from agentbolt.models import byte_tokenizer, tiny_model


def _n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def test_same_seed_same_weights_other_seed_other_weights() -> None:
    a, _ = tiny_model(seed=3, vocab="bytes")
    b, _ = tiny_model(seed=3, vocab="bytes")
    c, _ = tiny_model(seed=4, vocab="bytes")
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(a.parameters(), c.parameters(), strict=True))


def test_building_a_model_leaves_the_global_rng_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    tiny_model(seed=0, vocab="bytes")
    assert torch.equal(torch.rand(3), expected)


def test_default_model_is_a_few_million_parameters_with_a_chat_template() -> None:
    model, tokenizer = tiny_model()
    assert 500_000 <= _n_params(model) <= 7_000_000
    assert model.config.vocab_size == len(tokenizer)
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True,
                                        tokenize=True, return_dict=False)
    assert tokenizer.decode(ids).rstrip().endswith("assistant")


def test_byte_tokenizer_round_trips_any_text_and_knows_chatml() -> None:
    tok = byte_tokenizer()
    text = "héllo wörld ✓ 123"
    assert tok.decode(tok(text)["input_ids"]) == text
    assert len(tok) == 259
    ids = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True,
                                  tokenize=True, return_dict=False)
    assert tok.decode(ids) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token == "<|im_end|>"


def test_a_training_step_lowers_the_loss() -> None:
    model, tokenizer = tiny_model(seed=0)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batch = torch.randint(0, len(tokenizer), (4, 64), generator=torch.Generator().manual_seed(0))
    losses = []
    for _ in range(3):
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
