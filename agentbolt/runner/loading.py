"""Find an agent (or hooks) by reference: ``"package.module:object"`` strings, and the
reverse — the reference under which an object can be imported again in another process.

Child processes (the multi-process strategy) and ``agentbolt runner`` on another machine
cannot receive a Python object, only a name to import. Lambdas, closures and objects
defined in an interactive session have no such name: run those with the in-process
strategy.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["AgentLoadError", "load_object", "reference_of"]


class AgentLoadError(ValueError):
    """A ``module:object`` reference that does not name an importable object."""


def load_object(reference: str) -> Any:
    """Import ``"package.module:attr.sub"`` or ``"path/to/file.py:attr"`` and return the object.

    The current directory is importable, as with ``python -m``, so a runner started
    next to the agent's code finds it.
    """
    module_part, sep, attr_path = reference.partition(":")
    if not sep or not module_part or not attr_path:
        raise AgentLoadError(
            f"agent reference {reference!r} must look like 'package.module:object' "
            "(or 'path/to/file.py:object')"
        )
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = _import_module(module_part, reference)
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)  # third-party: an object named by a path the user gave
        except AttributeError:
            raise AgentLoadError(
                f"module {module.__name__!r} has no attribute {attr_path!r} (from agent reference {reference!r})"
            ) from None
    return obj


def _import_module(name: str, reference: str) -> Any:
    if name.endswith(".py"):
        path = Path(name).resolve()
        if not path.is_file():
            raise AgentLoadError(f"no such file {str(path)!r} (from agent reference {reference!r})")
        mod_name = f"agentbolt_user_{path.stem}"
        if mod_name in sys.modules:
            return sys.modules[mod_name]
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:  # pragma: no cover - spec_from_file_location of a .py file
            raise AgentLoadError(f"cannot load {str(path)!r} as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[mod_name]
            raise
        return module
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name and name.startswith(err.name):
            raise AgentLoadError(
                f"cannot import module {name!r} for agent reference {reference!r}: run from the directory "
                "that contains it, or add that directory to PYTHONPATH"
            ) from err
        raise


def reference_of(obj: Any) -> str | None:
    """``"module:qualname"`` under which ``obj`` can be imported again, or None.

    None for lambdas, closures (``<locals>`` in the qualified name) and objects of the
    ``__main__`` module (those only load again in a child started by ``multiprocessing``).
    Instances are not looked up by reference (they travel by pickling).
    """
    module = getattr(obj, "__module__", None)  # third-party: an object named by a path the user gave
    qualname = getattr(obj, "__qualname__", None)  # third-party: an object named by a path the user gave
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    if "<" in qualname or module == "__main__":
        return None
    try:
        found = load_object(f"{module}:{qualname}")
    except Exception:  # noqa: BLE001 — not importable by reference: the caller says so
        return None
    return f"{module}:{qualname}" if found is obj else None
