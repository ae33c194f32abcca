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
  transformers engine (here or in a server), a peft adapter directory to engines that read
  adapters from disk (vLLM's runtime LoRA route); then, for an engine in this process,
  compares the engine's logprobs with the trainer's on a probe sequence:
  ``publish/max_abs_logprob_diff`` = max_t |log π_engine(y_t | y_<t) − log π_θ(y_t | y_<t)|
  over the engine's greedy continuation y of the probe.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentbolt.gateway.weight_update import WeightUpdate

__all__ = [
    "EngineInfo", "NoGatewayError", "PublishMismatchError", "Publisher",
    "engine_info", "numerics_match", "policy_device",
]

log = logging.getLogger("agentbolt.algorithms")

PROBE_PROMPT_TOKENS = 48
PROBE_NEW_TOKENS = 8


class NoGatewayError(RuntimeError):
    """A trainer (GRPO, SFT sampling) trains the model the gateway serves, and the run has no gateway."""


class PublishMismatchError(RuntimeError):
    """After a publish, the engine's logprobs differ from the trainer's for the same weights."""


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

    @property
    def takes_tensors(self) -> bool:
        return "lora" in self.weight_formats or "state_dict" in self.weight_formats

    def describe(self) -> str:
        where = "in this process" if self.local else "in the server"
        return f"{self.name or 'engine'} {where} ({self.dtype or 'dtype unknown'}, {self.device or 'device unknown'})"


async def engine_info(control: Any) -> EngineInfo:
    """The engine behind ``control`` (a local or remote gateway control)."""
    engine = getattr(control, "engine", None)
    if engine is not None:
        dtype, device = getattr(engine, "dtype", None), getattr(engine, "device", None)
        return EngineInfo(engine.name, None if dtype is None else str(dtype), None if device is None else str(device),
                          tuple(getattr(engine, "weight_formats", ())), True)
    status = await control.status()
    formats = status.get("weight_formats")
    if formats is None:  # a server from before weight_formats: vLLM reads directories, the rest take tensors
        formats = ["lora_path"] if status.get("engine") == "vllm" else ["state_dict", "lora", "lora_path"]
    return EngineInfo(status.get("engine"), status.get("dtype"), status.get("device"), tuple(formats), False)


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
    trainer's unmerged adapter differ by more than rounding noise can be told from; an
    engine that does not report dtype and device (vLLM: other kernels) never matches."""
    if info.dtype is None or info.device is None:
        return False
    both_fp32 = info.dtype == str(policy.dtype) == "torch.float32"
    return both_fp32 and _same_device(info.device, str(policy.device))


class Publisher:
    """Publishes ``policy`` to the engine behind ``control`` (see the module doc).

    ``adapter_dir``: where adapters are saved for engines that read them from disk, one
    ``v<version>/`` directory per publish (the newest ``keep`` are kept).
    ``check``/``tolerance``: probe an in-process engine after each publish; when trainer
    and engine compute alike (:func:`numerics_match`), a difference above ``tolerance``
    raises :class:`PublishMismatchError` — training on, the trainer would learn from tokens
    its policy did not sample."""

    def __init__(self, control: Any, policy: Any, info: EngineInfo, *, adapter_dir: str | Path,
                 check: bool = True, tolerance: float = 1e-3, keep: int = 2) -> None:
        self.control = control
        self.policy = policy
        self.info = info
        self.adapter_dir = Path(adapter_dir)
        self.check = check
        self.tolerance = tolerance
        self.keep = keep
        self.last_diff: float | None = None

    def require_supported(self) -> None:
        """Raise before training when the policy cannot be published to this engine."""
        if self.info.takes_tensors or not self.info.weight_formats:
            return
        if "lora_path" in self.info.weight_formats and not self.policy.lora:
            raise ValueError(f"the {self.info.name} engine loads LoRA adapters only, and this policy trains every "
                             "weight: train an adapter (lora=LoraSettings(...)); full-weight sync to vLLM (NCCL) is "
                             "not implemented")

    async def publish(
        self, version: int | None, probe: Sequence[int] | None = None
    ) -> tuple[int | None, dict[str, Any]]:
        """Load the policy into the engine as ``version``; returns the version served and
        metrics (``publish/max_abs_logprob_diff`` when probed)."""
        if self.info.takes_tensors or not self.info.weight_formats:
            served = await self.control.load_weights(self.policy.weight_update(), version=version)
        else:
            path = self._save_adapter(version)
            served = await self.control.load_weights(WeightUpdate(lora_path=str(path)), version=version)
            self._prune()
        values: dict[str, Any] = {}
        if self.check and probe:
            diff = await self.agreement(probe)
            if diff is not None:
                values["publish/max_abs_logprob_diff"] = diff
        return served, values

    def _save_adapter(self, version: int | None) -> Path:
        """The adapter as ``save_pretrained`` writes it, under ``adapter_dir/v<version>``
        (written to a temporary directory first, so a reader never sees half of it)."""
        name = f"v{version}" if version is not None else "latest"
        final = self.adapter_dir / name
        tmp = self.adapter_dir / f".tmp-{name}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        self.policy.model.save_pretrained(str(tmp), safe_serialization=True)
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        return final.resolve()

    def _prune(self) -> None:
        found = sorted((p for p in self.adapter_dir.glob("v*") if p.name[1:].isdigit()), key=lambda p: int(p.name[1:]))
        for old in found[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)

    async def agreement(self, probe: Sequence[int]) -> float | None:
        """max |Δ logprob| between the in-process engine and the trainer on the engine's
        greedy continuation of ``probe`` (None: the engine is not in this process)."""
        engine: Any = self.control.engine
        if not hasattr(getattr(engine, "model", None), "state_dict") or not engine.returns_token_ids:
            return None  # not a model in this process (vLLM's `model` is a name)
        import torch

        prompt = [int(t) for t in probe[:PROBE_PROMPT_TOKENS]]
        answer = await engine.completions({"prompt": prompt, "max_tokens": PROBE_NEW_TOKENS, "temperature": 0.0,
                                           "logprobs": 1, "return_token_ids": True})
        choice = answer["choices"][0]
        out, served = list(choice.get("token_ids") or []), (choice.get("logprobs") or {}).get("token_logprobs")
        if not out or not served:
            return None
        ids = torch.tensor([prompt + out], device=self.policy.device)
        full = await asyncio.to_thread(self.policy.inference_logprobs, ids, torch.ones_like(ids))
        trained = full[0, len(prompt):].float().cpu()
        diff = float((trained - torch.tensor(served[: len(out)], dtype=torch.float32)).abs().max())
        self.last_diff = diff
        if diff > self.tolerance and numerics_match(self.policy, self.info):
            raise PublishMismatchError(
                f"after publishing, the engine's logprobs differ from the trainer's by up to {diff:.3g} (tolerance "
                f"{self.tolerance:g}) although both compute in {self.policy.dtype} on {self.policy.device}: the engine "
                "serves other weights than the trainer trains. Was the engine given weights by someone else, or the "
                "policy built from another model than the one served? Build the policy from the served model "
                "(GRPO()/SFT() without model=) or start the engine from the policy's weights"
            )
        if diff > self.tolerance:
            log.debug("trainer (%s on %s) and engine (%s) differ by up to %.3g after publishing: expected with "
                      "different numerics", self.policy.dtype, self.policy.device, self.info.describe(), diff)
        return diff
