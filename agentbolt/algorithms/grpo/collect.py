"""A step's finished groups → the batch one policy trains on, each rollout read once.

Two halves, so that several policies trained on the same rollouts
(:class:`~.policies.GRPOPolicies`) share the reading:

* :func:`read_rollouts` — the store half, once per step: each rollout's place in its
  group (its reward; a failure sits out, or enters with ``failure_reward`` when the agent
  program itself failed: :mod:`.failures`) and its latest attempt's spans, parsed into
  model calls **once** (:func:`~agentbolt.adapters.parse_attempts`);
* :func:`build_batch` — one policy's half: its :class:`~agentbolt.adapters.SampleAdapter`
  builds the samples from those calls, and the same calls are checked for how they were
  sampled (:mod:`.onpolicy`). A rollout sampled otherwise is refused (``off_policy``), one
  without a successful call is counted (``no_model_call``).
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentbolt.adapters.attempts import AttemptCalls, parse_attempts
from agentbolt.adapters.samples import RolloutSamples, Sample, SampleAdapter
from agentbolt.algorithms.grpo.advantages import GroupMember
from agentbolt.algorithms.grpo.failures import program_failure
from agentbolt.algorithms.grpo.groups import Group
from agentbolt.algorithms.grpo.merging import merge_metrics
from agentbolt.algorithms.grpo.onpolicy import OffPolicySamplingError, off_policy_in, refusal
from agentbolt.metrics.rows import DropReason
from agentbolt.types import Rollout, RolloutStatus

__all__ = ["GRPOBatch", "RolloutRead", "StepRollouts", "build_batch", "mean_or_none", "read_rollouts",
           "rollout_samples", "std_or_none"]

log = logging.getLogger("agentbolt.algorithms.grpo")


@dataclass(frozen=True, slots=True)
class RolloutRead:
    """One finished rollout of a step, as read from the store."""

    rollout: Rollout
    member: GroupMember
    """Its place in its group: its reward, ``failure_reward`` (a program failure), or failed
    (sits out: never trained, not in the baseline)."""
    program_failure: bool = False
    """It failed by the agent program's own fault and enters with ``failure_reward``."""
    attempts: tuple[AttemptCalls, ...] = ()
    """Its latest attempt's model calls, parsed once; empty when it sits out."""


@dataclass(frozen=True, slots=True)
class StepRollouts:
    """The rollouts of one step's groups (group id → its rollouts, in order), read once."""

    groups: Mapping[str, Sequence[RolloutRead]]

    @property
    def total(self) -> int:
        """How many rollouts the step has."""
        return sum(len(reads) for reads in self.groups.values())

    @property
    def rollout_ids(self) -> list[str]:
        """Every rollout of the step, in group order."""
        return [x.rollout.rollout_id for reads in self.groups.values() for x in reads]


async def read_rollouts(store: Any, groups: Sequence[Group], failure_reward: float | None) -> StepRollouts:
    """Read ``groups``' finished rollouts: each one's group member and, unless it sits out
    as a failure, its latest attempt's model calls (each span parsed once). The caller
    flushed the gateway first: the spans are all in the store."""
    out: dict[str, list[RolloutRead]] = {}
    for g in groups:
        reads = out.setdefault(g.group_id, [])
        for r in g.rollouts:
            member, penalised = GroupMember.from_rollout(r), False
            if member.failed:
                if not await _penalised(store, r, failure_reward):
                    reads.append(RolloutRead(r, member))
                    continue
                member, penalised = GroupMember(r.rollout_id, failure_reward), True
            attempts = parse_attempts(await store.get_spans(r.rollout_id, "latest"))
            reads.append(RolloutRead(r, member, penalised, tuple(attempts)))
    return StepRollouts(out)


@dataclass
class GRPOBatch:
    """One policy's share of a step: its group members, samples, and what was left out."""

    members: dict[str, list[GroupMember]] = field(default_factory=dict)
    """Group id → its rollouts' members (what the advantages are computed from)."""
    samples: list[Sample] = field(default_factory=list)
    per_rollout: list[RolloutSamples] = field(default_factory=list)
    rewards: list[float | None] = field(default_factory=list)
    no_calls: int = 0
    off_policy: int = 0
    """Rollouts refused because a training call was sampled otherwise than the ratio assumes."""
    program_failures: int = 0
    """Failed rollouts trained with ``failure_reward`` (the agent program's own failure)."""
    refused: dict[str, DropReason] = field(default_factory=dict)
    """Rollouts that built no sample: refused as ``off_policy``, or with ``no_model_call``."""

    def metrics(self, threshold: float) -> dict[str, Any]:
        """Reward, success rate, rollouts and samples counted, merging (``merge/...``)."""
        scored = [r for r in self.rewards if r is not None]
        return {
            "reward/mean": mean_or_none(scored), "reward/std": std_or_none(scored),
            "success_rate": mean_or_none([1.0 if r >= threshold else 0.0 for r in scored]),
            "rollouts/total": len(self.rewards), "rollouts/no_model_calls": self.no_calls,
            "rollouts/off_policy_sampling": self.off_policy, "rollouts/program_failures": self.program_failures,
            "samples/total": len(self.samples), **merge_metrics(self.per_rollout),
        }


def build_batch(read: StepRollouts, adapter: SampleAdapter) -> GRPOBatch:
    """The batch ``adapter`` (one policy's ``agent_match``) builds from a step's rollouts.
    Raises :class:`~.onpolicy.OffPolicySamplingError` when every rollout of the step was
    sampled otherwise than the ratio assumes: the gateway is set up wrong."""
    batch = GRPOBatch()
    for group_id, reads in read.groups.items():
        members = batch.members.setdefault(group_id, [])
        for x in reads:
            members.append(x.member)
            if x.member.failed:
                batch.rewards.append(x.rollout.reward)
                continue
            batch.rewards.append(x.member.reward)
            batch.program_failures += x.program_failure
            try:
                found = rollout_samples(x.rollout.rollout_id, x.attempts, adapter)
            except OffPolicySamplingError as exc:  # sampled otherwise than the ratio assumes
                if not batch.off_policy:
                    log.warning("%s", exc)
                batch.off_policy += 1
                batch.refused[x.rollout.rollout_id] = "off_policy"
                if not batch.per_rollout and batch.off_policy == read.total:
                    raise  # every rollout of the step: the gateway is set up wrong, say so
                continue
            if found is None:
                batch.no_calls += 1
                if x.rollout.status == RolloutStatus.FAILED:  # no call succeeded: infrastructure, not the program
                    members[-1] = GroupMember(x.rollout.rollout_id, None, failed=True)
                    batch.rewards[-1] = x.rollout.reward
                    batch.program_failures -= 1
                batch.refused[x.rollout.rollout_id] = "no_model_call"
                continue
            batch.per_rollout.append(found)
            batch.samples.extend(found.samples)
    if batch.no_calls:  # they train nothing: say why, once a step
        from agentbolt.adapters.no_model_call import left_out
        log.warning("%s", left_out("GRPO", batch.no_calls, len(batch.rewards)))
    return batch


def rollout_samples(rollout_id: str, attempts: Sequence[AttemptCalls], adapter: SampleAdapter) -> RolloutSamples | None:
    """The samples of a rollout's latest attempt, built from its parsed calls; None when
    no model call succeeded. Raises :class:`~.onpolicy.OffPolicySamplingError` when a call
    the samples were built from was sampled otherwise than the ratio assumes."""
    if not any(a.succeeded for a in attempts):
        return None
    found = adapter.adapt_calls(attempts)
    if not found:
        return None
    calls = [c for a in attempts for c in a.calls]
    mismatched = off_policy_in(calls, [i for s in found[-1].samples for i in s.span_ids])
    if mismatched:
        raise OffPolicySamplingError(refusal(rollout_id, mismatched))
    return found[-1]


async def _penalised(store: Any, rollout: Rollout, failure_reward: float | None) -> bool:
    """Whether a failed rollout enters its group with ``failure_reward`` (:mod:`.failures`)."""
    if failure_reward is None or rollout.latest_attempt_id is None:
        return False
    return program_failure(rollout, await store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id))


def mean_or_none(xs: Sequence[float]) -> float | None:
    """The mean of ``xs``; None when empty."""
    return statistics.fmean(xs) if xs else None


def std_or_none(xs: Sequence[float]) -> float | None:
    """The population standard deviation of ``xs``: 0.0 for one value, None for none."""
    return statistics.pstdev(xs) if len(xs) > 1 else (0.0 if xs else None)
