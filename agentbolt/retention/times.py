"""Reading the times and durations people type: ``30d``, ``12h``, ISO 8601, epoch seconds.

A time without a zone (``2026-01-31`` or ``2026-01-31T08:00``) is taken as UTC, so a
cron line means the same on every machine.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

from agentbolt.retention.errors import InvalidTimeError

__all__ = ["format_time", "parse_duration", "parse_time"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a number and a unit (``s``, ``m``, ``h``, ``d``, ``w``), or
    several (``1d12h``). Must be positive."""
    raw = text.strip().lower().replace(" ", "")
    pos, seconds = 0, 0.0
    for part in _PART.finditer(raw):
        if part.start() != pos:
            break
        seconds += float(part.group(1)) * _UNITS[part.group(2)]
        pos = part.end()
    if not raw or pos != len(raw):
        raise InvalidTimeError(
            f"cannot read the duration {text!r}: write a number and a unit, like 30d, 12h, 90m, 45s, 2w or 1d12h"
        )
    if seconds <= 0:
        raise InvalidTimeError(f"the duration {text!r} must be longer than zero")
    return seconds


def parse_time(value: Any) -> float:
    """Epoch seconds from a number, a numeric string, a :class:`datetime.datetime` or an
    ISO 8601 string (``2026-01-31``, ``2026-01-31T08:00:00+02:00``, ``...Z``)."""
    if isinstance(value, bool):
        raise InvalidTimeError(f"cannot read the time {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, dt.datetime):
        seconds = _aware(value).timestamp()
    elif isinstance(value, dt.date):
        seconds = dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC).timestamp()
    elif isinstance(value, str):
        seconds = _parse_text(value)
    else:
        raise InvalidTimeError(f"cannot read the time {value!r}: give epoch seconds or an ISO 8601 string")
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidTimeError(f"the time {value!r} is out of range")
    return seconds


def format_time(seconds: float) -> str:
    """ISO 8601 in UTC, to the second (for messages and manifests)."""
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _parse_text(text: str) -> float:
    raw = text.strip()
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        return _aware(dt.datetime.fromisoformat(raw)).timestamp()
    except ValueError:
        raise InvalidTimeError(
            f"cannot read the time {text!r}: give an ISO 8601 time (2026-01-31 or 2026-01-31T08:00:00Z, "
            "UTC when no zone is given) or epoch seconds (1767139200)"
        ) from None


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
