"""v0.3's ``UNSET``: the default of the store's update methods that means "leave this
field as it is" (``None`` may be a value). agentbolt's :class:`LightningStore` takes it —
and ``None`` — for a field not given."""

from __future__ import annotations

from typing import Any

__all__ = ["UNSET", "Unset", "given"]


class Unset:
    """The type of :data:`UNSET` (any instance means "not given")."""

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "UNSET"


UNSET = Unset()


def given(value: Any) -> Any:
    """``value``, or ``None`` for :data:`UNSET`."""
    return None if isinstance(value, Unset) else value
