"""The SQL example's grader: execution match (order, duplicates, NULLs, floats), errors,
timeouts, and a connection that refuses every write."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from tests.examples.sql_modules import load_sql_example

_grader = load_sql_example().grader
execute, has_top_level_order_by, preview = _grader.execute, _grader.has_top_level_order_by, _grader.preview
results_match, score = _grader.results_match, _grader.score


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "t.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, kind TEXT, price REAL, qty INTEGER);
        INSERT INTO items VALUES (1, 'ant', 'bug', 1.5, 3), (2, 'bee', 'bug', 2.25, NULL),
                                 (3, 'cat', 'pet', 10.0, 1), (4, 'dog', 'pet', 10.0, 2), (5, 'eel', NULL, 0.1, 5);
    """)
    conn.commit()
    conn.close()
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_rows_in_any_order_match_unless_the_gold_query_orders_them(db: Path) -> None:
    assert score(db, "SELECT name FROM items ORDER BY name DESC", "SELECT name FROM items") == 1.0
    ordered_gold = "SELECT name FROM items ORDER BY price DESC, name"
    assert score(db, "SELECT name FROM items ORDER BY price DESC, name", ordered_gold) == 1.0
    assert score(db, "SELECT name FROM items ORDER BY name", ordered_gold) == 0.0
    assert has_top_level_order_by(ordered_gold)
    assert not has_top_level_order_by("SELECT name FROM (SELECT name FROM items ORDER BY qty) LIMIT 2")
    assert not has_top_level_order_by("SELECT 'order by' FROM items")


def test_duplicates_count_and_missing_or_extra_rows_fail(db: Path) -> None:
    gold = "SELECT kind FROM items WHERE kind IS NOT NULL"  # bug, bug, pet, pet
    assert score(db, "SELECT kind FROM items WHERE kind IS NOT NULL ORDER BY id DESC", gold) == 1.0
    assert score(db, "SELECT DISTINCT kind FROM items WHERE kind IS NOT NULL", gold) == 0.0
    assert results_match([("a",), ("a",), ("b",)], [("a",), ("b",), ("b",)]) is False
    assert score(db, "SELECT kind FROM items", gold) == 0.0  # one row more (the NULL)


def test_nulls_equal_nulls_and_nothing_else(db: Path) -> None:
    assert score(db, "SELECT qty FROM items", "SELECT qty FROM items ORDER BY id") == 1.0
    assert results_match([(None,)], [(None,)])
    assert not results_match([(None,)], [(0,)])
    assert not results_match([("",)], [(None,)])
    assert score(db, "SELECT COALESCE(qty, 0) FROM items", "SELECT qty FROM items") == 0.0


def test_numbers_compare_by_value_with_a_float_tolerance(db: Path) -> None:
    assert score(db, "SELECT AVG(price) FROM items", "SELECT SUM(price) / COUNT(*) FROM items") == 1.0
    assert results_match([(3,)], [(3.0,)])
    assert results_match([(0.1 + 0.2,)], [(0.3,)])
    assert not results_match([(0.3001,)], [(0.3,)])
    assert not results_match([("3",)], [(3,)])  # text is not a number
    assert score(db, "SELECT ROUND(AVG(price), 1) FROM items", "SELECT AVG(price) FROM items") == 0.0


def test_columns_may_come_in_another_order_but_not_be_missing(db: Path) -> None:
    gold = "SELECT kind, COUNT(*) FROM items GROUP BY kind"
    assert score(db, "SELECT COUNT(*), kind FROM items GROUP BY kind", gold) == 1.0
    assert score(db, "SELECT kind FROM items GROUP BY kind", gold) == 0.0
    assert score(db, "SELECT kind, COUNT(*), 1 FROM items GROUP BY kind", gold) == 0.0


def test_empty_results_match_only_empty_results(db: Path) -> None:
    assert score(db, "SELECT name FROM items WHERE 0", "SELECT name FROM items WHERE id > 99") == 1.0
    assert score(db, "SELECT name FROM items", "SELECT name FROM items WHERE id > 99") == 0.0
    assert score(db, "SELECT name FROM items WHERE 0", "SELECT name FROM items") == 0.0


def test_errors_and_missing_queries_score_zero_with_the_error_kept(db: Path) -> None:
    assert score(db, "SELECT nope FROM items", "SELECT name FROM items") == 0.0
    assert score(db, "SELEC name FROM items", "SELECT name FROM items") == 0.0
    assert score(db, None, "SELECT name FROM items") == 0.0
    assert score(db, "  ", "SELECT name FROM items") == 0.0
    bad = execute(db, "SELECT nope FROM items")
    assert not bad.ok and "no such column" in (bad.error or "")
    assert preview(bad).startswith("Error: no such column")
    two = execute(db, "SELECT 1; SELECT 2")
    assert not two.ok
    with pytest.raises(ValueError, match="gold query fails"):
        score(db, "SELECT 1", "SELECT nope FROM items")


def test_a_runaway_query_is_stopped_at_the_time_limit(db: Path) -> None:
    forever = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT COUNT(*) FROM n"
    result = execute(db, forever, timeout_s=0.3)
    assert result.timed_out and not result.ok and "longer than 0.3 s" in (result.error or "")
    assert result.seconds < 3.0
    assert score(db, forever, "SELECT COUNT(*) FROM items", timeout_s=0.3) == 0.0
    big = execute(db, "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n LIMIT 5000) SELECT x FROM n",
                  max_rows=100)
    assert not big.ok and "more than 100 rows" in (big.error or "")


@pytest.mark.parametrize("statement", [
    "DELETE FROM items",
    "UPDATE items SET price = 0",
    "INSERT INTO items (name) VALUES ('x')",
    "DROP TABLE items",
    "CREATE TABLE evil (x)",
    "ALTER TABLE items ADD COLUMN y",
    "PRAGMA query_only = OFF",
    "ATTACH DATABASE ':memory:' AS other",
    "VACUUM",
    "REPLACE INTO items (id, name) VALUES (1, 'x')",
    "WITH gone AS (SELECT 1) DELETE FROM items",
])
def test_writes_and_escapes_are_refused_and_the_file_stays_the_same(db: Path, statement: str) -> None:
    before = digest(db)
    result = execute(db, statement)
    assert not result.ok, f"{statement!r} ran"
    assert score(db, statement, "SELECT name FROM items") == 0.0
    assert digest(db) == before
    assert execute(db, "SELECT COUNT(*) FROM items").rows == [(5,)]


def test_a_missing_database_says_how_to_build_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="build the data"):
        execute(tmp_path / "none.sqlite", "SELECT 1")


def test_preview_is_short_and_readable(db: Path) -> None:
    assert preview(execute(db, "SELECT name, qty FROM items ORDER BY id LIMIT 2")) == "2 rows: ant, 3; bee, NULL"
    assert preview(execute(db, "SELECT name FROM items WHERE 0")) == "0 rows"
    assert preview(execute(db, "SELECT name FROM items"), max_rows=2).endswith("...")
