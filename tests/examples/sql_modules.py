"""Import ``examples/sql_agent``'s modules for the tests, whatever other examples' tests
imported before under the same plain names (``agent``, ``data``, ``train``...)
(see :mod:`tests.examples.example_modules`)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.examples.example_modules import load_example

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sql_agent"
NAMES = ("schemas", "grader", "questions", "data", "protocol", "agent", "critic", "teacher", "spider", "stages",
         "train")


def load_sql_example() -> SimpleNamespace:
    """The example's modules as attributes (``sql.grader.score``), imported together."""
    return load_example(EXAMPLE, NAMES)
