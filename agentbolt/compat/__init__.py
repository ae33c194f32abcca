"""Agent Lightning v0.3 programs on agentbolt.

Replace ``agentlightning`` by ``agentbolt.compat`` in the imports — ``import
agentbolt.compat as agl``, ``from agentbolt.compat.store import InMemoryLightningStore``
— and a v0.3 program runs on agentbolt. ``import agentbolt as agl`` works too: the v0.3
names agentbolt does not define itself are found here (lazily).

The same module layout as ``agentlightning``: :mod:`.store`, :mod:`.runner`,
:mod:`.litagent`, :mod:`.algorithm` (and ``.algorithm.apo``), :mod:`.adapter`,
:mod:`.emitter`, :mod:`.reward`, :mod:`.tracer` (``.otel``, ``.agentops``, ``.dummy``),
:mod:`.types`, :mod:`.trainer`, :mod:`.execution`, :mod:`.llm_proxy`, :mod:`.logging`,
:mod:`.env_var`, :mod:`.semconv`, :mod:`.utils` — and every other module path of v0.3.0
(``store.memory``, ``types.tracer``, ``utils.otel``...): :data:`.surface.MODULES` lists
them with their names, and the paths without code of their own are made from it on
import. :data:`.names.PROVIDED` maps each of v0.3's 116 public names to its agentbolt
object; :data:`.names.UNSUPPORTED` says why the others are not provided.
``docs/migrating-from-agent-lightning.md`` is the guide.
"""

from __future__ import annotations

from typing import Any

from agentbolt.compat.names import PROVIDED
from agentbolt.compat.resolution import UnsupportedV03NameError as UnsupportedV03NameError
from agentbolt.compat.resolution import resolve as resolve
from agentbolt.compat.submodules import install

__all__ = sorted(PROVIDED)  # noqa: PLE0605 - the v0.3 names of the table
__version__ = "0.3.0"
"""The Agent Lightning version whose API this module provides."""

install()  # agentbolt.compat.<every v0.3 module path> (agentbolt.compat.surface)


def __getattr__(name: str) -> Any:
    value = resolve(name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(PROVIDED))
