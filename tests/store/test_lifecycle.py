"""The pure state-machine functions every backend uses (``agentbolt.store.lifecycle``).

The expected tables below are written out by hand from the lifecycle diagram, so a
change to the rules shows up here as a failing specification, not silently.
"""

from __future__ import annotations

import itertools

import pytest

from agentbolt.store import lifecycle
from agentbolt.store.errors import InvalidTransitionError
from agentbolt.types import Attempt, AttemptStatus, ErrorInfo, Rollout, RolloutConfig, RolloutStatus

A = AttemptStatus
R = RolloutStatus
T0 = 1_000.0

EXPECTED_ROLLOUT_MOVES: dict[RolloutStatus, set[RolloutStatus]] = {
    R.QUEUING: {R.PREPARING, R.CANCELLED},
    R.PREPARING: {R.RUNNING, R.SUCCEEDED, R.FAILED, R.REQUEUING, R.CANCELLED},
    R.RUNNING: {R.SUCCEEDED, R.FAILED, R.REQUEUING, R.CANCELLED},
    R.REQUEUING: {R.PREPARING, R.RUNNING, R.SUCCEEDED, R.FAILED, R.CANCELLED},
    R.SUCCEEDED: set(),
    R.FAILED: set(),
    R.CANCELLED: set(),
}

EXPECTED_ATTEMPT_MOVES: dict[AttemptStatus, set[AttemptStatus]] = {
    A.PREPARING: {A.RUNNING, A.SUCCEEDED, A.FAILED, A.TIMEOUT, A.UNRESPONSIVE},
    A.RUNNING: {A.SUCCEEDED, A.FAILED, A.TIMEOUT, A.UNRESPONSIVE},
    A.UNRESPONSIVE: {A.RUNNING, A.SUCCEEDED, A.FAILED},
    A.SUCCEEDED: set(),
    A.FAILED: set(),
    A.TIMEOUT: set(),
}


def rollout(status: RolloutStatus = R.QUEUING, **kw: object) -> Rollout:
    return Rollout(rollout_id="ro-1", status=status, created_at=T0, updated_at=T0, **kw)  # type: ignore[arg-type]


def attempt(status: AttemptStatus = A.PREPARING, attempt_id: str = "at-1", **kw: object) -> Attempt:
    return Attempt(
        attempt_id=attempt_id,
        rollout_id="ro-1",
        sequence_id=1,
        status=status,
        start_time=T0,
        last_heartbeat_time=T0,
        **kw,  # type: ignore[arg-type]
    )


def current(
    rollout_status: RolloutStatus = R.PREPARING,
    attempt_status: AttemptStatus = A.PREPARING,
    *,
    attempt_count: int = 1,
    config: RolloutConfig | None = None,
) -> tuple[Rollout, Attempt]:
    """A rollout whose latest attempt is the one returned."""
    r = rollout(rollout_status, latest_attempt_id="at-1", attempt_count=attempt_count, config=config or RolloutConfig())
    return r, attempt(attempt_status)


# ---------------------------------------------------------------------------- tables
def test_the_rollout_table_is_the_documented_one() -> None:
    assert {k: set(v) for k, v in lifecycle.ROLLOUT_TRANSITIONS.items()} == EXPECTED_ROLLOUT_MOVES


def test_the_attempt_table_is_the_documented_one() -> None:
    assert {k: set(v) for k, v in lifecycle.ATTEMPT_TRANSITIONS.items()} == EXPECTED_ATTEMPT_MOVES


@pytest.mark.parametrize(("old", "new"), list(itertools.product(R, R)), ids=lambda s: s.value)
def test_check_rollout_transition_allows_exactly_the_table(old: RolloutStatus, new: RolloutStatus) -> None:
    r = rollout(old)
    if new in EXPECTED_ROLLOUT_MOVES[old]:
        lifecycle.check_rollout_transition(r, new)
    else:
        with pytest.raises(InvalidTransitionError, match=f"from {old.value} to {new.value}"):
            lifecycle.check_rollout_transition(r, new)


@pytest.mark.parametrize(("old", "new"), list(itertools.product(A, A)), ids=lambda s: s.value)
def test_check_attempt_transition_allows_exactly_the_table(old: AttemptStatus, new: AttemptStatus) -> None:
    a = attempt(old)
    if new in EXPECTED_ATTEMPT_MOVES[old]:
        lifecycle.check_attempt_transition(a, new)
    else:
        with pytest.raises(InvalidTransitionError, match=f"from {old.value} to {new.value}"):
            lifecycle.check_attempt_transition(a, new)


# ---------------------------------------------------------------------------- start_attempt
@pytest.mark.parametrize("status", [R.QUEUING, R.REQUEUING])
def test_start_attempt_makes_a_claimable_rollout_preparing(status: RolloutStatus) -> None:
    r = rollout(status, attempt_count=1 if status == R.REQUEUING else 0, reward=0.5)

    a = lifecycle.start_attempt(r, "w1", T0 + 1, latest_resources_version=4)

    assert r.status == R.PREPARING
    assert r.latest_attempt_id == a.attempt_id
    assert r.attempt_count == a.sequence_id == (2 if status == R.REQUEUING else 1)
    assert r.resources_version == a.resources_version == 4
    assert r.reward is None
    assert r.updated_at == T0 + 1
    assert (a.status, a.worker_id, a.start_time, a.last_heartbeat_time) == (A.PREPARING, "w1", T0 + 1, T0 + 1)


def test_start_attempt_keeps_a_pinned_resources_version_and_the_first_start_time() -> None:
    r = rollout(R.REQUEUING, resources_version=1, attempt_count=1, start_time=T0)

    a = lifecycle.start_attempt(r, None, T0 + 5, latest_resources_version=3)

    assert r.resources_version == a.resources_version == 1
    assert r.start_time == T0


@pytest.mark.parametrize("status", [R.PREPARING, R.RUNNING, R.SUCCEEDED, R.FAILED, R.CANCELLED])
def test_start_attempt_refuses_a_rollout_that_is_not_claimable(status: RolloutStatus) -> None:
    r = rollout(status)

    with pytest.raises(InvalidTransitionError):
        lifecycle.start_attempt(r, "w", T0, None)
    assert r.status == status


# ---------------------------------------------------------------------------- touch_attempt
def test_a_sign_of_life_moves_preparing_to_running() -> None:
    r, a = current()

    assert lifecycle.touch_attempt(r, a, T0 + 1) is True
    assert (a.status, a.last_heartbeat_time) == (A.RUNNING, T0 + 1)
    assert r.status == R.RUNNING


def test_a_heartbeat_on_a_running_attempt_only_refreshes_it() -> None:
    r, a = current(R.RUNNING, A.RUNNING)

    assert lifecycle.touch_attempt(r, a, T0 + 2) is False
    assert (a.status, a.last_heartbeat_time, r.status) == (A.RUNNING, T0 + 2, R.RUNNING)


@pytest.mark.parametrize("status", [A.SUCCEEDED, A.FAILED, A.TIMEOUT])
def test_a_heartbeat_on_a_finished_attempt_changes_nothing(status: AttemptStatus) -> None:
    r, a = current(R.REQUEUING, status)

    assert lifecycle.touch_attempt(r, a, T0 + 2) is False
    assert (a.status, a.last_heartbeat_time, r.status) == (status, T0, R.REQUEUING)


def test_an_unresponsive_attempt_not_yet_replaced_recovers_on_a_sign_of_life() -> None:
    r, a = current(R.REQUEUING, A.UNRESPONSIVE)

    assert lifecycle.touch_attempt(r, a, T0 + 3) is True
    assert (a.status, a.last_heartbeat_time, r.status) == (A.RUNNING, T0 + 3, R.RUNNING)


def test_a_replaced_unresponsive_attempt_does_not_recover_on_a_sign_of_life() -> None:
    r, a = current(R.PREPARING, A.UNRESPONSIVE)
    r.latest_attempt_id = "at-2"

    assert lifecycle.touch_attempt(r, a, T0 + 3) is False
    assert (a.status, r.status) == (A.UNRESPONSIVE, R.PREPARING)


# ---------------------------------------------------------------------------- finish_attempt
# (rollout config, attempt outcome, error, attempts used) -> rollout status afterwards
OUTCOMES = [
    ("success", RolloutConfig(), A.SUCCEEDED, None, 1, R.SUCCEEDED),
    ("agent failure is final by default", RolloutConfig(), A.FAILED, None, 1, R.FAILED),
    ("retry_on failed requeues", RolloutConfig(retry_on=[A.FAILED]), A.FAILED, None, 1, R.REQUEUING),
    ("retryable error requeues", RolloutConfig(), A.FAILED, ErrorInfo(retryable=True), 1, R.REQUEUING),
    ("non-retryable error fails", RolloutConfig(), A.FAILED, ErrorInfo(retryable=False), 1, R.FAILED),
    ("timeout requeues by default", RolloutConfig(), A.TIMEOUT, None, 1, R.REQUEUING),
    ("unresponsive requeues by default", RolloutConfig(), A.UNRESPONSIVE, None, 2, R.REQUEUING),
    ("timeout not in retry_on fails", RolloutConfig(retry_on=[A.UNRESPONSIVE]), A.TIMEOUT, None, 1, R.FAILED),
    ("last try timing out fails", RolloutConfig(max_attempts=3), A.TIMEOUT, None, 3, R.FAILED),
    (
        "last try fails even if retryable",
        RolloutConfig(max_attempts=2, retry_on=[A.FAILED]),
        A.FAILED,
        ErrorInfo(retryable=True),
        2,
        R.FAILED,
    ),
    ("one try only", RolloutConfig(max_attempts=1), A.UNRESPONSIVE, None, 1, R.FAILED),
]


@pytest.mark.parametrize(
    ("config", "outcome", "error", "used", "expected"), [o[1:] for o in OUTCOMES], ids=[o[0] for o in OUTCOMES]
)
@pytest.mark.parametrize("rollout_status", [R.PREPARING, R.RUNNING])
def test_finish_attempt_decides_the_rollout_by_outcome_and_retry_policy(
    rollout_status: RolloutStatus,
    config: RolloutConfig,
    outcome: AttemptStatus,
    error: ErrorInfo | None,
    used: int,
    expected: RolloutStatus,
) -> None:
    attempt_status = A.PREPARING if rollout_status == R.PREPARING else A.RUNNING
    r, a = current(rollout_status, attempt_status, attempt_count=used, config=config)

    assert lifecycle.finish_attempt(r, a, outcome, T0 + 5, error) is True

    assert a.status == outcome
    assert a.end_time == T0 + 5
    assert a.error == error
    assert r.status == expected
    assert r.end_time == (T0 + 5 if expected.is_terminal else None)
    assert r.updated_at == T0 + 5


def test_re_reporting_the_same_outcome_is_a_no_op() -> None:
    r, a = current(R.SUCCEEDED, A.SUCCEEDED)
    a.end_time = T0 + 1

    assert lifecycle.finish_attempt(r, a, A.SUCCEEDED, T0 + 9) is False
    assert (a.end_time, r.status) == (T0 + 1, R.SUCCEEDED)


def test_an_attempt_cannot_be_sent_back_to_preparing() -> None:
    r, a = current(R.RUNNING, A.RUNNING)

    with pytest.raises(InvalidTransitionError):
        lifecycle.finish_attempt(r, a, A.PREPARING, T0)


@pytest.mark.parametrize(
    ("finished", "report"),
    [
        (f, r)
        for f, r in itertools.product([A.SUCCEEDED, A.FAILED, A.TIMEOUT], [A.SUCCEEDED, A.FAILED, A.UNRESPONSIVE])
        if f != r
    ],
    ids=lambda s: s.value,
)
def test_a_finished_attempt_cannot_report_another_outcome(finished: AttemptStatus, report: AttemptStatus) -> None:
    r, a = _finished(finished)

    with pytest.raises(InvalidTransitionError):
        lifecycle.finish_attempt(r, a, report, T0)
    assert a.status == finished


@pytest.mark.parametrize("finished", [A.SUCCEEDED, A.FAILED, A.TIMEOUT])
def test_reporting_running_on_a_finished_attempt_is_only_a_sign_of_life(finished: AttemptStatus) -> None:
    """``running`` is handled like a heartbeat: the answer (a finished attempt) tells the
    runner to stop, instead of an error."""
    r, a = _finished(finished)

    assert lifecycle.finish_attempt(r, a, A.RUNNING, T0 + 1) is False
    assert (a.status, a.last_heartbeat_time) == (finished, T0)


def _finished(status: AttemptStatus) -> tuple[Rollout, Attempt]:
    """A finished attempt with its rollout as the store would leave it."""
    return current(R.REQUEUING if status == A.TIMEOUT else RolloutStatus(status.value), status)


def test_finish_attempt_running_is_a_sign_of_life() -> None:
    r, a = current()

    assert lifecycle.finish_attempt(r, a, A.RUNNING, T0 + 1) is True
    assert (a.status, a.end_time, r.status) == (A.RUNNING, None, R.RUNNING)


def test_an_attempt_that_is_not_the_latest_never_changes_the_rollout() -> None:
    r, a = current(R.RUNNING, A.RUNNING)
    r.latest_attempt_id = "at-2"

    assert lifecycle.finish_attempt(r, a, A.SUCCEEDED, T0 + 1) is True
    assert a.status == A.SUCCEEDED
    assert (r.status, r.end_time) == (R.RUNNING, None)


@pytest.mark.parametrize("late", [A.SUCCEEDED, A.FAILED])
def test_a_superseded_unresponsive_attempt_keeps_its_late_report_but_not_the_rollout(late: AttemptStatus) -> None:
    r, a = current(R.RUNNING, A.UNRESPONSIVE, attempt_count=2)
    r.latest_attempt_id = "at-2"
    error = ErrorInfo(message="late") if late == A.FAILED else None

    assert lifecycle.finish_attempt(r, a, late, T0 + 7, error) is True
    assert (a.status, a.end_time) == (late, T0 + 7)
    assert a.error == error
    assert (r.status, r.end_time, r.updated_at) == (R.RUNNING, None, T0)


def test_a_superseded_unresponsive_attempt_cannot_time_out() -> None:
    r, a = current(R.RUNNING, A.UNRESPONSIVE, attempt_count=2)
    r.latest_attempt_id = "at-2"

    with pytest.raises(InvalidTransitionError):
        lifecycle.finish_attempt(r, a, A.TIMEOUT, T0)


def test_a_superseded_unresponsive_attempt_saying_it_is_running_revives_nothing() -> None:
    r, a = current(R.RUNNING, A.UNRESPONSIVE, attempt_count=2)
    r.latest_attempt_id = "at-2"

    assert lifecycle.finish_attempt(r, a, A.RUNNING, T0 + 1) is False
    assert (a.status, r.status) == (A.UNRESPONSIVE, R.RUNNING)


@pytest.mark.parametrize(
    ("outcome", "error", "expected"),
    [
        (A.SUCCEEDED, None, R.SUCCEEDED),
        (A.FAILED, None, R.FAILED),
        (A.FAILED, ErrorInfo(retryable=True), R.REQUEUING),
    ],
    ids=["success", "failure", "retryable-failure"],
)
def test_an_unresponsive_attempt_not_yet_replaced_decides_the_rollout_when_it_reports(
    outcome: AttemptStatus, error: ErrorInfo | None, expected: RolloutStatus
) -> None:
    r, a = current(R.REQUEUING, A.UNRESPONSIVE)

    assert lifecycle.finish_attempt(r, a, outcome, T0 + 4, error) is True
    assert a.status == outcome
    assert r.status == expected


def test_a_report_on_a_cancelled_rollout_stays_on_the_attempt() -> None:
    r, a = current(R.CANCELLED, A.UNRESPONSIVE)

    assert lifecycle.finish_attempt(r, a, A.SUCCEEDED, T0 + 1) is True
    assert a.status == A.SUCCEEDED
    assert r.status == R.CANCELLED


# ---------------------------------------------------------------------------- deadlines
DEADLINES = RolloutConfig(timeout_seconds=10, unresponsive_seconds=4)


@pytest.mark.parametrize(
    ("started", "last_heartbeat", "now", "expected"),
    [
        (T0, T0, T0 + 3.9, None),
        (T0, T0, T0 + 4, A.UNRESPONSIVE),
        (T0, T0 + 7, T0 + 9.9, None),
        (T0, T0 + 9, T0 + 10, A.TIMEOUT),
        (T0, T0, T0 + 10, A.TIMEOUT),  # both deadlines passed: the timeout wins
    ],
    ids=["in-time", "silent", "heartbeating", "too-long", "both"],
)
@pytest.mark.parametrize("status", [A.PREPARING, A.RUNNING])
def test_expired_status_tells_timeout_from_unresponsive(
    status: AttemptStatus, started: float, last_heartbeat: float, now: float, expected: AttemptStatus | None
) -> None:
    r = rollout(R.RUNNING, config=DEADLINES, latest_attempt_id="at-1")
    a = attempt(status)
    a.start_time, a.last_heartbeat_time = started, last_heartbeat

    assert lifecycle.expired_status(r, a, now) == expected


@pytest.mark.parametrize("status", [A.SUCCEEDED, A.FAILED, A.TIMEOUT, A.UNRESPONSIVE])
def test_a_finished_attempt_never_expires(status: AttemptStatus) -> None:
    r = rollout(R.REQUEUING, config=DEADLINES, latest_attempt_id="at-1")

    assert lifecycle.expired_status(r, attempt(status), T0 + 1_000) is None


def test_without_deadlines_an_attempt_never_expires() -> None:
    r, a = current(R.RUNNING, A.RUNNING)

    assert lifecycle.expired_status(r, a, T0 + 1e9) is None


@pytest.mark.parametrize(("now", "expected"), [(T0 + 10, A.TIMEOUT), (T0 + 4, A.UNRESPONSIVE)])
def test_expire_attempt_records_why_and_requeues(now: float, expected: AttemptStatus) -> None:
    r, a = current(R.RUNNING, A.RUNNING, config=DEADLINES)

    assert lifecycle.expire_attempt(r, a, now) is True
    assert a.status == expected
    assert a.end_time == now
    assert a.error is not None and a.error.type == expected.value
    assert r.status == R.REQUEUING


def test_expire_attempt_leaves_a_live_attempt_alone() -> None:
    r, a = current(R.RUNNING, A.RUNNING, config=DEADLINES)

    assert lifecycle.expire_attempt(r, a, T0 + 1) is False
    assert (a.status, r.status) == (A.RUNNING, R.RUNNING)


# ---------------------------------------------------------------------------- cancel
@pytest.mark.parametrize("status", [R.QUEUING, R.PREPARING, R.RUNNING, R.REQUEUING])
def test_cancel_ends_a_live_rollout_and_fails_its_active_attempt(status: RolloutStatus) -> None:
    active = status in (R.PREPARING, R.RUNNING)
    r, a = current(status, A.RUNNING if active else A.FAILED)

    assert lifecycle.cancel_rollout(r, a if status != R.QUEUING else None, T0 + 2) is True
    assert (r.status, r.end_time, r.updated_at) == (R.CANCELLED, T0 + 2, T0 + 2)
    if active:
        assert (a.status, a.end_time) == (A.FAILED, T0 + 2)
        assert a.error is not None and a.error.type == "cancelled"
    else:
        assert (a.status, a.end_time, a.error) == (A.FAILED, None, None)


def test_cancelling_twice_is_a_no_op() -> None:
    r = rollout(R.CANCELLED, end_time=T0)

    assert lifecycle.cancel_rollout(r, None, T0 + 5) is False
    assert r.end_time == T0


@pytest.mark.parametrize("status", [R.SUCCEEDED, R.FAILED])
def test_a_finished_rollout_cannot_be_cancelled(status: RolloutStatus) -> None:
    with pytest.raises(InvalidTransitionError):
        lifecycle.cancel_rollout(rollout(status), None, T0)


# ---------------------------------------------------------------------------- rewards
def test_record_reward_sets_the_attempt_and_the_current_rollout() -> None:
    r, a = current(R.RUNNING, A.RUNNING)

    lifecycle.record_reward(r, a, 0.5, T0 + 1)

    assert (a.reward, r.reward, r.updated_at) == (0.5, 0.5, T0 + 1)


def test_record_reward_of_an_older_attempt_leaves_the_rollout_alone() -> None:
    r, a = current(R.RUNNING, A.UNRESPONSIVE)
    r.latest_attempt_id = "at-2"

    lifecycle.record_reward(r, a, 1.0, T0 + 1)

    assert (a.reward, r.reward, r.updated_at) == (1.0, None, T0)


def test_is_current_means_latest_attempt_of_an_unfinished_rollout() -> None:
    r, a = current(R.RUNNING, A.RUNNING)
    assert lifecycle.is_current(r, a)
    r.status = R.SUCCEEDED
    assert not lifecycle.is_current(r, a)
    r.status, r.latest_attempt_id = R.RUNNING, "at-2"
    assert not lifecycle.is_current(r, a)
