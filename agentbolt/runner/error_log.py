"""Agent failures on the console: each distinct error once, loudly, then only counted.

A broken agent (a missing import, a wrong endpoint) fails every rollout the same way.
Logging each failure would bury the console in thousands of identical lines; logging
none leaves a run that trains nothing looking healthy. So the first time an error of a
given type and message is seen in this process it is logged at WARNING with the last
frames of its traceback; later occurrences are counted, and a runner reports the counts
when it stops (:meth:`FirstSeenErrors.summary`).

Like Python's own ``warnings`` "once" registry, the record is per process
(:data:`PROCESS_ERRORS`), so several runners in one process share it.
"""

from __future__ import annotations

import logging
import re
import threading
import traceback
from collections import Counter

__all__ = ["PROCESS_ERRORS", "FirstSeenErrors", "error_key", "last_frames"]

log = logging.getLogger("agentbolt.runner")

_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+")
_MAX_MESSAGE = 300


def error_key(type_name: str, message: str) -> tuple[str, str]:
    """What makes two errors "the same": their type and their message with numbers
    (ids, counts, addresses) blanked, so ``Timeout after 3.1 s`` and ``... 3.4 s`` match."""
    return type_name, _NUMBERS.sub("#", message.strip())[:_MAX_MESSAGE]


def last_frames(exc: BaseException, n: int = 3) -> str:
    """The last ``n`` frames of ``exc``'s traceback, one ``file:line in function`` each."""
    frames = traceback.extract_tb(exc.__traceback__)[-n:]
    return "\n".join(f"  {f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in frames)


class FirstSeenErrors:
    """Counts errors by :func:`error_key`; says which ones are new."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def record(self, type_name: str, message: str) -> int:
        """Count one occurrence; return how many times it has now been seen (1 = new)."""
        key = error_key(type_name, message)
        with self._lock:
            self._counts[key] += 1
            return self._counts[key]

    def log_failure(self, exc: BaseException, *, type_name: str, rollout_id: str) -> bool:
        """Log ``exc`` at WARNING if this process has not seen its kind before; True if
        it was logged."""
        seen = self.record(type_name, str(exc))
        if seen > 1:
            log.debug("rollout %s failed again with %s (%d times so far)", rollout_id, type_name, seen)
            return False
        message = str(exc)
        if len(message) > _MAX_MESSAGE:
            message = message[: _MAX_MESSAGE - 1] + "…"
        log.warning(
            "the agent raised %s: %s (rollout %s; further failures like it are counted, not logged)\n%s\n"
            "  see it with: agentbolt store rollout %s",
            type_name, message, rollout_id, last_frames(exc), rollout_id,
        )
        return True

    def counts(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._counts)

    def summary(self) -> str | None:
        """``ImportError: No module named 'openai' ×2688; ...`` (most common first), or None."""
        counts = self.counts()
        if not counts:
            return None
        parts = [f"{t}: {m} ×{n}" for (t, m), n in sorted(counts.items(), key=lambda kv: -kv[1])[:5]]
        more = len(counts) - 5
        return "; ".join(parts) + (f"; and {more} other kinds" if more > 0 else "")


PROCESS_ERRORS = FirstSeenErrors()
"""This process's record of agent failures (shared by its runners)."""
