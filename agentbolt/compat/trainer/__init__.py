"""``agentlightning.trainer`` on agentbolt: agentbolt's :class:`~agentbolt.Trainer`
accepts v0.3's arguments (:mod:`.trainer_args`).

``Trainer`` is looked up in the table of v0.3 names (:data:`.names.PROVIDED`) on first use,
like every v0.3 name: agentbolt's Trainer uses this package to map v0.3's arguments, so
this package names it rather than importing it back (no import loop).
"""

from typing import Any

from agentbolt.compat.components import build_component

__all__ = ["Trainer", "build_component"]  # noqa: F822 - Trainer comes from __getattr__ below


def __getattr__(name: str) -> Any:
    if name == "Trainer":
        from agentbolt.compat import resolve

        return resolve("Trainer")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
