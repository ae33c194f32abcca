"""``generate_id``: v0.3's random identifiers."""

from __future__ import annotations

import secrets

__all__ = ["generate_id"]


def generate_id(length: int) -> str:
    """A random hexadecimal string of ``length`` characters."""
    if length <= 0:
        raise ValueError(f"length must be positive, got {length}")
    return secrets.token_hex((length + 1) // 2)[:length]
