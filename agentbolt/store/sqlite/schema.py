"""The SQLite schema of :class:`~agentbolt.store.sqlite.SqliteStore` and its migrations.

The schema version lives in ``PRAGMA user_version``. :data:`MIGRATIONS` is an ordered
list of steps; opening a database applies only the steps it has not seen yet, all in one
``BEGIN IMMEDIATE`` transaction so that two processes opening the same new file do not
both migrate it. Never edit a released step: append a new one.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from agentbolt.store.errors import StoreError, StoreUnavailableError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Migration", "connect", "enable_wal", "load_secret", "migrate"]


@dataclass(frozen=True)
class Migration:
    """One schema step: what it does, and the statements that do it."""

    description: str
    statements: tuple[str, ...]


MIGRATIONS: list[Migration] = [
    Migration(
        "initial schema: rollouts, attempts, spans, resources, workers, meta",
        (
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID",
            # seq (the rowid) is the enqueue order: FIFO claims and created_at ties
            """CREATE TABLE rollouts (
                seq INTEGER PRIMARY KEY,
                rollout_id TEXT NOT NULL UNIQUE,
                status TEXT NOT NULL,
                mode TEXT NOT NULL,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL,
                start_time REAL,
                end_time REAL,
                attempt_count INTEGER NOT NULL DEFAULT 0,
                latest_attempt_id TEXT,
                reward REAL,
                resources_version INTEGER,
                input TEXT NOT NULL,
                config TEXT NOT NULL,
                metadata TEXT NOT NULL
            )""",
            # no index on updated_at or reward: they change on the hot path (three times
            # per rollout) and each index there costs ~10% of claim→spans→finish
            # throughput; pages sorted by them sort the filtered rows instead
            "CREATE INDEX rollouts_queue ON rollouts (seq) WHERE status IN ('queuing', 'requeuing')",
            "CREATE INDEX rollouts_status ON rollouts (status, seq)",
            "CREATE INDEX rollouts_created ON rollouts (created_at, seq)",
            # deadline: when an active attempt is due for a timeout/unresponsive check;
            # rollout_seq (= rollouts.seq) keeps the per-rollout indexes on small integers
            """CREATE TABLE attempts (
                attempt_id TEXT PRIMARY KEY,
                rollout_id TEXT NOT NULL,
                rollout_seq INTEGER NOT NULL,
                sequence_id INTEGER NOT NULL,
                worker_id TEXT,
                status TEXT NOT NULL,
                start_time REAL NOT NULL,
                end_time REAL,
                last_heartbeat_time REAL NOT NULL,
                resources_version INTEGER,
                error TEXT,
                metadata TEXT NOT NULL,
                reward REAL,
                next_span_seq INTEGER NOT NULL DEFAULT 0,
                deadline REAL,
                claim_request_id TEXT
            )""",
            "CREATE UNIQUE INDEX attempts_rollout ON attempts (rollout_seq, sequence_id)",
            "CREATE INDEX attempts_deadline ON attempts (deadline) WHERE deadline IS NOT NULL",
            "CREATE INDEX attempts_claim ON attempts (claim_request_id) WHERE claim_request_id IS NOT NULL",
            "CREATE TABLE claim_requests (request_id TEXT PRIMARY KEY, created_at REAL NOT NULL) WITHOUT ROWID",
            # a span's identity (rollout_id, attempt_id, span_id) is stored as
            # (rollout_seq, attempt_seq, span_id): the same key on small integers; `data`
            # holds the full span (ids included) as JSON
            """CREATE TABLE spans (
                rollout_seq INTEGER NOT NULL,
                attempt_seq INTEGER NOT NULL,
                span_id TEXT NOT NULL,
                sequence_id INTEGER NOT NULL,
                name TEXT NOT NULL,
                start_time REAL NOT NULL,
                data TEXT NOT NULL,
                PRIMARY KEY (rollout_seq, attempt_seq, span_id)
            )""",
            "CREATE INDEX spans_order ON spans (rollout_seq, attempt_seq, sequence_id, span_id)",
            """CREATE TABLE resources (
                version INTEGER PRIMARY KEY,
                created_at REAL NOT NULL,
                resources TEXT NOT NULL,
                metadata TEXT NOT NULL
            )""",
            """CREATE TABLE workers (
                worker_id TEXT PRIMARY KEY,
                status TEXT NOT NULL,
                created_at REAL NOT NULL,
                last_heartbeat_time REAL NOT NULL,
                current_rollout_id TEXT,
                current_attempt_id TEXT,
                metadata TEXT NOT NULL
            ) WITHOUT ROWID""",
        ),
    ),
    Migration(
        "training metrics: one row per (run_id, step), and the runs by last write",
        (
            # data: the step's values as a JSON object (merged on upsert)
            """CREATE TABLE metrics (
                run_id TEXT NOT NULL,
                step INTEGER NOT NULL,
                timestamp REAL NOT NULL,
                data TEXT NOT NULL,
                PRIMARY KEY (run_id, step)
            ) WITHOUT ROWID""",
            # last_write: a counter bumped by every write of the run, for "most recent first"
            "CREATE TABLE metric_runs (run_id TEXT PRIMARY KEY, last_write INTEGER NOT NULL) WITHOUT ROWID",
            "CREATE INDEX metric_runs_recent ON metric_runs (last_write)",
        ),
    ),
    Migration(
        "rollouts by status in created order: pages filtered by status need no sort",
        (
            # replaces rollouts_status (status, seq): the same columns change on writes
            # (created_at never does), so writes cost the same
            "CREATE INDEX rollouts_status_created ON rollouts (status, created_at, seq)",
            "DROP INDEX rollouts_status",
        ),
    ),
]

SCHEMA_VERSION = len(MIGRATIONS)


def connect(path: str | os.PathLike[str], *, busy_timeout: float, read_only: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), ``synchronous=FULL``
    and a busy timeout, usable from any one thread at a time."""
    conn = sqlite3.connect(
        os.fspath(path),
        timeout=busy_timeout,
        isolation_level=None,
        check_same_thread=False,
        cached_statements=256,
    )
    conn.execute("PRAGMA synchronous=FULL")
    if read_only:
        conn.execute("PRAGMA query_only=1")
    return conn


def enable_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to write-ahead logging (persistent; a no-op when already on)."""
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise StoreUnavailableError(
            f"SQLite could not enable WAL mode (got {mode!r}); put the store on a local "
            "filesystem that supports shared memory (not a network share)"
        )


def _version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, steps: Sequence[Migration] = MIGRATIONS) -> int:
    """Bring the schema up to ``len(steps)``; returns how many steps ran (0 if current)."""
    if _version(conn) == len(steps):
        return 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = _version(conn)  # again, under the write lock: another process may have won
        if current > len(steps):
            raise StoreError(
                f"this database has schema version {current} but this agentbolt knows only "
                f"{len(steps)}: upgrade agentbolt to open it"
            )
        for step in steps[current:]:
            for statement in step.statements:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {len(steps)}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return len(steps) - current


def load_secret(conn: sqlite3.Connection) -> bytes:
    """The store's signing secret: 32 random bytes made on first open and kept."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()
    if row is not None:
        return bytes(row[0])
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('secret', ?)", (os.urandom(32),))
        secret = bytes(conn.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()[0])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return secret
