"""Load Spider (or any dataset in its on-disk format) as tasks for the SQL agent.

Spider's layout::

    <root>/tables.json                     # one entry per database: tables, columns, keys
    <root>/train_spider.json, dev.json     # questions: {"db_id", "question", "query", ...}
    <root>/database/<db_id>/<db_id>.sqlite

:func:`load_spider` turns a question file into the same tasks ``data.py`` makes
(``{"id", "db_id", "db_path", "schema", "question", "gold", "level", "split"}``), with
the schema rendered from ``tables.json`` the way the agent reads it
(``table(col, col -> other.col, ...)``), so ``train.py``'s stages run on it unchanged.
Spider is not shipped here; download it yourself (its licence is CC BY-SA 4.0).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["SpiderFormatError", "load_spider", "render_tables"]


class SpiderFormatError(ValueError):
    """The directory or a file does not follow Spider's format (the message says where)."""


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise SpiderFormatError(f"{path} is missing: a Spider directory holds tables.json, the question files "
                                "and database/<db_id>/<db_id>.sqlite")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise SpiderFormatError(f"{path} is not valid JSON: {err}") from None


def render_tables(entry: dict[str, Any]) -> str:
    """One database of ``tables.json`` as one line per table, foreign keys as ``-> t.c``."""
    try:
        tables = list(entry["table_names_original"])
        columns = [(int(t), str(c)) for t, c in entry["column_names_original"]]
        foreign = {int(a): int(b) for a, b in entry.get("foreign_keys", [])}
    except (KeyError, TypeError, ValueError) as err:
        raise SpiderFormatError(f"tables.json entry {entry.get('db_id')!r}: bad or missing field ({err})") from None
    lines = []
    for t, table in enumerate(tables):
        cols = []
        for i, (owner, name) in enumerate(columns):
            if owner != t:
                continue
            if i in foreign:
                target_table, target_col = columns[foreign[i]]
                cols.append(f"{name} -> {tables[target_table]}.{target_col}")
            else:
                cols.append(name)
        lines.append(f"{table}({', '.join(cols)})")
    return "\n".join(lines)


def load_spider(root: str | Path, questions: str = "dev.json", *, n: int | None = None,
                split: str = "spider") -> list[dict[str, Any]]:
    """The first ``n`` questions (all when None) of ``root/questions`` as agent tasks.

    Questions whose database file is missing raise :class:`SpiderFormatError` (naming
    the path) rather than being skipped silently.
    """
    root = Path(root)
    schemas = {}
    for entry in _read_json(root / "tables.json"):
        if "db_id" not in entry:
            raise SpiderFormatError(f"{root / 'tables.json'}: an entry has no db_id")
        schemas[entry["db_id"]] = render_tables(entry)
    items = _read_json(root / questions)
    if not isinstance(items, list):
        raise SpiderFormatError(f"{root / questions}: expected a list of questions")
    tasks = []
    for i, item in enumerate(items[:n] if n is not None else items):
        try:
            db_id, question, gold = str(item["db_id"]), str(item["question"]), str(item["query"])
        except (KeyError, TypeError):
            raise SpiderFormatError(f"{root / questions} item {i}: needs db_id, question and query") from None
        if db_id not in schemas:
            raise SpiderFormatError(f"{root / questions} item {i}: db_id {db_id!r} is not in tables.json")
        db_path = root / "database" / db_id / f"{db_id}.sqlite"
        if not db_path.is_file():
            raise SpiderFormatError(f"{root / questions} item {i}: no database at {db_path}")
        tasks.append({"id": f"{split}-{i}", "db_id": db_id, "db_path": str(db_path.resolve()),
                      "schema": schemas[db_id], "question": question, "gold": gold,
                      "level": str(item.get("difficulty", "unknown")), "split": split})
    return tasks
