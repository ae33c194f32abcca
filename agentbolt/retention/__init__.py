"""Retention: export a finished run to files, and delete old spans.

* :func:`export_run` — rollouts, attempts, spans, training samples and metrics of an
  :class:`ExportSelection` to JSONL (optionally gzipped) or Parquet, streamed page by
  page over any store, with a ``manifest.json``.
* :func:`prune_spans` — delete the spans of rollouts that finished before a time (the
  store keeps rollouts, attempts and rewards), optionally reclaiming SQLite space.

``docs/retention.md`` has the file layout and the commands (``agentbolt store export``,
``agentbolt store prune-spans``).
"""

from agentbolt.retention.errors import (
    InvalidTimeError,
    MissingParquetError,
    OutputDirError,
    RetentionError,
)
from agentbolt.retention.export import ExportManifest, SampleKind, export_run
from agentbolt.retention.formats import COLUMNS, ExportFormat
from agentbolt.retention.prune import PruneResult, prune_spans
from agentbolt.retention.selection import ExportSelection
from agentbolt.retention.times import format_time, parse_duration, parse_time

__all__ = [
    "COLUMNS",
    "ExportFormat",
    "ExportManifest",
    "ExportSelection",
    "InvalidTimeError",
    "MissingParquetError",
    "OutputDirError",
    "PruneResult",
    "RetentionError",
    "SampleKind",
    "export_run",
    "format_time",
    "parse_duration",
    "parse_time",
    "prune_spans",
]
