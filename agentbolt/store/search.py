"""Rollout search: which text a search looks in, and how case is folded.

A search matches a rollout when the needle is a substring of its id or of its input as
compact JSON (``{"question":"What is 2+2?"}``), ignoring ASCII case. Every backend
applies these same rules — SQLite's ``lower()`` folds ASCII letters only, so the memory
store folds exactly those too, and both agree on every input.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel

from agentbolt.store.errors import InvalidRequestError

__all__ = ["MAX_SEARCH_LENGTH", "fold", "input_text", "matches", "search_needle"]

MAX_SEARCH_LENGTH = 200
"""Longest search string accepted."""

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold(text: str) -> str:
    """``text`` with ASCII letters lowercased (and nothing else changed)."""
    return text.translate(_ASCII_LOWER)


def _default(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    return str(obj)


def input_text(value: Any) -> str:
    """A rollout input as the compact JSON text a search looks in (the text the SQLite
    store keeps in its ``input`` column)."""
    return orjson.dumps(value, default=_default, option=orjson.OPT_NON_STR_KEYS).decode()


def search_needle(search: str | None) -> str | None:
    """The folded needle of a search, or None for no search (None or empty)."""
    if not search:
        return None
    if len(search) > MAX_SEARCH_LENGTH:
        raise InvalidRequestError(f"search is {len(search)} characters long; search with at most {MAX_SEARCH_LENGTH}")
    return fold(search)


def matches(needle: str, rollout_id: str, folded_input: str) -> bool:
    """Whether a rollout with this id and folded input text matches the folded ``needle``."""
    return needle in fold(rollout_id) or needle in folded_input
