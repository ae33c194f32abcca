"""Training calls must be sampled from the distribution the engine reports logprobs of.

The engine's chosen-token logprobs are those of the raw model distribution
p(y) = softmax(z)_y — log-softmax of the logits at temperature 1, before any filter or
penalty (the transformers engine always, vLLM by default). GRPO uses them as
log π_behav(y) in the importance ratio, which is only right when y was drawn from p itself.
Anything that reshapes the distribution before drawing — temperature T ≠ 1 (softmax(z/T)),
top-p / top-k / min-p filtering, presence / frequency / repetition penalties, logit
biases, a minimum length (EOS masked), banned or allowed token lists, best-of-n — makes
the tokens come from some q ≠ p while the ratio divides by p: off-policy, uncorrected.
Constrained decoding (``response_format``, guided decoding) is one more such filter.

So training calls are sampled with :data:`TRAIN_SAMPLING` (GRPO has the gateway force it:
temperature and top-p set to 1, the other fields removed), and :func:`sampling_mismatch`
checks the request recorded on each call's span — the body *as sent to the engine* — so
a rollout sampled otherwise (a gateway started by hand with other settings) is refused
when its samples are built instead of being trained on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentbolt.adapters.calls import ModelCall, extract_model_calls
from agentbolt.types import Span

__all__ = ["NEUTRAL", "TRAIN_SAMPLING", "OffPolicySamplingError", "force_training_sampling", "off_policy_calls",
           "off_policy_in", "refusal", "sampling_mismatch"]

log = logging.getLogger("agentbolt.algorithms.grpo")

NEUTRAL: dict[str, tuple[Any, ...]] = {
    "temperature": (None, 1, 1.0),
    "top_p": (None, 1, 1.0),
    "top_k": (None, 0, -1),
    "min_p": (None, 0, 0.0),
    "typical_p": (None, 1, 1.0),
    "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0),
    "repetition_penalty": (None, 1, 1.0),
    "logit_bias": (None, {}),
    "min_tokens": (None, 0),
    "bad_words": (None, []),
    "allowed_token_ids": (None, []),
    "best_of": (None, 1),
    "use_beam_search": (None, False),
    # constrained decoding: tokens outside the grammar are masked before drawing
    "response_format": (None, {"type": "text"}),
    "guided_json": (None,),
    "guided_regex": (None,),
    "guided_choice": (None,),
    "guided_grammar": (None,),
    "structured_outputs": (None,),
}
"""Each sampling field that can change the distribution, and its values that do not.

Structured outputs (``response_format`` JSON mode / schema, vLLM's ``guided_*`` and
``structured_outputs``) are among them: constrained decoding masks every token the
grammar forbids, so a constrained call's tokens come from the renormalised, masked
distribution while the engine reports raw logprobs. They are *removed* from training
calls (the policy is sampled unconstrained and learns the format from the reward); an
agent that needs JSON must cope with, or be rewarded for, what the model writes.
Validation and test calls keep them."""

TRAIN_SAMPLING: dict[str, Any] = {"temperature": 1.0, "top_p": 1.0,
                                  **{k: None for k in NEUTRAL if k not in ("temperature", "top_p")}}
"""What the gateway forces on training calls (``None``: the field is removed)."""


class OffPolicySamplingError(ValueError):
    """A training call was sampled from another distribution than the engine's logprobs."""


def force_training_sampling(current: Mapping[str, Any]) -> dict[str, Any]:
    """A gateway's training sampling with :data:`TRAIN_SAMPLING` forced over it (its other
    fields, e.g. ``max_tokens``, kept); a contrary setting is warned about."""
    contrary = {k: v for k, v in current.items() if k in TRAIN_SAMPLING and v != TRAIN_SAMPLING[k]}
    if contrary:
        log.warning("GRPO overrides %s on training calls: its importance ratios need tokens drawn from the "
                    "distribution whose logprobs the engine reports (temperature 1, no filter or penalty)", contrary)
    return {**current, **TRAIN_SAMPLING}


def sampling_mismatch(request: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``request`` (as sent to the engine) that reshape the sampled
    distribution, with their values; empty when it was sampled from the raw one."""
    return {k: request[k] for k, ok in NEUTRAL.items() if k in request and request[k] not in ok}


def off_policy_calls(spans: Iterable[Span], span_ids: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """``span id → mismatching fields`` for the model calls in ``spans`` (only those in
    ``span_ids`` when given: the calls a rollout's samples were built from)."""
    return off_policy_in(extract_model_calls(list(spans)), span_ids)


def off_policy_in(calls: Iterable[ModelCall], span_ids: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """:func:`off_policy_calls` on calls already parsed (:func:`~agentbolt.adapters.parse_attempts`)."""
    wanted = None if span_ids is None else set(span_ids)
    out: dict[str, dict[str, Any]] = {}
    for call in calls:
        if call.failed or (wanted is not None and call.span_id not in wanted):
            continue
        found = sampling_mismatch(call.request)
        if found:
            out[call.span_id] = found
    return out


def refusal(rollout_id: str, mismatches: Mapping[str, Mapping[str, Any]]) -> str:
    """What to tell the user about a rollout refused for its sampling."""
    fields = sorted({f"{k}={v!r}" for m in mismatches.values() for k, v in m.items()})
    return (f"rollout {rollout_id} was sampled with {', '.join(fields)} on {len(mismatches)} training call(s): "
            "its tokens do not come from the distribution whose logprobs the engine reported, so GRPO does not train "
            "on it. Let GRPO set the gateway's training sampling (Trainer(gateway=...) does; for a server you "
            "started, drop --train-temperature and per-call sampling settings)")
