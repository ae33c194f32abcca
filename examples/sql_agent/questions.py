"""Natural-language questions with gold SQL, from templates that fit every domain.

Five difficulty levels, as in text-to-SQL benchmarks:

* ``select`` — filter rows (``WHERE`` on a category or a number);
* ``aggregate`` — ``COUNT``, ``AVG``, ``MAX`` over filtered rows;
* ``join`` — child rows filtered on their parent's columns;
* ``group`` — ``GROUP BY`` with counts, ``HAVING``;
* ``nested`` — a subquery (above the average, ``NOT IN``), or top-k with ``ORDER BY``.

:func:`questions_for` enumerates every instance of every template on one domain (each
category value, a few thresholds, each parent name): a question's text and its gold
query determine each other, and no two instances share either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from schemas import Domain

__all__ = ["LEVELS", "Question", "questions_for"]

LEVELS: tuple[str, ...] = ("select", "aggregate", "join", "group", "nested")


@dataclass(frozen=True)
class Question:
    """One question on one database, with the query that answers it."""

    db_id: str
    level: str
    template: str
    question: str
    gold: str


def _thresholds(domain_range: tuple[float, float], n: int = 3) -> list[int]:
    """``n`` round numbers inside a column's range (quartiles, rounded)."""
    lo, hi = domain_range
    step = (hi - lo) / (n + 1)
    magnitude = 10 ** max(0, len(str(int(step))) - 1)
    return sorted({int(round((lo + step * (i + 1)) / magnitude) * magnitude) for i in range(n)})


Template = Callable[[Domain], Iterator[tuple[str, str]]]


def _select_cat(d: Domain) -> Iterator[tuple[str, str]]:
    c = d.child
    for v in c.cat_values:
        yield (f"List the {c.name_col} of every {c.singular} whose {c.cat_col} is {v}.",
               f"SELECT {c.name_col} FROM {c.name} WHERE {c.cat_col} = '{v}'")


def _select_num(d: Domain) -> Iterator[tuple[str, str]]:
    p = d.parent
    for x in _thresholds(p.num_range):
        yield (f"List the {p.name_col} of every {p.singular} with {p.num_col} greater than {x}.",
               f"SELECT {p.name_col} FROM {p.name} WHERE {p.num_col} > {x}")


def _select_parent_cat(d: Domain) -> Iterator[tuple[str, str]]:
    p = d.parent
    for v in p.cat_values:
        yield (f"Which {p.plural} have {p.cat_col} {v}? Give their {p.name_col}.",
               f"SELECT {p.name_col} FROM {p.name} WHERE {p.cat_col} = '{v}'")


def _count_cat(d: Domain) -> Iterator[tuple[str, str]]:
    c = d.child
    for v in c.cat_values:
        yield (f"How many {c.plural} have {c.cat_col} {v}?",
               f"SELECT COUNT(*) FROM {c.name} WHERE {c.cat_col} = '{v}'")


def _avg_cat(d: Domain) -> Iterator[tuple[str, str]]:
    c = d.child
    for v in c.cat_values:
        yield (f"What is the average {c.num_col} of the {c.plural} whose {c.cat_col} is {v}?",
               f"SELECT AVG({c.num_col}) FROM {c.name} WHERE {c.cat_col} = '{v}'")


def _max_parent(d: Domain) -> Iterator[tuple[str, str]]:
    p = d.parent
    for v in p.cat_values:
        yield (f"What is the highest {p.num_col} among {p.plural} with {p.cat_col} {v}?",
               f"SELECT MAX({p.num_col}) FROM {p.name} WHERE {p.cat_col} = '{v}'")


def _join_parent_cat(d: Domain) -> Iterator[tuple[str, str]]:
    p, c = d.parent, d.child
    for v in p.cat_values:
        yield (f"List the {c.name_col} of every {c.singular} whose {p.singular} has {p.cat_col} {v}.",
               (f"SELECT {c.name}.{c.name_col} FROM {c.name} JOIN {p.name} ON {c.name}.{d.fk} = {p.name}.id "
               f"WHERE {p.name}.{p.cat_col} = '{v}'"))


def _join_parent_name(d: Domain) -> Iterator[tuple[str, str]]:
    p, c = d.parent, d.child
    for name in d.parent_names[:8]:
        yield (f"List the {c.name_col} of every {c.singular} of the {p.singular} named {name}.",
               (f"SELECT {c.name}.{c.name_col} FROM {c.name} JOIN {p.name} ON {c.name}.{d.fk} = {p.name}.id "
               f"WHERE {p.name}.{p.name_col} = '{name}'"))


def _group_count(d: Domain) -> Iterator[tuple[str, str]]:
    c, p = d.child, d.parent
    yield (f"For each {c.cat_col}, how many {c.plural} are there?",
           f"SELECT {c.cat_col}, COUNT(*) FROM {c.name} GROUP BY {c.cat_col}")
    yield (f"For each {p.cat_col}, how many {p.plural} are there?",
           f"SELECT {p.cat_col}, COUNT(*) FROM {p.name} GROUP BY {p.cat_col}")


def _group_having(d: Domain) -> Iterator[tuple[str, str]]:
    p, c = d.parent, d.child
    for k in (2, 3, 4):
        yield (f"Which {p.plural} have more than {k} {c.plural}? Give their {p.name_col}.",
               (f"SELECT {p.name}.{p.name_col} FROM {p.name} JOIN {c.name} ON {c.name}.{d.fk} = {p.name}.id "
               f"GROUP BY {p.name}.id HAVING COUNT(*) > {k}"))


def _nested_avg(d: Domain) -> Iterator[tuple[str, str]]:
    c, p = d.child, d.parent
    yield (f"List the {c.name_col} of every {c.singular} whose {c.num_col} is above the average {c.num_col}.",
           f"SELECT {c.name_col} FROM {c.name} WHERE {c.num_col} > (SELECT AVG({c.num_col}) FROM {c.name})")
    yield (f"List the {p.name_col} of every {p.singular} whose {p.num_col} is below the average {p.num_col}.",
           f"SELECT {p.name_col} FROM {p.name} WHERE {p.num_col} < (SELECT AVG({p.num_col}) FROM {p.name})")


def _nested_not_in(d: Domain) -> Iterator[tuple[str, str]]:
    p, c = d.parent, d.child
    yield (f"List the {p.name_col} of every {p.singular} that has no {c.plural}.",
           f"SELECT {p.name_col} FROM {p.name} WHERE id NOT IN (SELECT {d.fk} FROM {c.name})")


def _top_k(d: Domain) -> Iterator[tuple[str, str]]:
    p = d.parent
    for k in (3, 5):
        yield (f"List the {p.name_col} of the {k} {p.plural} with the highest {p.num_col}, highest first.",
               f"SELECT {p.name_col} FROM {p.name} ORDER BY {p.num_col} DESC LIMIT {k}")


TEMPLATES: dict[str, tuple[str, Template]] = {
    "select_cat": ("select", _select_cat),
    "select_num": ("select", _select_num),
    "select_parent_cat": ("select", _select_parent_cat),
    "count_cat": ("aggregate", _count_cat),
    "avg_cat": ("aggregate", _avg_cat),
    "max_parent": ("aggregate", _max_parent),
    "join_parent_cat": ("join", _join_parent_cat),
    "join_parent_name": ("join", _join_parent_name),
    "group_count": ("group", _group_count),
    "group_having": ("group", _group_having),
    "nested_avg": ("nested", _nested_avg),
    "nested_not_in": ("nested", _nested_not_in),
    "top_k": ("nested", _top_k),
}
"""Template name -> (difficulty level, generator of ``(question, gold SQL)``)."""


def questions_for(domain: Domain) -> list[Question]:
    """Every question instance on ``domain``, in a fixed order."""
    out = [Question(domain.db_id, level, name, q, sql)
           for name, (level, make) in TEMPLATES.items() for q, sql in make(domain)]
    if len({q.question for q in out}) != len(out) or len({q.gold for q in out}) != len(out):
        raise AssertionError(f"{domain.db_id}: two template instances share a question or a gold query")
    return out
