"""The one-row decode step, on one thread and split across two: the logits of a plain
forward pass of the served weights, for every Llama-shaped family the engine serves, and
K/V that the ragged step reads on from."""

from __future__ import annotations

import time
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the transformers engine needs the [torch] extra")
transformers = pytest.importorskip("transformers", reason="the transformers engine needs the [torch] extra")

from agentbolt.engines.local.llama_forward import RaggedLlama, Step  # noqa: E402
from agentbolt.engines.local.one_row import OneRowStep  # noqa: E402
from agentbolt.engines.local.one_row_choice import FasterOneRowStep  # noqa: E402
from agentbolt.engines.local.two_way import TwoWayOneRowStep  # noqa: E402
from tests.tolerances import assert_same_sums  # noqa: E402

PROMPT = list(range(10, 30))
ANSWER = [5, 77, 200, 12, 9, 41]


def _model(kind: str, heads: int = 4, kv_heads: int = 2, **extra: Any) -> Any:
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(
        kind, vocab_size=301, hidden_size=16 * heads, intermediate_size=130, num_hidden_layers=2,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=16, max_position_embeddings=256,
        use_sliding_window=False, **extra)
    return transformers.AutoModelForCausalLM.from_config(config).eval()


def _full_forward(model: Any, ids: list[int]) -> Any:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0].float()


def _runner(model: Any, two_way: bool = False) -> RaggedLlama:
    """A runner whose one-row steps run on one thread, or (``two_way``) always split across two."""
    runner = RaggedLlama(model, slots=2, max_len=200, device=torch.device("cpu"), initial_capacity=8,
                         two_way=two_way)
    if two_way:
        assert isinstance(runner.one_row, FasterOneRowStep)
        runner.one_row = runner.one_row.two  # type: ignore[assignment]  # the split step alone, every step
    return runner


@pytest.fixture(params=[False, True], ids=["one thread", "two-way"])
def two_way(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.mark.parametrize(("kind", "extra"), [
    ("llama", {}),  # grouped-query attention
    ("llama", {"heads": 6, "kv_heads": 3}),  # an odd number of KV heads: split 2 + 1 (as SmolLM2-135M's)
    ("llama", {"heads": 2, "kv_heads": 2}),  # one query head per KV head
    ("qwen2", {}),  # q/k/v biases
    ("llama", {"attention_bias": True, "mlp_bias": True}),  # biases on o_proj and the MLP too
    ("qwen3", {}),  # RMSNorm per head on q and k
    ("llama", {"hidden_act": "gelu_pytorch_tanh"}),  # another MLP activation
])
def test_one_row_decoding_gives_the_logits_of_a_full_forward_pass(kind: str, extra: dict[str, Any],
                                                                 two_way: bool) -> None:
    model = _model(kind, **extra)
    want = _full_forward(model, PROMPT + ANSWER)[len(PROMPT) - 1:]
    runner = _runner(model, two_way)
    assert isinstance(runner.one_row, TwoWayOneRowStep if two_way else OneRowStep)
    got = []
    with torch.inference_mode():
        got.append(runner.forward(Step([], [], [PROMPT], [0]))[0])
        for i, token in enumerate(ANSWER):  # the cache grows past its first 8 positions on the way
            got.append(runner.forward(Step([token], [len(PROMPT) + i], [], []))[0])
    assert_same_sums(torch.stack(got), want, terms=64 * 2)


def test_the_ragged_step_reads_on_from_the_kv_the_one_row_step_wrote(two_way: bool) -> None:
    model = _model("llama", heads=6, kv_heads=3)
    ids = PROMPT + ANSWER
    want = _full_forward(model, ids)
    runner = _runner(model, two_way)
    with torch.inference_mode():
        runner.forward(Step([], [], [PROMPT], [0]))
        for i, token in enumerate(ANSWER[:-1]):
            runner.forward(Step([token], [len(PROMPT) + i], [], []))
        # a second request joins: slot 0 decodes on the ragged path, slot 1 prefills
        both = runner.forward(Step([ANSWER[-1]], [len(ids) - 1], [PROMPT[:5]], [0]))
    assert_same_sums(both[0], want[-1], terms=64 * 2)
    assert_same_sums(both[1], _full_forward(model, PROMPT[:5])[-1], terms=64 * 2)


def test_a_weight_changed_in_place_is_served_at_the_next_step(two_way: bool) -> None:
    model, other = _model("llama"), _model("llama")
    with torch.no_grad():
        for p in other.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    runner = _runner(model, two_way)
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


def test_a_model_with_one_kv_head_decodes_one_row_on_one_thread() -> None:
    runner = RaggedLlama(_model("llama", kv_heads=1), slots=1, max_len=64, device=torch.device("cpu"), two_way=True)
    assert isinstance(runner.one_row, OneRowStep)


class _SlowStep(OneRowStep):
    """The one-thread step, 200 ms slower: as on a machine where a second core is free."""

    def __call__(self, token: int, length: int, k: Any, v: Any) -> Any:
        time.sleep(0.2)
        return super().__call__(token, length, k, v)


def test_the_faster_step_runs_and_the_other_every_16th_step_with_the_same_logits() -> None:
    model = _model("llama", heads=6, kv_heads=3)
    runner = RaggedLlama(model, slots=1, max_len=200, device=torch.device("cpu"), initial_capacity=8, two_way=True)
    choice = runner.one_row
    assert isinstance(choice, FasterOneRowStep)
    one = choice.one
    choice.one = _SlowStep(model, runner.linear, heads=6, kv_heads=3, head_dim=16, cos=one.cos, sin=one.sin)
    tokens = [(7 * i) % 300 for i in range(40)]
    want = _full_forward(model, PROMPT + tokens)[len(PROMPT) - 1:]
    with torch.inference_mode():
        got = [runner.forward(Step([], [], [PROMPT], [0]))[0]]
        got += [runner.forward(Step([t], [len(PROMPT) + i], [], []))[0] for i, t in enumerate(tokens)]
    assert_same_sums(torch.stack(got), want, terms=96 * 2)
    # each ran twice first (its first run lays out its weights, not timed), then the split one
    # except every 16th step
    assert choice.runs == {True: 2 + 36 - 2, False: 2 + 2}
    runner.close()


def test_a_failure_on_the_worker_thread_is_raised_by_the_step_and_the_next_step_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model("llama")
    runner = _runner(model, two_way=True)
    step = runner.one_row
    assert isinstance(step, TwoWayOneRowStep)
    make_half = TwoWayOneRowStep._make_half

    def failing_on_the_worker(self: TwoWayOneRowStep, t: int, *args: Any) -> Any:
        if t == 1:
            raise MemoryError("no room for the worker's weights")
        return make_half(self, t, *args)

    with torch.inference_mode():
        runner.forward(Step([], [], [PROMPT], [0]))
        monkeypatch.setattr(TwoWayOneRowStep, "_make_half", failing_on_the_worker)
        with pytest.raises(RuntimeError, match="two-way one-row step failed") as failed:
            runner.forward(Step([ANSWER[0]], [len(PROMPT)], [], []))
        assert isinstance(failed.value.__cause__, MemoryError)
        monkeypatch.undo()
        got = runner.forward(Step([ANSWER[0]], [len(PROMPT)], [], []))[0]
    assert_same_sums(got, _full_forward(model, PROMPT + ANSWER[:1])[-1], terms=64 * 2)
    step.close()
