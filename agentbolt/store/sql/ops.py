"""The operation modules a SQL backend hands :class:`~agentbolt.store.sql.store.SqlStore`, typed.

An operation is a function of the backend's connection (and transaction: every write,
and every PostgreSQL operation), then of the arguments ``SqlStore`` passes to the
backend's ``_read``/``_write``, which runs it: a plain function on SQLite, a coroutine
function on PostgreSQL. Their arguments differ by backend, so each is an :data:`Op`;
what these protocols fix is which operations a backend must have. A backend's modules
(``sqlite.reads``, ``postgres.writes``, ...) satisfy them as they are: a type checker
checks a module against a protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from agentbolt.store.sql.reads import ReadDialect

__all__ = ["MetricOps", "Op", "ReadOps", "WriteOps"]

Op = Callable[..., Any]
"""``op(conn, [tx,] *args)``, run by the backend's ``_read``/``_write``."""


class ReadOps(Protocol):
    """The backend's reads: every shared plan of :mod:`agentbolt.store.sql.reads` runs
    through ``run_plan`` in the backend's ``DIALECT``."""

    DIALECT: ReadDialect
    run_plan: Op


class WriteOps(Protocol):
    """The backend's writes, one per :class:`~agentbolt.store.base.Store` call that writes."""

    enqueue_rollouts: Op
    claim_rollouts: Op
    update_rollout: Op
    update_attempt: Op
    report_and_claim: Op
    heartbeat: Op
    add_spans: Op
    add_resources: Op
    update_worker: Op
    check_deadlines: Op


class MetricOps(Protocol):
    """The backend's metric writes."""

    add_metrics: Op
