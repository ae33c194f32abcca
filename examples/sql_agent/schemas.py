"""Small relational databases from several domains, built deterministically in SQLite.

Every schema has the same shape — a *parent* table and a *child* table that points to it
(``books.author_id -> authors.id``) — with its own names, words and value ranges, so one
set of question templates (``questions.py``) applies to every domain, including the
held-out domains never seen in training. Each table has a name column, a category
column and a number column; the child's number column holds some NULLs and, in some
domains, decimals (so the grader's NULL and float rules are exercised by real data).

Rows come from ``random.Random(f"sql-{db_id}-rows")``: the same schema always gives the
same database, byte for byte in its contents.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DOMAINS", "HELDOUT_SCHEMAS", "TRAIN_SCHEMAS", "Domain", "Table", "build_database", "render_schema"]


@dataclass(frozen=True)
class Table:
    """One table's roles: its name, the noun for one row and for many, and its columns."""

    name: str
    singular: str
    plural: str
    name_col: str
    cat_col: str
    cat_values: tuple[str, ...]
    num_col: str
    num_range: tuple[float, float]
    decimals: int = 0
    rows: int = 12


@dataclass(frozen=True)
class Domain:
    """A schema: ``child.fk`` references ``parent.id``; ``names`` fill the name columns."""

    db_id: str
    parent: Table
    child: Table
    fk: str
    parent_names: tuple[str, ...]
    child_names: tuple[str, ...]


def _t(name: str, singular: str, plural: str, name_col: str, cat: tuple[str, tuple[str, ...]],
       num: tuple[str, float, float], decimals: int = 0, rows: int = 12) -> Table:
    return Table(name, singular, plural, name_col, cat[0], cat[1], num[0], (num[1], num[2]), decimals, rows)


_FIRST = ("Ada", "Ben", "Cara", "Dan", "Eva", "Finn", "Gia", "Hugo", "Ines", "Jon", "Kim", "Leo", "Mia", "Nils",
          "Olga", "Paul", "Rosa", "Sam", "Tara", "Ugo")
_LAST = ("Byrne", "Costa", "Diaz", "Ek", "Fox", "Gray", "Holm", "Ito", "Jung", "Kerr", "Lind", "Moss", "Nagy",
         "Ortiz", "Park", "Quinn", "Roth", "Stein", "Toth", "Vance")


def _people(seed: str, n: int) -> tuple[str, ...]:
    rng = random.Random(seed)
    names: list[str] = []
    while len(names) < n:
        name = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
        if name not in names:
            names.append(name)
    return tuple(names)


def _titles(seed: str, words_a: tuple[str, ...], words_b: tuple[str, ...], n: int) -> tuple[str, ...]:
    rng = random.Random(seed)
    titles: list[str] = []
    while len(titles) < n:
        title = f"{rng.choice(words_a)} {rng.choice(words_b)}"
        if title not in titles:
            titles.append(title)
    return tuple(titles)


_ADJ = ("Silent", "Golden", "Hidden", "Broken", "Last", "Red", "Blue", "Wild", "Quiet", "Bright", "Lost", "Cold")
_NOUN = ("River", "Garden", "Road", "Winter", "Harbor", "Forest", "Letter", "Island", "Tower", "Storm", "Bridge",
         "Mirror", "Song", "Field")

DOMAINS: dict[str, Domain] = {d.db_id: d for d in (
    Domain("library",
           _t("authors", "author", "authors", "name", ("country", ("France", "Japan", "Brazil", "Canada", "Kenya")),
              ("born", 1920, 1990)),
           _t("books", "book", "books", "title", ("genre", ("poetry", "mystery", "history", "science", "drama")),
              ("price", 5, 60), decimals=2, rows=40),
           "author_id", _people("library-authors", 12), _titles("library-books", _ADJ, _NOUN, 40)),
    Domain("shop",
           _t("customers", "customer", "customers", "name", ("city", ("Lyon", "Oslo", "Porto", "Graz", "Turin")),
              ("age", 18, 80)),
           _t("orders", "order", "orders", "code", ("status", ("paid", "shipped", "returned", "pending")),
              ("amount", 10, 500), decimals=2, rows=40),
           "customer_id", _people("shop-customers", 12),
           tuple(f"ORD-{1000 + 7 * i}" for i in range(40))),
    Domain("school",
           _t("teachers", "teacher", "teachers", "name", ("department", ("math", "art", "biology", "music", "law")),
              ("salary", 30000, 90000)),
           _t("courses", "course", "courses", "title", ("level", ("intro", "core", "advanced", "seminar")),
              ("credits", 1, 12), rows=36),
           "teacher_id", _people("school-teachers", 12),
           _titles("school-courses", ("Applied", "Modern", "Early", "Global", "Urban", "Basic", "Advanced Topics in"),
                   ("Algebra", "Ecology", "Painting", "Harmony", "Contracts", "Genetics", "Statistics", "Sculpture",
                    "Ethics", "Rhythm"), 36)),
    Domain("hospital",
           _t("doctors", "doctor", "doctors", "name", ("specialty", ("cardiology", "surgery", "pediatrics",
                                                                    "neurology", "oncology")),
              ("experience", 1, 40)),
           _t("patients", "patient", "patients", "name", ("ward", ("north", "south", "east", "west")),
              ("weight", 40, 120), decimals=1, rows=40),
           "doctor_id", _people("hospital-doctors", 12), _people("hospital-patients", 40)),
    # ---- held-out domains: never in training
    Domain("airline",
           _t("pilots", "pilot", "pilots", "name", ("base", ("Madrid", "Dublin", "Vienna", "Prague", "Athens")),
              ("flight_hours", 500, 20000)),
           _t("flights", "flight", "flights", "number", ("aircraft", ("A320", "B737", "E190", "ATR72")),
              ("distance", 200, 4000), rows=40),
           "pilot_id", _people("airline-pilots", 12), tuple(f"FL{300 + 11 * i}" for i in range(40))),
    Domain("music",
           _t("artists", "artist", "artists", "name", ("genre", ("jazz", "rock", "folk", "techno", "soul")),
              ("debut_year", 1960, 2015)),
           _t("albums", "album", "albums", "title", ("label", ("Orbit", "Nova", "Pulse", "Echo")),
              ("length_minutes", 25, 80), decimals=1, rows=40),
           "artist_id", _people("music-artists", 12), _titles("music-albums", _ADJ, _NOUN, 40)),
)}

TRAIN_SCHEMAS: tuple[str, ...] = ("library", "shop", "school", "hospital")
"""Schemas whose questions are split into train and held-out questions."""
HELDOUT_SCHEMAS: tuple[str, ...] = ("airline", "music")
"""Schemas never seen in training: every question on them is held out."""


def render_schema(domain: Domain) -> str:
    """The schema as the agent sees it: one line per table, with the foreign key."""
    p, c = domain.parent, domain.child
    return (f"{p.name}(id, {p.name_col}, {p.cat_col}, {p.num_col})\n"
            f"{c.name}(id, {c.name_col}, {domain.fk} -> {p.name}.id, {c.cat_col}, {c.num_col})")


def _number(rng: random.Random, table: Table) -> float | int:
    lo, hi = table.num_range
    if table.decimals:
        return round(rng.uniform(lo, hi), table.decimals)
    return rng.randint(int(lo), int(hi))


def _rows(domain: Domain) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """Parent and child rows. Two parents have no children (for NOT IN questions); the
    child's number is NULL in about one row in ten."""
    rng = random.Random(f"sql-{domain.db_id}-rows")
    p, c = domain.parent, domain.child
    parents = [(i + 1, domain.parent_names[i], rng.choice(p.cat_values), _number(rng, p)) for i in range(p.rows)]
    with_children = list(range(1, p.rows - 1))  # the last two parents stay childless
    children = []
    for i in range(c.rows):
        num = None if rng.random() < 0.1 else _number(rng, c)
        children.append((i + 1, domain.child_names[i], rng.choice(with_children), rng.choice(c.cat_values), num))
    return parents, children


def build_database(domain: Domain, path: Path) -> Path:
    """Write ``domain``'s database to ``path`` (replaced if present); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    p, c = domain.parent, domain.child
    num_type = lambda t: "REAL" if t.decimals else "INTEGER"
    parents, children = _rows(domain)
    conn = sqlite3.connect(tmp)
    try:
        conn.execute(f"CREATE TABLE {p.name} (id INTEGER PRIMARY KEY, {p.name_col} TEXT NOT NULL, "
                     f"{p.cat_col} TEXT NOT NULL, {p.num_col} {num_type(p)})")
        conn.execute(f"CREATE TABLE {c.name} (id INTEGER PRIMARY KEY, {c.name_col} TEXT NOT NULL, "
                     f"{domain.fk} INTEGER NOT NULL REFERENCES {p.name}(id), {c.cat_col} TEXT NOT NULL, "
                     f"{c.num_col} {num_type(c)})")
        conn.executemany(f"INSERT INTO {p.name} VALUES (?, ?, ?, ?)", parents)
        conn.executemany(f"INSERT INTO {c.name} VALUES (?, ?, ?, ?, ?)", children)
        conn.commit()
    finally:
        conn.close()
    tmp.replace(path)
    return path
