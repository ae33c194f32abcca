"""``LIKE`` patterns for the SQL stores' rollout search (see :mod:`agentbolt.store.search`)."""

from __future__ import annotations

__all__ = ["like_pattern"]


def like_pattern(needle: str) -> str:
    """A ``LIKE ... ESCAPE '\\'`` pattern matching text that contains ``needle``, with
    ``%`` and ``_`` in the needle matched literally."""
    return "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
