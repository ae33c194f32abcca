"""Import an example's modules for the tests, whatever other examples' tests imported
before under the same plain names (``teacher``, ``stages``, ``train``...).

The modules stay in ``sys.modules`` under those names (the runner resolves an agent's
annotations through its module), but the example's folder does not stay on
``sys.path``, so no later plain import finds them by accident.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace


def _ours(name: str, folder: Path) -> bool:
    module = sys.modules.get(name)
    return module is not None and Path(getattr(module, "__file__", None) or "").parent == folder


def load_example(folder: Path, names: Sequence[str]) -> SimpleNamespace:
    """The modules ``names`` of the example in ``folder`` as attributes, imported together."""
    for name in names:
        if name in sys.modules and not _ours(name, folder):
            del sys.modules[name]
    sys.path.insert(0, str(folder))
    try:
        return SimpleNamespace(**{name: importlib.import_module(name) for name in names})
    finally:
        while str(folder) in sys.path:  # the example's scripts add their folder too
            sys.path.remove(str(folder))
