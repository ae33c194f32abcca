"""Weight hot-swaps for the transformers engine: full (or partial) state dicts, and LoRA
LoRAs merged into the served weights.

LoRA: the engine keeps a copy of each targeted base weight the first time a LoRA
touches it and always serves ``W = W_base + scale · B @ A``, so successive LoRA
versions replace each other instead of piling up. A full state dict becomes the new base.
:meth:`LoraMerger.rebase` makes the weights served now (the current LoRA merged in)
the base of the next LoRA: for a trainer whose policy is a copy of the served model
plus a fresh LoRA (GRPO after SFT on one engine), whose delta sits on top of them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

__all__ = ["LoraMerger", "load_full", "lora_from", "lora_scale_of", "read_lora_dir"]

_PREFIXES = ("base_model.model.", "module.", "_orig_mod.")
_LORA_KEY = re.compile(r"^(?P<module>.+)\.lora_(?P<ab>[AB])(?:\.[^.]+)?\.weight$")


def _strip(key: str) -> str:
    changed = True
    while changed:
        changed = False
        for p in _PREFIXES:
            if key.startswith(p):
                key, changed = key[len(p):], True
    return key


def load_full(model: torch.nn.Module, state_dict: Mapping[str, torch.Tensor], *,
              before: Callable[[], object] | None = None) -> None:
    """Copy ``state_dict`` into ``model`` in place (a subset of parameters is fine).

    Keys may carry peft's ``base_model.model.`` prefix (a merged peft model) or DDP /
    compile prefixes. Unknown keys raise ValueError so a wrong checkpoint is not silently
    half-loaded: every key and shape is checked before the first weight is copied, and
    ``before`` (e.g. putting a LoRA's base weights back) runs once they are.
    """
    own = model.state_dict()
    clean = {_strip(k): v for k, v in state_dict.items()}
    unknown = [k for k in clean if k not in own]
    if unknown:
        raise ValueError(f"update_weights got {len(unknown)} keys the served model does not have "
                         f"(e.g. {unknown[:3]}); pass the state dict of the same architecture, or use lora= for "
                         "LoRAs")
    for k, v in clean.items():  # all checked before any is copied: a refused state dict changes nothing
        if own[k].shape != v.shape:
            raise ValueError(f"update_weights: {k} has shape {tuple(v.shape)}, the served model has "
                             f"{tuple(own[k].shape)}")
    if before is not None:
        before()
    with torch.no_grad():
        for k, v in clean.items():
            own[k].copy_(v.to(device=own[k].device, dtype=own[k].dtype))


def lora_from(lora: Any, scale: float | None) -> tuple[dict[str, torch.Tensor], float]:
    """Accept a peft ``PeftModel`` (scale read from its config) or a LoRA state dict
    (as ``peft.get_peft_model_state_dict`` returns; then ``lora_scale`` = alpha / r is required)."""
    if hasattr(lora, "peft_config"):
        from peft import get_peft_model_state_dict

        name = getattr(lora, "active_adapter", "default")  # third-party: a peft model
        name = name[0] if isinstance(name, list) else name
        cfg = lora.peft_config[name]
        if scale is None:
            scale = lora_scale_of(cfg.to_dict() if hasattr(cfg, "to_dict") else vars(cfg))
        return dict(get_peft_model_state_dict(lora, adapter_name=name)), float(scale)
    if isinstance(lora, Mapping):
        if scale is None:
            raise ValueError("update_weights(lora=<LoRA state dict>) needs lora_scale=lora_alpha / r "
                             "(or pass the PeftModel itself and the scale is read from its config)")
        return dict(lora), float(scale)
    raise TypeError(f"lora must be a peft PeftModel or a LoRA state dict, not {type(lora).__name__}")


def lora_scale_of(config: Mapping[str, Any]) -> float:
    """The scale peft applies to ``B @ A``: ``lora_alpha / r`` (``/ sqrt(r)`` with rsLoRA).

    Refuses what a single scale cannot express (per-module ranks or alphas, DoRA)."""
    if config.get("rank_pattern") or config.get("alpha_pattern"):
        raise ValueError("this LoRA has per-module ranks or alphas (rank_pattern/alpha_pattern), which "
                         "the engine cannot serve: merge it and send the full state dict instead")
    if config.get("use_dora"):
        raise ValueError("DoRA weights are not LoRA deltas the engine can add: merge the LoRA and send the "
                         "full state dict instead")
    r, alpha = config.get("r"), config.get("lora_alpha")
    if not isinstance(r, int) or r < 1 or not isinstance(alpha, (int, float)):
        raise ValueError(f"the LoRA config needs a positive integer 'r' and a number 'lora_alpha', got r={r!r}, "
                         f"lora_alpha={alpha!r}")
    return float(alpha) / (r ** 0.5 if config.get("use_rslora") else r)


def read_lora_dir(path: str | Path) -> tuple[dict[str, torch.Tensor], float]:
    """Read a peft LoRA directory as ``save_pretrained`` writes it
    (``adapter_config.json`` + ``adapter_model.safetensors``): its tensors and scale."""
    root = Path(path)
    config_file, weights_file = root / "adapter_config.json", root / "adapter_model.safetensors"
    for f in (config_file, weights_file):
        if not f.is_file():
            raise ValueError(f"{root} is not a peft LoRA directory: {f.name} is missing "
                             "(save the LoRA with peft_model.save_pretrained(path) and pass that path)")
    config = json.loads(config_file.read_text())
    if str(config.get("peft_type", "LORA")).upper() != "LORA":
        raise ValueError(f"{root} holds a {config.get('peft_type')} LoRA; only LoRAs can be served")
    from safetensors.torch import load_file

    return load_file(str(weights_file)), lora_scale_of(config)


class LoraMerger:
    """Serves base + one LoRA delta; remembers base weights of the modules it touched."""

    def __init__(self) -> None:
        self._base: dict[str, torch.Tensor] = {}

    def rebase(self) -> None:
        """Keep serving what is served, and make it the base of the next LoRA (the
        current LoRA stays merged in: a later LoRA is added to it, not swapped for it)."""
        self._base.clear()

    def restore(self, model: torch.nn.Module) -> None:
        """Put the base weights back (before a full load, so that load becomes the base)."""
        params = dict(model.named_parameters())
        with torch.no_grad():
            for module, base in self._base.items():
                params[f"{module}.weight"].copy_(base)
        self._base.clear()

    def apply(self, model: torch.nn.Module, lora: Mapping[str, torch.Tensor], scale: float) -> int:
        """Serve ``base + scale · B @ A`` for every adapted module; returns how many."""
        pairs: dict[str, dict[str, torch.Tensor]] = {}
        for key, value in lora.items():
            m = _LORA_KEY.match(_strip(key))
            if m is None:
                raise ValueError(f"not a LoRA A/B weight: {key!r} (embedding LoRAs and extra modules are not "
                                 "supported; "
                                 "merge the LoRA and pass state_dict= instead)")
            pairs.setdefault(m["module"], {})[m["ab"]] = value
        params = dict(model.named_parameters())
        with torch.no_grad():
            for module in list(self._base):  # modules the previous LoRA touched but this one does not
                if module not in pairs:
                    params[f"{module}.weight"].copy_(self._base.pop(module))
            for module, ab in pairs.items():
                if set(ab) != {"A", "B"}:
                    raise ValueError(f"LoRA module {module!r} lacks its lora_{'B' if 'A' in ab else 'A'} weight")
                weight = params.get(f"{module}.weight")
                if weight is None:
                    raise ValueError(f"the served model has no module {module!r} for this LoRA")
                base = self._base.setdefault(module, weight.detach().clone())
                delta = (ab["B"].to(weight.device, torch.float32) @ ab["A"].to(weight.device, torch.float32)) * scale
                weight.copy_((base.float() + delta).to(weight.dtype))
        return len(pairs)
