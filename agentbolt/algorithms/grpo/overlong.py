"""Truncated answers (cut at ``max_tokens``): train on them, mask them, or drop their rollout.

An answer cut at ``max_tokens`` ends where the budget did, not where the policy did, and
its reward is usually that of an unfinished answer; DAPO's *overlong filtering* keeps such
tokens out of the loss so the policy is not pushed away from reasoning that merely ran
long. Each call's ``finish_reason`` is kept in its sample (:class:`~agentbolt.adapters.SampleCall`);
``GRPOConfig.overlong`` says what to do with the trained calls whose reason is ``length``:

* ``keep`` (default): trained like any other call;
* ``mask``: that call's response tokens get loss mask 0 (the rest of the sample trains;
  a sample left with no trained token is dropped);
* ``drop``: every sample of a rollout with such a call is left out of the update.

Either way the rollout still counts in its group's advantages (its reward is part of the
group's baseline, as in DAPO); only its tokens' loss goes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

from agentbolt.adapters.samples import Sample

__all__ = ["OverlongRule", "filter_overlong", "truncated_calls"]

OverlongRule = Literal["keep", "mask", "drop"]


def truncated_calls(samples: Sequence[Sample]) -> int:
    """How many trained calls in ``samples`` were cut at ``max_tokens``."""
    return sum(1 for s in samples for c in s.calls if c.trained and c.truncated)


def filter_overlong(samples: Sequence[Sample], rule: OverlongRule) -> list[Sample]:
    """``samples`` with the truncated calls handled as ``rule`` says (see module doc)."""
    if rule == "keep":
        return list(samples)
    if rule == "drop":
        cut = {s.rollout_id for s in samples if any(c.trained and c.truncated for c in s.calls)}
        return [s for s in samples if s.rollout_id not in cut]
    if rule != "mask":
        raise ValueError(f"overlong must be 'keep', 'mask' or 'drop', got {rule!r}")
    out = []
    for s in samples:
        if any(c.trained and c.truncated for c in s.calls):
            s = _masked(s)
        if s.num_response_tokens:
            out.append(s)
    return out


def _masked(sample: Sample) -> Sample:
    mask, logprobs, versions = list(sample.loss_mask), list(sample.logprobs), list(sample.versions)
    for c in sample.calls:
        if c.trained and c.truncated:
            for t in range(c.start, c.start + c.length):
                mask[t], logprobs[t], versions[t] = 0, 0.0, None
    calls = tuple(dataclasses.replace(c, trained=False) if c.trained and c.truncated else c for c in sample.calls)
    return dataclasses.replace(sample, loss_mask=mask, logprobs=logprobs, versions=versions, calls=calls)
