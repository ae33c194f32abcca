"""Where each v0.3 name lives on agentbolt: :func:`resolve` (a top-level name) and
:func:`resolve_in` (a name of one v0.3 module), both from the tables of :mod:`.names`
and :mod:`.surface`."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from agentbolt.compat.names import PROVIDED, UNSUPPORTED
from agentbolt.compat.surface import MODULES

__all__ = ["UnsupportedV03NameError", "module_getattr", "resolve", "resolve_in", "v03_names_of"]

GUIDE = "docs/migrating-from-agent-lightning.md"


class UnsupportedV03NameError(AttributeError):
    """A v0.3 name agentbolt deliberately does not provide (the message says why)."""


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)  # third-party: v0.3's names, resolved on first use


def resolve(name: str) -> Any:
    """The agentbolt object for v0.3's top-level ``name``; :class:`UnsupportedV03NameError`
    with the reason for names not provided."""
    target = PROVIDED.get(name)
    if target is None:
        if name in UNSUPPORTED:
            raise UnsupportedV03NameError(
                f"Agent Lightning's {name} is not provided by agentbolt: {UNSUPPORTED[name]} (see {GUIDE})"
            )
        raise AttributeError(f"module 'agentbolt.compat' has no attribute {name!r}")
    return _load(target)


def v03_names_of(module: str) -> tuple[str, ...]:
    """Every name v0.3's ``agentlightning.<module>`` offers (``""``: the top level)."""
    if module == "":
        return tuple(sorted({*PROVIDED, *UNSUPPORTED}))
    spec = MODULES[module]
    return tuple(sorted({*spec.names, *spec.extra, *spec.unsupported}))


def unsupported_reason(module: str, name: str | None = None) -> str | None:
    """Why agentbolt does not provide ``agentlightning.<module>`` (or its ``name``); ``None``
    when it does."""
    spec = MODULES.get(module)
    if spec is None:
        return None
    if spec.reason is not None:
        return spec.reason
    if name is None:
        return None
    if name in spec.unsupported:
        return spec.unsupported[name]
    if name in spec.names or module == "":
        return UNSUPPORTED.get(name)
    return None


def resolve_in(module: str, name: str) -> Any:
    """The agentbolt object for ``from agentlightning.<module> import <name>``."""
    spec = MODULES[module]
    v03 = f"agentlightning.{module}" if module else "agentlightning"
    reason = unsupported_reason(module, name)
    if reason is not None:
        what = v03 if spec.reason is not None else f"{v03}.{name}"
        raise UnsupportedV03NameError(f"Agent Lightning's {what} is not provided by agentbolt: {reason} "
                                      f"(see {GUIDE})")
    if name in spec.extra:
        return _load(spec.extra[name])
    if name in spec.names or module == "":
        return resolve(name)
    raise AttributeError(f"module 'agentbolt.compat.{module}' has no attribute {name!r} "
                         f"(v0.3's {v03} had none either)")


def module_getattr(module_name: str) -> Callable[[str], Any]:  # third-party: v0.3's names, resolved on first use
    """A module ``__getattr__`` for the agentbolt.compat module ``module_name``: the v0.3 names
    it does not define itself, resolved from the tables (and cached on the module)."""
    module = module_name.removeprefix("agentbolt.compat").removeprefix(".")

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = resolve_in(module, name)
        setattr(importlib.import_module(module_name), name, value)
        return value

    return __getattr__
