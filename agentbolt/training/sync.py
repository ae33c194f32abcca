"""A trainer's side of "what is trained is what is served": one object per run (GRPO, SFT,
later ones) that publishes the policy, numbers its versions and says which samples may be
trained on.

* **publish** (:class:`~agentbolt.training.publish.Publisher`): in the format the engine
  takes (tensors, or a LoRA directory for vLLM), checked against an in-process engine
  on a probe of the step's own tokens after every publish;
* **versions** (:mod:`.versions`): every publish is numbered above the version served
  before it *and* above every version this run directory has published (a fresh run in an
  old ``run_dir`` does not hand out its numbers again); the number is noted in
  ``run_dir/versions.json`` before it is published, and mapped to the number of updates
  behind it; a resumed run republishes its checkpoint under a version never used before;
* **staleness** (:mod:`.staleness`): which samples are within ``max_policy_lag`` updates;
* **π_old** (:func:`~agentbolt.training.publish.numerics_match`): when the engine does
  not compute the trainer's logprobs for the same weights (another dtype or device, or an
  engine elsewhere), a policy-gradient update recomputes π_old for every sample.

What it reads of the run's config is :class:`SyncSettings` (GRPO's config is one;
:class:`PublishSettings` holds the defaults for a trainer without those knobs, SFT).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentbolt.adapters.samples import Sample
from agentbolt.training.publish import EngineInfo, Publisher, numerics_match
from agentbolt.training.staleness import StalenessSplit, split_stale
from agentbolt.training.versions import (
    PublishedVersions,
    VersionLineage,
    resume_version,
)

if TYPE_CHECKING:
    from agentbolt.training.batch import TokenSequence

__all__ = ["PolicySync", "PublishSettings", "SyncSettings", "probe_of"]

log = logging.getLogger("agentbolt.training")


class SyncSettings(Protocol):
    """What :class:`PolicySync` reads of a run's config."""

    @property
    def lora_dir(self) -> str | None:
        """Where LoRAs are saved for engines that read them from disk (None: ``run_dir/loras``)."""
        ...

    @property
    def check_publish(self) -> bool:
        """Probe the engine's logprobs after each publish."""
        ...

    @property
    def publish_tolerance(self) -> float: ...

    @property
    def recompute_old_logprobs(self) -> bool | None:
        """None: decided by :func:`~agentbolt.training.publish.numerics_match`."""
        ...

    @property
    def max_policy_lag(self) -> int: ...


@dataclass(frozen=True, slots=True)
class PublishSettings:
    """:class:`SyncSettings` with the defaults of GRPO's config, for a trainer that has no such knobs (SFT)."""

    lora_dir: str | None = None
    check_publish: bool = True
    publish_tolerance: float = 1e-3
    recompute_old_logprobs: bool | None = None
    max_policy_lag: int = 2


class PolicySync:
    """Publishing, version bookkeeping and the π_old decision of one training run."""

    def __init__(self, control: Any, policy: Any, info: EngineInfo, config: SyncSettings, run_dir: Path) -> None:
        self.config = config
        self.info = info
        self.publisher = Publisher(control, policy, info, lora_dir=config.lora_dir or run_dir / "loras",
                                   check=config.check_publish, tolerance=config.publish_tolerance)
        self.publisher.require_supported()
        self.published = PublishedVersions(run_dir)
        self.lineage = VersionLineage()
        self.control = control
        matched = numerics_match(policy, info)
        wanted = config.recompute_old_logprobs
        self.recompute_old = (not matched) if wanted is None else wanted
        """Whether the update recomputes π_old (see the module doc)."""

    def describe(self, policy: Any) -> str:
        how = "recomputed by the trainer" if self.recompute_old else "the engine's sampling-time logprobs"
        return (f"policy {policy.dtype} on {policy.device}; engine: {self.info.describe()}; π_old: {how}")

    def start(self, version: int | None, updates: int) -> None:
        """A fresh run: ``version`` (served now) holds the policy's starting weights."""
        if version is not None:
            self.lineage.add(version, updates)

    async def resume(self, state: dict[str, Any], updates: int) -> int | None:
        """Republish a checkpoint's weights under a version never used before; returns it."""
        saved = state.get("policy_version")
        self.lineage = VersionLineage.from_json(state.get("lineage"))
        if saved is not None and saved not in self.lineage:  # a checkpoint from before lineages
            self.lineage.add(saved, updates)
        served = await self.control.policy_version()
        version = resume_version(saved, self.published.read(), served)
        if version is not None and version != saved:
            log.info("resuming at policy version %d: versions %s..%d were published after the checkpoint (or are "
                     "served by the engine) and name weights this run no longer has; their rollouts are dropped",
                     version, saved + 1 if saved is not None else "?", version - 1)
        served_now, _ = await self._publish(version, updates, probe=None)
        return served_now

    async def publish(
        self, version: int | None, updates: int, probe: Sequence[int] | None
    ) -> tuple[int | None, dict[str, Any]]:
        """Publish the weights after ``updates`` updates as the version after ``version``
        (and after any this run directory has published before: a fresh run in an old
        ``run_dir`` does not hand out its numbers again)."""
        if version is None:
            return await self._publish(None, updates, probe)
        return await self._publish(max(version, self.published.read() or 0) + 1, updates, probe)

    async def _publish(
        self, version: int | None, updates: int, probe: Sequence[int] | None
    ) -> tuple[int | None, dict[str, Any]]:
        self.published.note(version)
        served, values = await self.publisher.publish(version, probe)
        if served is not None:
            self.published.note(served)
            # versions far behind are forgotten (their rollouts would be too stale anyway)
            self.lineage.add(served, updates, keep_lag=self.config.max_policy_lag + 16)
        return served, values

    def split(self, samples: Sequence[Sample], version: int | None) -> StalenessSplit | None:
        """The samples to train on at ``version`` (None: the engine reports no versions)."""
        if version is None:
            return None
        lineage = self.lineage if version in self.lineage else None
        return split_stale(samples, version, self.config.max_policy_lag, lineage=lineage)

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps (with the policy version)."""
        return {"lineage": self.lineage.to_json()}


def probe_of(samples: Sequence[TokenSequence]) -> list[int] | None:
    """The tokens to probe the engine with after a publish: the first sample's."""
    return list(samples[0].token_ids) if samples else None
