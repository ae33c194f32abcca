"""Agent Lightning v0.3 programs on agentbolt.

Replace ``agentlightning`` by ``agentbolt.compat`` in the imports — ``import
agentbolt.compat as agl``, ``from agentbolt.compat.store import InMemoryLightningStore``
— and a v0.3 program runs on agentbolt. ``import agentbolt as agl`` works too: the v0.3
names agentbolt does not define itself are found here (lazily).

The same module layout as ``agentlightning``: :mod:`.store`, :mod:`.runner`,
:mod:`.litagent`, :mod:`.algorithm` (and ``.algorithm.apo``), :mod:`.adapter`,
:mod:`.emitter`, :mod:`.reward`, :mod:`.tracer` (``.otel``, ``.agentops``, ``.dummy``),
:mod:`.types`, :mod:`.trainer`, :mod:`.execution`, :mod:`.llm_proxy`, :mod:`.logging`,
:mod:`.env_var`. :data:`.names.PROVIDED` maps each of v0.3's 116 public names to its
agentbolt object; :data:`.names.UNSUPPORTED` says why the others are not provided.
``docs/migrating-from-agent-lightning.md`` is the guide.
"""

from __future__ import annotations

import importlib
from typing import Any

from agentbolt.compat.names import PROVIDED, UNSUPPORTED

__all__ = sorted(PROVIDED)  # noqa: PLE0605 - the v0.3 names of the table
__version__ = "0.3.0"
"""The Agent Lightning version whose API this module provides."""


class UnsupportedV03NameError(AttributeError):
    """A v0.3 name agentbolt deliberately does not provide (the message says why)."""


def resolve(name: str) -> Any:
    """The agentbolt object for v0.3's ``name``; :class:`UnsupportedV03NameError` with
    the reason for names not provided."""
    target = PROVIDED.get(name)
    if target is None:
        if name in UNSUPPORTED:
            raise UnsupportedV03NameError(
                f"Agent Lightning's {name} is not provided by agentbolt: {UNSUPPORTED[name]} "
                "(see docs/migrating-from-agent-lightning.md)"
            )
        raise AttributeError(f"module 'agentbolt.compat' has no attribute {name!r}")
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def __getattr__(name: str) -> Any:
    value = resolve(name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(PROVIDED))
