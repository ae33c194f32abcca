"""The spans of :class:`~agentbolt.store.memory.MemoryStore`: one bucket per attempt,
keyed by span id, with the attempt's next sequence number and the total count."""

from __future__ import annotations

from collections.abc import Iterable

from agentbolt.types import Span

__all__ = ["SpanTable"]

AttemptKey = tuple[str, str]  # (rollout id, attempt id)


class SpanTable:
    """Span storage. Not locked: the store calls it under its lock."""

    def __init__(self) -> None:
        self._buckets: dict[AttemptKey, dict[str, Span]] = {}
        self._next_seq: dict[AttemptKey, int] = {}
        self.count = 0

    def add(self, span: Span) -> tuple[Span, bool]:
        """Store ``span`` (numbered next in its attempt when it has no sequence id) and
        return it with True; a span id already stored returns the stored span and False."""
        key = (span.rollout_id, span.attempt_id)
        bucket = self._buckets.setdefault(key, {})
        stored = bucket.get(span.span_id)
        if stored is not None:
            return stored, False
        seq = self._next_seq.get(key, 0)
        if span.sequence_id is None:
            span = span.model_copy(update={"sequence_id": seq})
            self._next_seq[key] = seq + 1
        else:
            self._next_seq[key] = max(seq, span.sequence_id) + 1
        bucket[span.span_id] = span
        self.count += 1
        return span, True

    def of_attempt(self, key: AttemptKey) -> Iterable[Span]:
        """The attempt's spans (stored objects: the caller copies or leaves them be)."""
        return self._buckets.get(key, {}).values()

    def delete(self, keys: Iterable[AttemptKey], *, dry_run: bool) -> int:
        """Delete every span of these attempts (with ``dry_run``, only count them)."""
        deleted = 0
        for key in keys:
            bucket = self._buckets.get(key)
            if not bucket:
                continue
            deleted += len(bucket)
            if not dry_run:
                self.count -= len(bucket)
                del self._buckets[key]
        return deleted
