"""Import ``examples/sql_agent``'s modules for the tests, whatever other examples' tests
imported before under the same plain names (``agent``, ``data``, ``train``...).

The modules stay in ``sys.modules`` under those names (the runner resolves an agent's
annotations through its module), but the example's folder does not stay on
``sys.path``, so no later plain import finds them by accident.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import SimpleNamespace

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sql_agent"
NAMES = ("schemas", "grader", "questions", "data", "protocol", "agent", "critic", "teacher", "spider", "stages",
         "train")


def _ours(name: str) -> bool:
    module = sys.modules.get(name)
    return module is not None and Path(getattr(module, "__file__", None) or "").parent == EXAMPLE


def load_sql_example() -> SimpleNamespace:
    """The example's modules as attributes (``sql.grader.score``), imported together."""
    for name in NAMES:
        if name in sys.modules and not _ours(name):
            del sys.modules[name]
    sys.path.insert(0, str(EXAMPLE))
    try:
        return SimpleNamespace(**{name: importlib.import_module(name) for name in NAMES})
    finally:
        while str(EXAMPLE) in sys.path:  # the example's scripts add their folder too
            sys.path.remove(str(EXAMPLE))
