"""The SQL task's data: databases on disk and three splits of questions.

    python examples/sql_agent/data.py --data-dir runs/sql_agent/data   # build and print the split sizes

* ``train`` — questions on the training schemas (``schemas.TRAIN_SCHEMAS``);
* ``heldout_questions`` — other questions on the same schemas: a question belongs here
  when a hash of its gold query falls in one bucket of :data:`HELDOUT_BUCKETS`, so a
  question and its query are in exactly one split whatever the sizes asked for;
* ``heldout_schemas`` — every question on the schemas never trained on
  (``schemas.HELDOUT_SCHEMAS``).

Questions whose gold result is empty or only NULL (any query that returns nothing would
score) and top-k questions with a tie at the cut are left out. Within a split, tasks are
ordered round-robin over the difficulty levels (shuffled with a fixed seed), so the first
``n`` tasks of a split mix the levels evenly. Everything is deterministic: the same call
gives the same tasks and the same databases.
"""

from __future__ import annotations

import argparse
import random
import zlib
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from grader import execute
from questions import LEVELS, Question, questions_for
from schemas import (
    DOMAINS,
    HELDOUT_SCHEMAS,
    TRAIN_SCHEMAS,
    build_database,
    render_schema,
)

__all__ = ["DEFAULT_DATA_DIR", "HELDOUT_BUCKETS", "SPLITS", "Split", "build", "database_path", "load_split", "split_of"]

Split = Literal["train", "heldout_questions", "heldout_schemas"]
SPLITS: tuple[str, ...] = ("train", "heldout_questions", "heldout_schemas")
HELDOUT_BUCKETS = 4
"""One question in about four on a training schema is held out."""
DEFAULT_DATA_DIR = Path("runs/sql_agent/data")
_ORDER_SEED = "sql-agent-order"


def database_path(data_dir: Path, db_id: str) -> Path:
    """Where ``db_id``'s database lives: Spider's layout, ``database/<db>/<db>.sqlite``."""
    return Path(data_dir) / "database" / db_id / f"{db_id}.sqlite"


def build(data_dir: Path = DEFAULT_DATA_DIR) -> Path:
    """Write every schema's database under ``data_dir`` (rebuilt each time: it takes milliseconds)."""
    for db_id, domain in DOMAINS.items():
        build_database(domain, database_path(data_dir, db_id))
    return Path(data_dir)


def split_of(question: Question) -> Split:
    """The split a question belongs to (see the module docstring)."""
    if question.db_id in HELDOUT_SCHEMAS:
        return "heldout_schemas"
    if question.db_id not in TRAIN_SCHEMAS:
        raise ValueError(f"schema {question.db_id!r} is in neither TRAIN_SCHEMAS nor HELDOUT_SCHEMAS")
    bucket = zlib.crc32(f"{question.db_id}|{question.gold}".encode()) % HELDOUT_BUCKETS
    return "heldout_questions" if bucket == 0 else "train"


def _well_posed(question: Question, db_path: Path) -> bool:
    """The gold result says something (not empty, not only NULL) and is unambiguous."""
    result = execute(db_path, question.gold)
    if not result.ok:
        raise AssertionError(f"gold query of {question.db_id} fails: {result.error}\n{question.gold}")
    if not result.rows or all(v is None for row in result.rows for v in row):
        return False
    if question.template == "top_k":  # a tie at the cut would make two answers right
        k = int(question.gold.rsplit(" ", 1)[1])
        parent = DOMAINS[question.db_id].parent
        ranked = execute(db_path, f"SELECT {parent.num_col} FROM {parent.name} ORDER BY {parent.num_col} DESC")
        values = [row[0] for row in ranked.rows]
        return len(values) > k and values[k - 1] != values[k]
    return True


def _interleave(questions: list[Question], seed: str) -> list[Question]:
    """Shuffle within each level, then take one of each level in turn."""
    rng = random.Random(seed)
    by_level = {level: [q for q in questions if q.level == level] for level in LEVELS}
    for items in by_level.values():
        rng.shuffle(items)
    out: list[Question] = []
    while any(by_level.values()):
        for level in LEVELS:
            if by_level[level]:
                out.append(by_level[level].pop(0))
    return out


def _task(question: Question, split: Split, index: int, data_dir: Path) -> dict[str, Any]:
    return {
        "id": f"{split}-{index}", "db_id": question.db_id,
        "db_path": str(database_path(data_dir, question.db_id).resolve()),
        "schema": render_schema(DOMAINS[question.db_id]), "question": question.question, "gold": question.gold,
        "level": question.level, "template": question.template, "split": split,
    }


def load_split(split: Split, n: int | None = None, *, data_dir: Path = DEFAULT_DATA_DIR,
               levels: tuple[str, ...] = LEVELS) -> list[dict[str, Any]]:
    """The first ``n`` tasks (all when None) of ``split`` at the given difficulty ``levels``.

    Builds the databases under ``data_dir`` when they are missing. A task is
    ``{"id", "db_id", "db_path", "schema", "question", "gold", "level", "template", "split"}``;
    the agent sees ``schema`` and ``question``, the grader uses ``db_path`` and ``gold``.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    unknown = set(levels) - set(LEVELS)
    if unknown:
        raise ValueError(f"unknown difficulty levels {sorted(unknown)}; use some of {', '.join(LEVELS)}")
    data_dir = Path(data_dir)
    if not all(database_path(data_dir, db).is_file() for db in DOMAINS):
        build(data_dir)
    chosen = [q for db in DOMAINS.values() for q in questions_for(db)
              if split_of(q) == split and q.level in levels and _well_posed(q, database_path(data_dir, q.db_id))]
    ordered = _interleave(chosen, f"{_ORDER_SEED}-{split}")
    if n is not None:
        if n > len(ordered):
            raise ValueError(f"split {split!r} has {len(ordered)} questions at levels {list(levels)}, not {n}")
        ordered = ordered[:n]
    return [_task(q, split, i, data_dir) for i, q in enumerate(ordered)]


def main() -> None:
    p = argparse.ArgumentParser(description="build the SQL task's databases and show its splits")
    p.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    p.add_argument("--show", type=int, default=2, help="example questions per split")
    args = p.parse_args()
    data_dir = build(Path(args.data_dir))
    for split in SPLITS:
        tasks = load_split(split, data_dir=data_dir)  # type: ignore[arg-type]
        levels = Counter(t["level"] for t in tasks)
        print(f"{split}: {len(tasks)} questions on {sorted({t['db_id'] for t in tasks})}; "
              + ", ".join(f"{lv} {levels[lv]}" for lv in LEVELS))
        for t in tasks[: args.show]:
            print(f"    [{t['level']}] {t['question']}\n        {t['gold']}")
    print(f"databases under {data_dir / 'database'}")


if __name__ == "__main__":
    main()
