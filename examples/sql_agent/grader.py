"""Execution match: run a query read-only with a time limit, compare result sets.

A predicted query is right when it returns the same result as the gold query:

* rows compared as a multiset (order ignored, duplicates counted) unless the gold query
  has an ``ORDER BY`` at its top level, then in order;
* columns by position; a result whose columns are a permutation of the gold's (at most 4
  columns) also matches, so ``SELECT COUNT(*), genre`` answers ``SELECT genre, COUNT(*)``;
* NULL equals NULL; numbers compare by value (``3 == 3.0``) with a relative tolerance
  of 1e-6; text compares exactly;
* an error, a timeout or a result over ``max_rows`` rows scores 0.

Queries run on a connection that cannot write: the file is opened with
``mode=ro``, ``PRAGMA query_only`` is on, and an authorizer allows reading and
functions only (no ATTACH, PRAGMA, or any write). A progress handler interrupts a query
after ``timeout_s``.
"""

from __future__ import annotations

import itertools
import math
import re
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Execution", "execute", "has_top_level_order_by", "preview", "results_match", "score"]

DEFAULT_TIMEOUT_S = 2.0
DEFAULT_MAX_ROWS = 2000
_REL_TOL = 1e-6
_ABS_TOL = 1e-9
_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}


@dataclass
class Execution:
    """What a query returned: its rows and column names, or why it did not."""

    sql: str
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    error: str | None = None
    timed_out: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


def _authorize(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


def _connect(db_path: str | Path) -> sqlite3.Connection:
    path = Path(db_path)
    if not path.is_file():
        raise FileNotFoundError(f"no database at {path}: build the data first (python examples/sql_agent/data.py)")
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
    conn.execute("PRAGMA query_only = ON")
    conn.set_authorizer(_authorize)
    return conn


def execute(db_path: str | Path, sql: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
            max_rows: int = DEFAULT_MAX_ROWS) -> Execution:
    """Run ``sql`` read-only on ``db_path``; never raises for a bad query (see ``error``)."""
    result = Execution(sql=sql)
    start = time.monotonic()
    deadline = start + timeout_s
    conn = _connect(db_path)
    conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 1000)
    try:
        cursor = conn.execute(sql)
        rows = cursor.fetchmany(max_rows + 1)
        if len(rows) > max_rows:
            result.error = f"the result has more than {max_rows} rows"
        else:
            result.rows = [tuple(r) for r in rows]
            result.columns = [d[0] for d in cursor.description or ()]
    except sqlite3.Error as err:
        if time.monotonic() > deadline or "interrupted" in str(err):
            result.timed_out, result.error = True, f"the query ran longer than {timeout_s:g} s and was stopped"
        else:
            result.error = str(err)
    except (ValueError, OverflowError) as err:  # e.g. a null character in the text
        result.error = str(err)
    finally:
        conn.close()
        result.seconds = time.monotonic() - start
    return result


# ----------------------------------------------------------------------------- comparison
_STRINGS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")


def has_top_level_order_by(sql: str) -> bool:
    """Whether ``sql`` orders its final result (an ORDER BY outside any parentheses)."""
    text = _STRINGS.sub("''", sql)
    depth = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and re.match(r"order\s+by\b", text[i:i + 12], re.IGNORECASE) and (
                i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            return True
    return False


def _same_value(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=_REL_TOL, abs_tol=_ABS_TOL)
    return type(a) is type(b) and a == b


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """Orders rows so that equal rows (numbers within tolerance) end up side by side."""
    key = []
    for v in row:
        if v is None:
            key.append((0, 0.0, ""))
        elif isinstance(v, (int, float)):
            key.append((1, float(v), ""))
        elif isinstance(v, bytes):
            key.append((3, 0.0, v.hex()))
        else:
            key.append((2, 0.0, str(v)))
    return tuple(key)


def _same_rows(pred: list[tuple[Any, ...]], gold: list[tuple[Any, ...]], ordered: bool) -> bool:
    if len(pred) != len(gold):
        return False
    if not ordered:
        pred, gold = sorted(pred, key=_sort_key), sorted(gold, key=_sort_key)
    return all(len(p) == len(g) and all(_same_value(x, y) for x, y in zip(p, g, strict=True))
               for p, g in zip(pred, gold, strict=True))


def results_match(pred: list[tuple[Any, ...]], gold: list[tuple[Any, ...]], *, ordered: bool = False) -> bool:
    """Whether two results are the same (see the module's rules)."""
    if not gold or not pred:
        return not gold and not pred
    width = len(gold[0])
    if any(len(r) != width for r in pred):
        return False
    if _same_rows(pred, gold, ordered):
        return True
    if width > 4:
        return False
    return any(_same_rows([tuple(r[i] for i in perm) for r in pred], gold, ordered)
               for perm in itertools.permutations(range(width)) if list(perm) != list(range(width)))


def score(db_path: str | Path, pred_sql: str | None, gold_sql: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> float:
    """1.0 when ``pred_sql`` returns the gold query's result on ``db_path``, else 0.0."""
    if not pred_sql or not pred_sql.strip():
        return 0.0
    gold = execute(db_path, gold_sql, timeout_s=max(timeout_s, 10.0))
    if not gold.ok:
        raise ValueError(f"the gold query fails on {db_path}: {gold.error}\n{gold_sql}")
    pred = execute(db_path, pred_sql, timeout_s=timeout_s)
    if not pred.ok:
        return 0.0
    return 1.0 if results_match(pred.rows, gold.rows, ordered=has_top_level_order_by(gold_sql)) else 0.0


def preview(execution: Execution, *, max_rows: int = 5, max_chars: int = 300) -> str:
    """A short text of a result for the agent and the trace view: ``3 rows: (...), ...`` or the error."""
    if not execution.ok:
        return f"Error: {execution.error}"
    n = len(execution.rows)
    if n == 0:
        return "0 rows"
    shown = "; ".join(", ".join("NULL" if v is None else str(v) for v in row) for row in execution.rows[:max_rows])
    text = f"{n} row{'s' if n != 1 else ''}: {shown}" + (" ..." if n > max_rows else "")
    return text if len(text) <= max_chars else text[: max_chars - 4] + " ..."
