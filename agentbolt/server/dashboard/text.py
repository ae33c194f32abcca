"""Text shaping shared by the dashboard views: clipping, durations and one-line previews."""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["INPUT_PREVIEW_CHARS", "clip", "duration", "input_preview", "json_text"]

INPUT_PREVIEW_CHARS = 120


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``…`` when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def duration(start: float | None, end: float | None) -> float | None:
    """``end - start``, or None while either is unknown."""
    return None if start is None or end is None else end - start


def json_text(value: Any) -> str:
    """``value`` as compact JSON text (anything JSON cannot hold written with ``str``)."""
    return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


def input_preview(value: Any) -> str:
    """A rollout input in one short line: a string as it is, anything else as compact JSON."""
    text = value if isinstance(value, str) else json_text(value)
    return clip(" ".join(text.split()), INPUT_PREVIEW_CHARS)
