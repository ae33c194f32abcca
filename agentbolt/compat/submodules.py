"""The v0.3 modules without code of their own, made from :data:`.surface.MODULES` on import.

``import agentbolt.compat.store.memory`` or ``from agentbolt.compat.utils.otlp import
...`` finds no file; :class:`V03ModuleFinder` (installed on ``sys.meta_path`` by
``agentbolt.compat``, after the ordinary finders so real files always win) makes the
module: its ``__all__`` is what v0.3 offered there, and each name resolves on first use
to the agentbolt object — or raises :class:`~.resolution.UnsupportedV03NameError` with
the reason.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

from agentbolt.compat.resolution import module_getattr, unsupported_reason, v03_names_of
from agentbolt.compat.surface import MODULES

__all__ = ["PREFIX", "V03ModuleFinder", "install"]

PREFIX = "agentbolt.compat."


class V03ModuleFinder(MetaPathFinder, Loader):
    """Finds and builds ``agentbolt.compat.<v0.3 module>`` for the modules of the table."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> ModuleSpec | None:
        key = fullname.removeprefix(PREFIX)
        if not fullname.startswith(PREFIX) or key not in MODULES:
            return None
        is_package = any(other.startswith(key + ".") for other in MODULES)
        return ModuleSpec(fullname, self, is_package=is_package)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None  # the default module object

    def exec_module(self, module: ModuleType) -> None:
        key = module.__name__.removeprefix(PREFIX)
        spec = MODULES[key]
        names = v03_names_of(key)
        module.__doc__ = (f"Agent Lightning v0.3's ``agentlightning.{key}`` on agentbolt "
                          f"(made from agentbolt.compat.surface).")
        if spec.reason is not None:
            module.__doc__ += f" Not provided: {spec.reason}."
        if spec.reason is None:
            module.__all__ = [n for n in names if unsupported_reason(key, n) is None]  # type: ignore[attr-defined]
        setattr(module, "__getattr__", module_getattr(module.__name__))  # noqa: B010 - third-party: v0.3 names, lazily
        if module.__spec__ is not None and module.__spec__.submodule_search_locations is not None:
            module.__path__ = []  # a package: its children come from this finder too


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, V03ModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(V03ModuleFinder())
