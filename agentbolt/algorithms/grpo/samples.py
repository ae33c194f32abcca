"""Training samples from one rollout's model calls, by exact-prefix merging.

A multi-turn agent calls the model again and again on a growing conversation. When the
next call's prompt token ids start *exactly* with the current sample's tokens (previous
prompt + response), the call extends that sample: the tokens in between (tool output,
a new user turn) are context, with loss mask 0, and the new response tokens are trained
(mask 1). Otherwise — the chat template re-rendered an earlier turn with other tokens,
another agent called, the history was truncated — a new sample starts and the miss is
counted. One sample is then one forward pass, trained on exactly the tokens the model
sampled, with their sampling-time logprobs and the policy version that produced them.

Calls without the engine's token ids or logprobs are refused: agentbolt never
retokenizes text (see :func:`agentbolt.adapters.require_token_ids`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from agentbolt.adapters.calls import ModelCall, extract_model_calls, group_by_attempt
from agentbolt.adapters.triplets import MissingTokenIdsError
from agentbolt.tracing.names import LLM_POLICY_VERSION
from agentbolt.types import Span

__all__ = ["POLICY_VERSION", "RolloutSamples", "Sample", "build_samples", "samples_from_spans"]

POLICY_VERSION = LLM_POLICY_VERSION
"""Span attribute (written by the gateway) with the policy version that answered the call."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One training sequence: ``token_ids[t]`` is trained when ``loss_mask[t] == 1``.

    ``logprobs[t]`` is log π_behav(token t | tokens < t) at sampling time and
    ``versions[t]`` the policy version that sampled it (both 0.0 / None where the mask
    is 0). ``advantage`` is the rollout's, set by :func:`~.advantages.apply_advantages`.
    """

    rollout_id: str
    attempt_id: str
    token_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    versions: list[int | None]
    span_ids: list[str]
    advantage: float = 0.0

    @property
    def num_response_tokens(self) -> int:
        """How many tokens are trained (mask 1)."""
        return sum(self.loss_mask)

    @property
    def oldest_version(self) -> int | None:
        """The oldest policy version among the trained tokens (None: not recorded)."""
        known = [v for v, m in zip(self.versions, self.loss_mask, strict=True) if m and v is not None]
        return min(known) if known else None


@dataclass(frozen=True, slots=True)
class RolloutSamples:
    """The samples of one rollout attempt, and how merging went."""

    rollout_id: str
    attempt_id: str
    samples: list[Sample] = field(default_factory=list)
    num_calls: int = 0
    merge_misses: int = 0
    """Calls after the first that could not extend the current sample and started a new one."""

    @property
    def merge_rate(self) -> float:
        """Share of follow-up calls that merged (1.0 when there was at most one call)."""
        follow_ups = self.num_calls - 1
        return 1.0 if follow_ups <= 0 else 1.0 - self.merge_misses / follow_ups


def samples_from_spans(spans: Iterable[Span]) -> list[RolloutSamples]:
    """:func:`build_samples` for each attempt in ``spans`` (pass only the attempts to
    train on, e.g. ``store.get_spans(rollout_id, "latest")``)."""
    return [build_samples(extract_model_calls(group)) for group in group_by_attempt(spans)]


def build_samples(calls: Sequence[ModelCall]) -> RolloutSamples:
    """Merge the model calls of one attempt (in start order; failed calls are skipped)
    into samples by exact token prefix."""
    calls = [c for c in calls if not c.failed]
    if not calls:
        raise ValueError("no successful model calls to build samples from: the attempt made none, or every call failed")
    rollout_id, attempt_id = calls[0].rollout_id, calls[0].attempt_id
    if any((c.rollout_id, c.attempt_id) != (rollout_id, attempt_id) for c in calls):
        raise ValueError("build_samples takes the calls of one attempt; split them with group_by_attempt first")
    _require_tokens(calls)

    samples: list[_Draft] = []
    misses = 0
    for call in calls:
        prompt = call.prompt_token_ids or []
        current = samples[-1] if samples else None
        if current is not None and _starts_with(prompt, current.token_ids):
            current.add_context(prompt[len(current.token_ids):])
        else:
            if current is not None:
                misses += 1
            current = _Draft(rollout_id, attempt_id)
            current.add_context(prompt)
            samples.append(current)
        current.add_response(call)
    return RolloutSamples(rollout_id, attempt_id, [d.freeze() for d in samples], len(calls), misses)


@dataclass(slots=True)
class _Draft:
    rollout_id: str
    attempt_id: str
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int | None] = field(default_factory=list)
    span_ids: list[str] = field(default_factory=list)

    def add_context(self, ids: Sequence[int]) -> None:
        self.token_ids += ids
        self.loss_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        self.versions += [None] * len(ids)

    def add_response(self, call: ModelCall) -> None:
        ids, lps = call.response_token_ids or [], call.response_logprobs or []
        version = call.attributes.get(POLICY_VERSION)
        version = version if isinstance(version, int) and not isinstance(version, bool) else None
        self.token_ids += ids
        self.loss_mask += [1] * len(ids)
        self.logprobs += lps
        self.versions += [version] * len(ids)
        self.span_ids.append(call.span_id)

    def freeze(self) -> Sample:
        return Sample(self.rollout_id, self.attempt_id, self.token_ids, self.loss_mask, self.logprobs, self.versions,
                      self.span_ids)


def _starts_with(ids: Sequence[int], prefix: Sequence[int]) -> bool:
    return len(ids) >= len(prefix) and list(ids[: len(prefix)]) == list(prefix)


def _require_tokens(calls: Sequence[ModelCall]) -> None:
    missing = [c for c in calls if not c.has_token_ids]
    if missing:
        raise MissingTokenIdsError(
            f"{len(missing)} of {len(calls)} model calls of rollout {calls[0].rollout_id} have no token ids from the "
            f"engine (e.g. span {missing[0].span_id}, model {missing[0].model or 'unknown'}), so they cannot be "
            "trained with GRPO; agentbolt does not retokenize text. Route the agent through the gateway, or serve "
            "the model with an engine that returns token ids (vLLM: extra_body={'return_token_ids': True})."
        )
    bad = [c for c in calls if c.response_logprobs is None or len(c.response_logprobs) != len(c.response_token_ids or [])]
    if bad:
        raise MissingTokenIdsError(
            f"model call {bad[0].span_id} of rollout {bad[0].rollout_id} has no sampling-time logprob for every "
            "response token, which GRPO's importance ratio needs. Ask the engine for them (OpenAI API: "
            "logprobs=True); the gateway does this for you."
        )
