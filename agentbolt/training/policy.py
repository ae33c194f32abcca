"""``Policy``: the model a trainer (GRPO, SFT) trains — a causal LM, with a LoRA (peft) or all
weights trainable — and the three things the algorithm asks of it:

* token logprobs (and entropies) of padded token id batches, aligned so that
  ``logprobs[n, t] = log π(ids[n, t] | ids[n, < t])`` (0 at t = 0), like samples store them;
* the reference policy for the KL term (the LoRA switched off, or a frozen copy);
* the weights to hand to the serving engine (:meth:`weight_update`).

The trainer never tokenizes: it trains on the engine's token ids. The tokenizer is only
kept to be saved next to exported weights.

Precision: trained weights are always float32 (the *master* weights). ``dtype`` is the
compute dtype: with LoRA the frozen base is stored in it (peft keeps the LoRA in
float32); full fine-tuning in bfloat16 keeps float32 weights and runs the forward under
``torch.autocast`` — bf16 weights would round most AdamW steps (lr · update ≪ 2⁻⁸ · |w|)
away. Logprobs the update compares (π_prox, π_ref) come from :meth:`Policy.inference_logprobs`:
no dropout, no gradient.

Sharding (``sharding="fsdp"`` under ``torchrun``, :mod:`.fsdp`): the weights become FSDP2
shards, and every read of the whole policy is a collective that every rank makes —
:meth:`weight_parts` (full weights one FSDP group at a time, for the engine),
:meth:`weight_update` (a LoRA, gathered), :meth:`base_weights`, :meth:`export`,
:meth:`merged_model`, :meth:`lora_model`; the gathered tensors land on rank 0.
Whole-state checkpoints refuse (:func:`.fsdp.save_sharded` writes shards instead), and
so does :meth:`weight_update` for full weights (one whole copy more on rank 0: use the parts).
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from agentbolt.engines.weight_update import WeightUpdate
from agentbolt.training import fsdp
from agentbolt.training.logprobs import prefix_sharing_ok, shifted_logprobs
from agentbolt.training.logprobs import token_logprobs as _token_logprobs
from agentbolt.training.lora import LoraSettings

__all__ = ["Policy", "prefix_sharing_ok", "resolve_dtype", "shifted_logprobs"]

log = logging.getLogger("agentbolt.algorithms.grpo")


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """``auto`` is bfloat16 on a GPU that supports it, float32 elsewhere (CPU bf16
    matmuls are slow and lose precision for small models)."""
    if name == "float32":
        return torch.float32
    if name == "bfloat16":
        return torch.bfloat16
    if device.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


class Policy:
    """A trainable causal LM. ``model`` is a transformers ``PreTrainedModel`` (it is
    wrapped with a fresh LoRA when ``lora`` is given) or an existing
    ``peft.PeftModel`` (trained as it is)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        lora: LoraSettings | None = None,
        dtype: str = "auto",
        device: str | torch.device = "cpu",
        gradient_checkpointing: bool = False,
        keep_reference: bool = False,
        sharding: fsdp.Sharding = "none",
    ) -> None:
        self.device = torch.device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        self.tokenizer = tokenizer
        full = not _is_peft(model) and lora is None
        # full fine-tuning keeps float32 master weights and computes in self.dtype (autocast)
        self.param_dtype = torch.float32 if full else self.dtype
        model = model.to(device=self.device, dtype=self.param_dtype)
        self._ref: Any = None
        if _is_peft(model):
            self.model = model
            self.lora = True
        elif lora is not None:
            self.model = _with_lora(model, lora)
            self.lora = True
        else:
            self.model = model
            self.lora = False
            if keep_reference:  # full fine-tuning: the KL needs a frozen copy of the start
                self._ref = copy.deepcopy(model).eval().requires_grad_(False)
        if gradient_checkpointing:
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if self.lora:
                self.model.enable_input_require_grads()
        self.model.train()
        self.pad_id = _pad_id(model, tokenizer)
        self.sharded = sharding == "fsdp" and fsdp.shard_model(self.model, compute_dtype=self.dtype)
        """The weights are FSDP2 shards over the ranks (:mod:`.fsdp`); ``False`` without a process group."""
        if self.sharded and self._ref is not None:
            fsdp.shard_model(self._ref, compute_dtype=self.dtype)

    @classmethod
    def load(cls, path: str | Path, **kwargs: Any) -> Policy:
        """Load a Hugging Face model directory (``"smollm2"`` means the offline
        SmolLM2-135M-Instruct from :func:`agentbolt.models.smollm2`)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if str(path) == "smollm2":
            from agentbolt.models import smollm2

            path = smollm2()
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(path)
        return cls(model, tokenizer, **kwargs)

    # ------------------------------------------------------------------ parameters
    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    @property
    def num_trainable(self) -> int:
        return sum(p.numel() for p in self.trainable_parameters())

    # ------------------------------------------------------------------ forward
    def token_logprobs(
        self, input_ids: Tensor, attention_mask: Tensor, *, with_entropy: bool = False, shared_prefix: int = 0,
        prefix_group: Tensor | None = None, positions: Tensor | None = None, model: Any = None,
    ) -> tuple[Tensor, Tensor | None]:
        """``[N, T]`` logprobs of each token given the ones before it (0 at t = 0), and
        the entropy of the distribution each token was drawn from (detached) if asked.

        ``positions`` (``[N, T]``, e.g. the loss mask): compute only those, 0 elsewhere —
        the output layer then runs on those positions alone (:mod:`.logprobs`).
        ``shared_prefix`` = P > 0: the first P tokens are the same in every row (or in every
        row of one ``prefix_group``): the system prompt and few-shot turns every rollout of a
        task starts with. They go through the model once per group and their keys/values are
        shared by its rows — exact, the gradient of the shared part is the sum over rows —
        and positions ≤ P are returned as 0 (the caller passes P only when none of those
        tokens is trained)."""
        model = model if model is not None else self.model
        with self.autocast():
            return _token_logprobs(model, input_ids, attention_mask, with_entropy=with_entropy,
                                   shared_prefix=shared_prefix, prefix_group=prefix_group, positions=positions)

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Compute in ``dtype`` while the weights are float32 (full fine-tuning in bf16);
        sharded, FSDP casts the gathered weights instead (its ``MixedPrecisionPolicy``)."""
        if self.param_dtype == self.dtype or self.sharded:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    @contextlib.contextmanager
    def inference(self) -> Iterator[None]:
        """No gradient and no dropout (eval mode) inside; the previous mode is restored."""
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                yield
        finally:
            self.model.train(was_training)

    def inference_logprobs(self, input_ids: Tensor, attention_mask: Tensor, *, shared_prefix: int = 0,
                           prefix_group: Tensor | None = None, positions: Tensor | None = None) -> Tensor:
        """:meth:`token_logprobs` without dropout or gradient: π_prox, and π_old when the
        trainer recomputes it. With dropout on, the same weights would give another ratio
        on every forward, and the clip would act on noise."""
        with self.inference():
            return self.token_logprobs(input_ids, attention_mask, shared_prefix=shared_prefix,
                                       prefix_group=prefix_group, positions=positions)[0]

    @contextlib.contextmanager
    def reference(self) -> Iterator[Any]:
        """The model as it was before training: the base weights under the LoRA, or
        the frozen copy kept for full fine-tuning (``keep_reference=True``)."""
        if self.lora:
            with self.model.disable_adapter():
                yield self.model
        elif self._ref is not None:
            yield self._ref
        else:
            raise RuntimeError("full fine-tuning keeps no reference model: create the Policy with keep_reference=True "
                               "(GRPO does this when kl_coef > 0 or log_kl is set)")

    def reference_logprobs(self, input_ids: Tensor, attention_mask: Tensor, *, shared_prefix: int = 0,
                           prefix_group: Tensor | None = None, positions: Tensor | None = None) -> Tensor:
        """log π_ref, without dropout or gradient."""
        with self.inference(), self.reference() as ref:
            return self.token_logprobs(input_ids, attention_mask, shared_prefix=shared_prefix,
                                       prefix_group=prefix_group, positions=positions, model=ref)[0]

    # ------------------------------------------------------------------ weights out
    @property
    def weights_in_parts(self) -> bool:
        """Whether the engine gets this policy in several parts (:meth:`weight_parts`): all
        weights trained and sharded, so that rank 0 never gathers them all at once."""
        return self.sharded and not self.lora

    def weight_update(self) -> WeightUpdate:
        """What the engine must load to serve this policy: the LoRA and its scale, or
        the full state dict (CPU copies, safe to hand to another thread). Sharded: the
        LoRA gathered on rank 0 (every rank calls it; the others get an empty LoRA); full
        weights refuse — :meth:`weight_parts` sends them without a whole copy on rank 0."""
        if self.lora:
            from agentbolt.engines.local.weights import lora_from

            state, scale = lora_from(self.model, None)  # the LoRA and alpha / r, as the engine reads them
            if self.sharded:
                state = fsdp.gathered(state)
            return WeightUpdate(lora={k: v.detach().to("cpu", torch.float32, copy=True) for k, v in state.items()},
                                lora_scale=scale)
        if self.sharded:
            raise NotImplementedError("the full weights of a sharded policy are published in parts "
                                      "(Policy.weight_parts), not gathered whole on one rank")
        return WeightUpdate({k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()})

    def weight_parts(self) -> Iterator[WeightUpdate]:
        """What the engine must load, as updates to send one after the other and commit
        together: with :attr:`weights_in_parts`, one partial state dict per FSDP group
        (each transformer block, then the rest: :func:`.fsdp.gathered_parts`; empty on
        ranks other than 0, which must iterate it too); else :meth:`weight_update` alone."""
        if not self.weights_in_parts:
            yield self.weight_update()
            return
        for part in fsdp.gathered_parts(self.model):
            yield WeightUpdate(part)
            del part

    def engine_update(self) -> dict[str, Any]:
        """:meth:`weight_update` as keyword arguments: ``control.update_weights(**policy.engine_update())``."""
        return self.weight_update().keywords()

    def trainable_state(self) -> dict[str, Tensor]:
        """What a checkpoint must save: the LoRA, or every weight (sharded: use
        :func:`.fsdp.save_sharded`, or :meth:`export` for the gathered model)."""
        self._unsharded("a whole-state checkpoint")
        if self.lora:
            from peft import get_peft_model_state_dict

            return {k: v.detach().cpu().clone() for k, v in get_peft_model_state_dict(self.model).items()}
        # clones: tied weights (embeddings = lm_head) share storage, which safetensors refuses
        return {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}

    def load_trainable_state(self, state: dict[str, Tensor]) -> None:
        """Put back what :meth:`trainable_state` returned."""
        self._unsharded("loading a whole-state checkpoint")
        if self.lora:
            from peft import set_peft_model_state_dict

            result = set_peft_model_state_dict(self.model, state)
            unexpected = getattr(result, "unexpected_keys", None)  # third-party: transformers/peft objects vary
            if unexpected:
                raise ValueError(f"checkpoint has {len(unexpected)} keys this LoRA lacks (e.g. {unexpected[:2]})")
        else:
            self.model.load_state_dict(state)

    def base_weights(self) -> Iterator[tuple[str, Tensor]]:
        """The weights without the LoRA, named as in the plain model (what an engine
        serving this policy's base holds); every weight when training all of them.
        Sharded: each gathered whole in turn (every rank iterates it)."""
        named = self.model.get_base_model().named_parameters() if self.lora else self.model.named_parameters()
        for name, param in named:
            if "lora_" not in name:
                yield name.replace(".base_layer.", "."), fsdp.whole(param) if self.sharded else param

    def merged_model(self) -> Any:
        """A plain transformers model with the LoRA merged in (a copy; training goes on).
        Sharded: gathered on rank 0 (None on the others, which must call it too)."""
        if self.sharded:
            whole = fsdp.gathered_model(self.model)
            return whole.merge_and_unload() if whole is not None and self.lora else whole
        if not self.lora:
            return self.model
        return copy.deepcopy(self.model).merge_and_unload()

    def lora_model(self) -> Any:
        """The peft model (LoRA unmerged) as one process holds it: ``model`` itself, or,
        sharded, a gathered copy on rank 0 (None on the others, which must call it too)."""
        return fsdp.gathered_model(self.model) if self.sharded else self.model

    def export(self, directory: str | Path) -> Path:
        """Save the policy as a Hugging Face model directory (LoRA merged), with the
        tokenizer when there is one: loadable by ``AutoModelForCausalLM.from_pretrained``.
        Sharded: every rank calls it, rank 0 writes the gathered model."""
        out = Path(directory)
        model = self.merged_model()
        if model is None:
            return out
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out, safe_serialization=True)
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(out)
        return out

    def _unsharded(self, what: str) -> None:
        if self.sharded:
            raise NotImplementedError(f"{what} from an FSDP-sharded policy is not implemented: gather it with "
                                      "export() or merged_model(); checkpoint with fsdp.save_sharded")


def _is_peft(model: Any) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "disable_adapter")


def _with_lora(model: Any, lora: LoraSettings) -> Any:
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as exc:  # pragma: no cover - peft is in the torch extra
        raise ImportError("LoRA training needs peft: pip install 'agentbolt[torch]'") from exc
    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    missing = [t for t in lora.target_modules if t not in names]
    if missing:
        raise ValueError(f"LoRA target modules {missing} are not in this model (it has e.g. "
                         f"{sorted(n for n in names if n.endswith('proj'))[:8]}); set LoraSettings(target_modules=...)")
    scaling: dict[str, Any] = {"lora_alpha": lora.alpha}  # peft annotates it int; a float alpha scales the same
    cfg = LoraConfig(r=lora.r, lora_dropout=lora.dropout, target_modules=list(lora.target_modules), bias="none",
                     task_type="CAUSAL_LM", **scaling)
    return get_peft_model(model, cfg)


def _pad_id(model: Any, tokenizer: Any) -> int:
    pad = getattr(tokenizer, "pad_token_id", None)  # third-party: transformers/peft objects vary
    eos = getattr(tokenizer, "eos_token_id", None)  # third-party: transformers/peft objects vary
    config = getattr(model, "config", None)  # third-party: transformers/peft objects vary
    for source in (pad, eos, getattr(config, "pad_token_id", None)):  # third-party: transformers/peft objects vary
        if isinstance(source, int):
            return source
    return 0
