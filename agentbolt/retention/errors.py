"""The typed errors of :mod:`agentbolt.retention`: each message says what to do."""

from __future__ import annotations

__all__ = ["InvalidTimeError", "MissingParquetError", "OutputDirError", "RetentionError"]


class RetentionError(Exception):
    """Base of the errors an export or a span deletion raises before touching the store."""


class InvalidTimeError(RetentionError, ValueError):
    """A time or a duration that could not be read (``30d``, ``2026-01-31T00:00``, ``1767139200``)."""


class OutputDirError(RetentionError):
    """The export folder cannot be used (not empty, or a file)."""


class MissingParquetError(RetentionError, ImportError):
    """``format="parquet"`` without pyarrow installed."""

    def __init__(self) -> None:
        super().__init__(
            "exporting to Parquet needs pyarrow, which is not installed: run `pip install 'agentbolt[parquet]'` "
            "(or export with format='jsonl', which needs nothing extra)"
        )
