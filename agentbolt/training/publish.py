"""What is trained is what is served: publishing a policy to its engine, and checking it.

A trainer (GRPO, SFT) publishes its policy after every update; from then on every token the
engine samples must come from the weights the trainer holds, or the importance ratio
π_θ / π_old is computed against a policy that never sampled anything. Three things here:

* :func:`engine_info` — what the engine is (name, dtype, device, the weight formats it
  takes), from the in-process engine or from the server's ``/v1/gateway/status``;
* :func:`numerics_match` — whether the engine's logprobs are the trainer's for the same
  weights (a transformers engine in float32 like the trainer, on the same device). When
  not, GRPO recomputes π_old with the trainer (:mod:`agentbolt.algorithms.grpo.update`);
* :class:`Publisher` — sends the weights in the format the engine takes: tensors to the
  transformers engine (here or in a server) — a policy sharded over ranks sends its full
  weights as an update in parts, one FSDP group at a time (:mod:`.sharded_publish`) —,
  a peft LoRA directory to engines that read LoRAs from disk (vLLM's and SGLang's runtime LoRA routes);
  then, for an engine that reports its numerics (here or in a server), compares the
  engine's logprobs with the trainer's on a probe sequence:
  ``publish/max_abs_logprob_diff`` = max_t |log π_engine(y_t | y_<t) − log π_θ(y_t | y_<t)|
  over the engine's greedy continuation y of the probe, against a tolerance that depends
  on the dtypes (:func:`probe_tolerance`);
* :meth:`Publisher.adopt_served_base` — before a trainer that brought its own weights
  (``model=``) publishes anything: the engine's served weights must be the trainer's base
  — then they become the base of the trainer's LoRAs (``rebase_loras``), so an
  LoRA another trainer left (SFT's) is not dropped by the first publish — or the run
  refuses (:class:`ServedWeightsMismatchError`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentbolt.engines.weight_update import WeightUpdate
from agentbolt.training import ranks
from agentbolt.training.sharded_publish import base_parts, state_dicts, stream_parts, write_lora

if TYPE_CHECKING:
    from agentbolt.gateway.control import GatewayControl

__all__ = [
    "LOW_PRECISION_TOLERANCE", "EngineInfo", "NoGatewayError", "PublishMismatchError", "Publisher",
    "ServedWeightsMismatchError", "engine_info", "numerics_match", "policy_device", "probe_tolerance",
    "served_weights_gap",
]

log = logging.getLogger("agentbolt.algorithms")

PROBE_PROMPT_TOKENS = 48
PROBE_NEW_TOKENS = 8
START_PROBE_TEXT = ("A probe of the weights an engine serves: the quick brown fox jumps over the lazy dog, "
                    "then counts 1, 2, 3, 4, 5 and says")

LOW_PRECISION_TOLERANCE = 0.5
"""Probe tolerance (max |Δ logprob| over the probe) when trainer or engine computes in 16
bits, or on another device: bf16 keeps 8 significant bits, so the same weights give
logprobs that differ by rounding alone — SmolLM2-135M, bf16 engine vs bf16 or fp32
trainer: up to 0.13 over 8 probe tokens (measured), 0.24 in the review's runs. Twice that
still catches an engine serving other weights (a tiny model on the pre-SFT base: 0.6–1.1);
smaller differences are not visible in 16-bit logprobs (an engine in this process is
compared weight by weight at the start instead, :func:`served_weights_gap`)."""


class NoGatewayError(RuntimeError):
    """A trainer (GRPO, SFT sampling) trains the model the gateway serves, and the run has no gateway."""


class PublishMismatchError(RuntimeError):
    """After a publish, the engine's logprobs differ from the trainer's for the same weights."""


class ServedWeightsMismatchError(PublishMismatchError):
    """A trainer given its own weights (``model=``) starts against an engine that serves others."""


@dataclass(frozen=True, slots=True)
class EngineInfo:
    """What a trainer needs to know about the engine it publishes to."""

    name: str | None
    dtype: str | None
    """``torch.float32`` and the like; None when the engine does not say (vLLM, a remote API)."""
    device: str | None
    weight_formats: tuple[str, ...]
    local: bool
    """The engine object is in this process (its model can be probed directly)."""
    weight_streams: bool = False
    """It takes an update in parts (a sharded policy's full weights, group by group)."""

    @property
    def takes_tensors(self) -> bool:
        return "lora" in self.weight_formats or "state_dict" in self.weight_formats

    def describe(self) -> str:
        where = "in this process" if self.local else "in the server"
        return f"{self.name or 'engine'} {where} ({self.dtype or 'dtype unknown'}, {self.device or 'device unknown'})"


async def engine_info(control: GatewayControl) -> EngineInfo:
    """The engine behind ``control`` (a local or remote gateway control)."""
    engine = control.engine
    if engine is not None:
        dtype, device = engine.dtype, engine.device
        return EngineInfo(engine.name, None if dtype is None else str(dtype), None if device is None else str(device),
                          tuple(engine.weight_formats), True, engine.supports_weight_streams)
    status = await control.status()
    formats = status.get("weight_formats")
    if formats is None:  # a server from before weight_formats: vLLM reads directories, the rest take tensors
        formats = ["lora_path"] if status.get("engine") == "vllm" else ["state_dict", "lora", "lora_path"]
    return EngineInfo(status.get("engine"), status.get("dtype"), status.get("device"), tuple(formats), False,
                      bool(status.get("weight_streams")))


def policy_device(configured: str | None, info: EngineInfo | None) -> str:
    """Where the policy trains: as configured, else the in-process engine's device, else
    this process's GPU when there is one (``cuda:$LOCAL_RANK`` under torchrun), else ``cpu``."""
    if configured:
        return configured
    if info is not None and info.local and info.device:
        return info.device
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    rank = os.environ.get("LOCAL_RANK")
    return f"cuda:{rank}" if rank and rank.isdigit() else "cuda"


def _same_device(a: str, b: str) -> bool:
    import torch

    da, db = torch.device(a), torch.device(b)
    return da.type == db.type and (da.index or 0) == (db.index or 0)


def numerics_match(policy: Any, info: EngineInfo) -> bool:
    """Whether the engine computes the trainer's logprobs for the same weights: a
    transformers engine (here or in a server) in float32 like the trainer, on the same
    device. In bf16 the engine's merged weights (W + s·BA rounded to bf16) and the
    trainer's unmerged LoRA differ by more than rounding noise can be told from; an
    engine that does not report dtype and device (vLLM: other kernels) never matches."""
    if info.dtype is None or info.device is None:
        return False
    both_fp32 = info.dtype == str(policy.dtype) == "torch.float32"
    return both_fp32 and _same_device(info.device, str(policy.device))


def probe_tolerance(policy: Any, info: EngineInfo, tolerance: float,
                    low_precision: float = LOW_PRECISION_TOLERANCE) -> float:
    """The probe's tolerance: ``tolerance`` when trainer and engine both compute in float32
    on the same device (:func:`numerics_match`: they agree to rounding of 1e-6), else the
    larger ``low_precision`` (16-bit dtypes, other kernels: see :data:`LOW_PRECISION_TOLERANCE`)."""
    return tolerance if numerics_match(policy, info) else max(tolerance, low_precision)


def served_weights_gap(served: Any, policy: Any) -> tuple[int, str | None]:
    """How many of the engine model ``served``'s weights differ from the trainer's base
    (:meth:`~agentbolt.training.policy.Policy.base_weights`) by more than rounding, and the
    first such weight's name. Compared tensor by tensor on the engine's device, in the
    coarser of the two dtypes, to 4 ulp of it, relative to the weight and to the tensor's
    mean magnitude (an engine merges a LoRA into weights already rounded to its dtype:
    an element that nearly cancels keeps the rounding error of the weight it came from).
    A rounding flip is not a difference; SFT's LoRA, or other weights, are."""
    import torch

    unseen = dict(served.named_parameters())
    bad, first = 0, None
    with torch.no_grad():
        for name, theirs in policy.base_weights():  # one at a time (a sharded policy gathers each in turn)
            weight = unseen.pop(name, None)
            if weight is None:
                continue
            if tuple(theirs.shape) != tuple(weight.shape):
                bad, first = bad + weight.numel(), first or name
                continue
            dtype = max((weight.dtype, theirs.dtype), key=lambda d: torch.finfo(d).eps)
            a, b = weight.to(dtype), theirs.detach().to(weight.device, dtype)
            eps = torch.finfo(dtype).eps
            scale = float(b.abs().mean()) if b.numel() else 0.0  # merged into rounded weights: error ~ their ulp
            off = int((~torch.isclose(a, b, rtol=4 * eps, atol=4 * eps * scale)).sum())
            if off:
                bad, first = bad + off, first or name
    for name, weight in unseen.items():  # served, and not among the trainer's weights
        bad, first = bad + weight.numel(), first or name
    return bad, first


class Publisher:
    """Publishes ``policy`` to the engine behind ``control`` (see the module doc).

    ``lora_dir``: where LoRAs are saved for engines that read them from disk, one
    ``v<version>/`` directory per publish (the newest ``keep`` are kept).
    ``check``/``tolerance``: probe an in-process engine after each publish; when trainer
    and engine compute alike (:func:`numerics_match`), a difference above ``tolerance``
    raises :class:`PublishMismatchError` — training on, the trainer would learn from tokens
    its policy did not sample."""

    def __init__(self, control: GatewayControl, policy: Any, info: EngineInfo, *, lora_dir: str | Path,
                 check: bool = True, tolerance: float = 1e-3, keep: int = 2) -> None:
        self.control = control
        self.policy = policy
        self.info = info
        self.lora_dir = Path(lora_dir)
        self.check = check
        self.tolerance = tolerance
        self.keep = keep
        self.last_diff: float | None = None

    def require_supported(self) -> None:
        """Raise before training when the policy cannot be published to this engine."""
        if self.policy.weights_in_parts and self.info.takes_tensors and not self.info.weight_streams:
            raise ValueError(f"this policy's weights are sharded over the ranks and sent to the engine in parts, which "
                             f"the {self.info.describe()} does not take (an agentbolt server from before updates in "
                             "parts?): update the server, or train a LoRA (lora=LoraSettings(...))")
        if self.info.takes_tensors or not self.info.weight_formats:
            return
        if "lora_path" in self.info.weight_formats and not self.policy.lora:
            raise ValueError(f"the {self.info.name} engine loads LoRAs only, and this policy trains every "
                             "weight: train a LoRA (lora=LoraSettings(...)); full-weight sync to a model server "
                             "(vLLM, SGLang) is not implemented")

    async def publish(
        self, version: int | None, probe: Sequence[int] | None = None
    ) -> tuple[int | None, dict[str, Any]]:
        """Load the policy into the engine as ``version``; returns the version served and
        metrics (``publish/max_abs_logprob_diff`` when probed)."""
        ranks.announce_read(self.policy, "publish")  # sharded: every rank joins the gathers
        if self.info.takes_tensors or not self.info.weight_formats:
            served = await self._load(version)
        else:
            path = await asyncio.to_thread(self._save_lora, version)
            served = await self.control.load_weights(WeightUpdate(lora_path=str(path)), version=version)
            self._prune()
        values: dict[str, Any] = {}
        if self.check and probe:
            diff = await self.agreement(probe)
            if diff is not None:
                values["publish/max_abs_logprob_diff"] = diff
        return served, values

    async def _load(self, version: int | None) -> int:
        """Load the policy into the engine: in one ``load_weights``, or, for a sharded
        policy's full weights, as an update in parts (each part gathered, sent and dropped
        before the next is gathered: :meth:`~agentbolt.training.policy.Policy.weight_parts`)."""
        if not self.policy.weights_in_parts:
            update = await asyncio.to_thread(self.policy.weight_update)  # sharded (a LoRA): a gather
            return await self.control.load_weights(update, version=version)
        return await stream_parts(self.control, state_dicts(self.policy.weight_parts()), version)

    def _save_lora(self, version: int | None) -> Path:
        """The LoRA as ``save_pretrained`` writes it, under ``lora_dir/v<version>``
        (written to a temporary directory first, so a reader never sees half of it).
        Sharded: gathered first (every rank joins), written by rank 0."""
        name = f"v{version}" if version is not None else "latest"
        final = self.lora_dir / name
        tmp = self.lora_dir / f".tmp-{name}"
        update = self.policy.weight_update() if self.policy.sharded else None  # a gather: before any write
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        if update is not None:
            write_lora(tmp, self.policy.model, update.lora)
        else:
            self.policy.model.save_pretrained(str(tmp), safe_serialization=True)
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        return final.resolve()

    def _prune(self) -> None:
        found = sorted((p for p in self.lora_dir.glob("v*") if p.name[1:].isdigit()), key=lambda p: int(p.name[1:]))
        for old in found[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)

    async def adopt_served_base(self) -> dict[str, Any]:
        """Before a trainer given its own weights publishes anything: check that the engine
        serves them, then make what it serves the base of the trainer's LoRAs (any
        LoRA it serves now stays merged in, as it is in the trainer's weights: an SFT
        export on an engine that serves SFT's LoRA). Raises
        :class:`ServedWeightsMismatchError` when the engine serves other weights.

        An engine in this process is compared weight by weight (:func:`served_weights_gap`:
        exact to the served dtype's rounding, bf16 included); one in a server by a probe
        (the trainer's LoRA is still zero, so its logprobs are its base's) within
        :func:`probe_tolerance` — decisive in float32; in 16 bits the probe only sees
        differences above rounding, so the trainer's base is then loaded into the engine
        (one upload at the start, exact). An engine that reports no numerics (vLLM) cannot
        be checked: it is said once, and its LoRAs go on the model it was started with."""
        engine = self.control.engine
        served = engine.local_model() if engine is not None and engine.supports_rebase else None
        if engine is not None and served is not None:
            ranks.announce_read(self.policy, "base")  # sharded: every rank joins the gathers
            bad, first = await asyncio.to_thread(served_weights_gap, served, self.policy)
            if bad:
                raise ServedWeightsMismatchError(self._refusal(f"{bad} weights differ beyond {engine.dtype} rounding "
                                                               f"(first: {first})"))
            values: dict[str, Any] = {"publish/base_weights_differing": 0}
        elif self.info.dtype is not None:
            prompt = [int(t) for t in self.policy.tokenizer(START_PROBE_TEXT)["input_ids"]]
            diff = await self._probe_diff(prompt, 2 * PROBE_NEW_TOKENS)
            tolerance = probe_tolerance(self.policy, self.info, self.tolerance)
            if diff is not None and diff > tolerance:
                raise ServedWeightsMismatchError(self._refusal(f"its logprobs differ from the trainer's by up to "
                                                               f"{diff:.3g} (tolerance {tolerance:g})"))
            values = {} if diff is None else {"publish/base_max_abs_logprob_diff": diff}
            if not numerics_match(self.policy, self.info) and self.info.takes_tensors:
                # below the probe's 16-bit tolerance a small difference cannot be told from rounding: make it none
                await self._load_base()
                values["publish/base_loaded"] = 1
                return values
        else:
            log.warning("the %s engine does not report its numerics, so whether it serves the weights given with "
                        "model= cannot be checked: its LoRAs are applied to the model it was started with, which "
                        "must be those weights", self.info.name)
            return {}
        if self.policy.lora and self.info.takes_tensors:
            await self.control.rebase_loras()
        log.info("the engine (%s) serves the weights given with model=; they are the base of the trainer's LoRAs "
                 "%s", self.info.describe(), values)
        return values

    async def _load_base(self) -> None:
        """Load the trainer's base weights into the engine, in the engine's dtype, as a full
        load (which the engine then takes as the base of later LoRAs) — sharded, as an
        update in parts, every rank joining the gathers."""
        import torch

        dtype = getattr(torch, str(self.info.dtype).removeprefix("torch."))  # third-party: torch's dtype by its name
        if not self.policy.sharded:
            await self.control.load_weights(WeightUpdate({name: w.detach().to("cpu", dtype, copy=True)
                                                          for name, w in self.policy.base_weights()}))
            return
        ranks.announce_read(self.policy, "base")
        await stream_parts(self.control, base_parts(self.policy.base_weights(), dtype), None)

    def _refusal(self, what: str) -> str:
        return (f"the engine ({self.info.describe()}) does not serve the weights this trainer was given with model=: "
                f"{what}. Its LoRAs would be served on other weights than the trainer trains. Train what it serves "
                "(GRPO()/SFT() without model=, engine in this process), load the weights into it first "
                "(control.update_weights(state_dict=...)), or start the engine from them (agentbolt server --model "
                "<the same directory>)")

    async def agreement(self, probe: Sequence[int]) -> float | None:
        """max |Δ logprob| between the engine and the trainer on the engine's greedy
        continuation of ``probe`` (None: the engine reports no numerics, as vLLM). Above
        :func:`probe_tolerance` raises :class:`PublishMismatchError`."""
        if self.info.dtype is None:
            return None  # vLLM: other kernels, no dtype to set a tolerance by
        diff = await self._probe_diff([int(t) for t in probe[:PROBE_PROMPT_TOKENS]], PROBE_NEW_TOKENS)
        if diff is None:
            return None
        self.last_diff = diff
        tolerance = probe_tolerance(self.policy, self.info, self.tolerance)
        if diff > tolerance:
            raise PublishMismatchError(
                f"after publishing, the engine's logprobs differ from the trainer's by up to {diff:.3g} (tolerance "
                f"{tolerance:g} for a {self.policy.dtype} trainer on {self.policy.device} and {self.info.describe()}): "
                "the engine serves other weights than the trainer trains. Was the engine given weights by someone "
                "else, or the policy built from another model than the one served? Build the policy from the served "
                "model (GRPO()/SFT() without model=) or start the engine from the policy's weights"
            )
        if diff > self.tolerance:
            log.debug("trainer (%s on %s) and engine (%s) differ by up to %.3g after publishing: expected with "
                      "different numerics", self.policy.dtype, self.policy.device, self.info.describe(), diff)
        return diff

    async def _probe_diff(self, prompt: list[int], new_tokens: int) -> float | None:
        """max_t |log π_engine − log π_θ| over the engine's greedy continuation of ``prompt``."""
        import torch

        answer = await self.control.completions({"prompt": prompt, "max_tokens": new_tokens, "temperature": 0.0,
                                                 "logprobs": 1, "return_token_ids": True})
        choice = answer["choices"][0]
        out, served = list(choice.get("token_ids") or []), (choice.get("logprobs") or {}).get("token_logprobs")
        if not out or not served:
            return None
        ids = torch.tensor([prompt + out], device=self.policy.device)
        ranks.announce_read(self.policy, "logprobs", ids=ids.tolist())  # sharded: every rank runs this forward
        full = await asyncio.to_thread(self.policy.inference_logprobs, ids, torch.ones_like(ids))
        trained = full[0, len(prompt):].float().cpu()
        return float((trained - torch.tensor(served[: len(out)], dtype=torch.float32)).abs().max())

