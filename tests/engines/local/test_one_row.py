"""The one-row decode step: the logits of a plain forward pass of the served weights, for
every Llama-shaped family the engine serves, and K/V that the ragged step reads on from."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the transformers engine needs the [torch] extra")
transformers = pytest.importorskip("transformers", reason="the transformers engine needs the [torch] extra")

from agentbolt.engines.local.llama_forward import RaggedLlama, Step  # noqa: E402
from tests.tolerances import assert_same_sums  # noqa: E402

PROMPT = list(range(10, 30))
ANSWER = [5, 77, 200, 12, 9, 41]


def _model(kind: str, **extra: Any) -> Any:
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(
        kind, vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=256, use_sliding_window=False, **extra)
    return transformers.AutoModelForCausalLM.from_config(config).eval()


def _full_forward(model: Any, ids: list[int]) -> Any:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0].float()


def _runner(model: Any) -> RaggedLlama:
    return RaggedLlama(model, slots=2, max_len=200, device=torch.device("cpu"), initial_capacity=8)


@pytest.mark.parametrize(("kind", "extra"), [
    ("llama", {}),  # grouped-query attention
    ("qwen2", {}),  # q/k/v biases
    ("llama", {"attention_bias": True, "mlp_bias": True}),  # biases on o_proj and the MLP too
    ("qwen3", {}),  # RMSNorm per head on q and k
    ("llama", {"hidden_act": "gelu_pytorch_tanh"}),  # another MLP activation
])
def test_one_row_decoding_gives_the_logits_of_a_full_forward_pass(kind: str, extra: dict[str, Any]) -> None:
    model = _model(kind, **extra)
    want = _full_forward(model, PROMPT + ANSWER)[len(PROMPT) - 1:]
    runner = _runner(model)
    got = []
    with torch.inference_mode():
        got.append(runner.forward(Step([], [], [PROMPT], [0]))[0])
        for i, token in enumerate(ANSWER):  # the cache grows past its first 8 positions on the way
            got.append(runner.forward(Step([token], [len(PROMPT) + i], [], []))[0])
    assert_same_sums(torch.stack(got), want, terms=64 * 2)


def test_the_ragged_step_reads_on_from_the_kv_the_one_row_step_wrote() -> None:
    model = _model("llama")
    ids = PROMPT + ANSWER
    want = _full_forward(model, ids)
    runner = _runner(model)
    with torch.inference_mode():
        runner.forward(Step([], [], [PROMPT], [0]))
        for i, token in enumerate(ANSWER[:-1]):
            runner.forward(Step([token], [len(PROMPT) + i], [], []))
        # a second request joins: slot 0 decodes on the ragged path, slot 1 prefills
        both = runner.forward(Step([ANSWER[-1]], [len(ids) - 1], [PROMPT[:5]], [0]))
    assert_same_sums(both[0], want[-1], terms=64 * 2)
    assert_same_sums(both[1], _full_forward(model, PROMPT[:5])[-1], terms=64 * 2)


def test_a_weight_changed_in_place_is_served_at_the_next_step() -> None:
    model, other = _model("llama"), _model("llama")
    with torch.no_grad():
        for p in other.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    runner = _runner(model)
    with torch.inference_mode():
        runner.forward(Step([], [], [PROMPT], [0]))
        runner.forward(Step([ANSWER[0]], [len(PROMPT)], [], []))  # the copies of the old weights exist now
    with torch.no_grad():  # a weight swap: in place, as the engine's load_full and LoRA merge write
        for name, p in model.named_parameters():
            p.copy_(dict(other.named_parameters())[name])
    with torch.inference_mode():
        runner.forward(Step([], [], [PROMPT], [0]))
        got = runner.forward(Step([ANSWER[0]], [len(PROMPT)], [], []))[0]
    assert_same_sums(got, _full_forward(other, PROMPT + ANSWER[:1])[-1], terms=64 * 2)


def test_the_step_runs_on_one_intra_op_thread_and_leaves_torchs_thread_count_as_it_was() -> None:
    model = _model("llama")
    want = _full_forward(model, PROMPT + ANSWER[:1])[-1]
    runner = _runner(model)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with torch.inference_mode():
            runner.forward(Step([], [], [PROMPT], [0]))
            got = runner.forward(Step([ANSWER[0]], [len(PROMPT)], [], []))[0]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert runner.one_row.threads == 1
    assert_same_sums(got, want, terms=64 * 2)
