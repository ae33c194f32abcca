"""Attempts of a rollout: read them, report progress and outcome, heartbeat, reward."""

from __future__ import annotations

from fastapi import APIRouter

from agentbolt import semconv
from agentbolt.server.routes.context import (
    ERROR_RESPONSES,
    AdminOnly,
    AttemptIdPath,
    CallerDep,
    ContextDep,
    RolloutIdPath,
    StoreDep,
)
from agentbolt.server.routes.rollouts import sign_claims
from agentbolt.server.schemas import AttemptPatch, ReportAndClaimRequest, RewardRequest
from agentbolt.types import Attempt, ReportAndClaim, Span, now

__all__ = ["router"]

router = APIRouter(prefix="/v1/rollouts/{rollout_id:path}/attempts", tags=["attempts"], responses=ERROR_RESPONSES)


@router.get("", response_model=list[Attempt], summary="List a rollout's attempts")
async def query_attempts(rollout_id: RolloutIdPath, store: StoreDep, caller: CallerDep) -> list[Attempt]:
    """All attempts of the rollout, oldest first."""
    caller.require_rollout(rollout_id, "reading another rollout's attempts")
    return await store.query_attempts(rollout_id)


@router.get("/{attempt_id}", response_model=Attempt, summary="Get an attempt")
async def get_attempt(
    rollout_id: RolloutIdPath, attempt_id: AttemptIdPath, store: StoreDep, caller: CallerDep
) -> Attempt:
    caller.require_rollout(rollout_id, "reading another rollout's attempts")
    return await store.get_attempt(rollout_id, attempt_id)


@router.patch(
    "/{attempt_id}", response_model=Attempt, summary="Report an attempt's progress or outcome", dependencies=[AdminOnly]
)
async def update_attempt(
    rollout_id: RolloutIdPath, attempt_id: AttemptIdPath, body: AttemptPatch, store: StoreDep
) -> Attempt:
    """Set ``status`` (running, succeeded, failed...), an ``error``, or merge
    ``metadata``. Re-sending the same outcome is a no-op; illegal moves are 409."""
    return await store.update_attempt(
        rollout_id, attempt_id, status=body.status, error=body.error, metadata=body.metadata
    )


@router.post(
    "/{attempt_id}/report-and-claim",
    response_model=ReportAndClaim,
    summary="Report an attempt's outcome and claim the worker's next rollouts",
    tags=["queue"],
    dependencies=[AdminOnly],
)
async def report_and_claim(
    rollout_id: RolloutIdPath, attempt_id: AttemptIdPath, body: ReportAndClaimRequest, store: StoreDep, ctx: ContextDep
) -> ReportAndClaim:
    """``PATCH`` of the attempt, then ``POST /v1/claims``, in one request: the answer holds
    the attempt as reported and the new claims, each with its scoped ``token``. If the
    report fails, nothing is claimed. Re-sending the same ``request_id`` returns the same
    claims."""
    done = await store.report_and_claim(
        rollout_id, attempt_id, status=body.status, error=body.error, metadata=body.metadata,
        worker_id=body.worker_id, limit=body.limit, request_id=body.request_id,
    )
    sign_claims(done.claims, await ctx.secret())
    return done


@router.post("/{attempt_id}/heartbeat", response_model=Attempt, summary="Keep an attempt alive")
async def heartbeat(
    rollout_id: RolloutIdPath, attempt_id: AttemptIdPath, store: StoreDep, caller: CallerDep
) -> Attempt:
    """The answer's ``status`` tells the worker whether to go on: stop the agent if it
    is no longer ``preparing`` or ``running`` (timed out, cancelled...)."""
    caller.require_attempt(rollout_id, attempt_id, "heartbeating another attempt")
    return await store.heartbeat(rollout_id, attempt_id)


@router.post("/{attempt_id}/reward", response_model=Span, summary="Report the attempt's reward")
async def post_reward(
    rollout_id: RolloutIdPath,
    attempt_id: AttemptIdPath,
    body: RewardRequest,
    store: StoreDep,
    caller: CallerDep,
    ctx: ContextDep,
) -> Span:
    """Stores a reward span (``agentbolt.reward``) on the attempt and returns it. Send a
    ``span_id`` to make retries safe."""
    caller.require_attempt(rollout_id, attempt_id, "reporting another attempt's reward")
    rewards, primary = body.named()
    t = now()
    fields = {"span_id": body.span_id} if body.span_id else {}
    span = Span(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        name=semconv.REWARD_SPAN,
        attributes=semconv.reward_span_attributes(rewards, primary),
        start_time=t,
        end_time=t,
        **fields,
    )
    stored = await store.add_spans([span])
    ctx.telemetry.spans_ingested(1)
    return stored[0]
