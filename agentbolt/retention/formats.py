"""The export tables and their writers: JSON Lines (optionally gzipped) or Parquet.

Every table is written row batch by row batch, so an export never holds more than a
batch in memory. In JSONL a row is the JSON object as the API returns it (nested fields
stay nested). Parquet needs a fixed schema: :data:`COLUMNS` gives each table's columns
and kinds; ``json`` columns hold nested values as JSON text (read them back with
``json.loads``), the rest are plain Arrow strings, 64-bit integers, doubles and booleans.
"""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import orjson

from agentbolt.retention.errors import MissingParquetError

__all__ = ["COLUMNS", "ExportFormat", "JsonlWriter", "ParquetWriter", "TableWriter", "file_name", "open_writer"]

ExportFormat = Literal["jsonl", "parquet"]
Kind = Literal["str", "int", "float", "bool", "json"]

COLUMNS: dict[str, dict[str, Kind]] = {
    "rollouts": {
        "rollout_id": "str", "input": "json", "mode": "str", "status": "str", "resources_version": "int",
        "config": "json", "metadata": "json", "created_at": "float", "updated_at": "float",
        "start_time": "float", "end_time": "float", "attempt_count": "int", "latest_attempt_id": "str",
        "reward": "float",
    },
    "attempts": {
        "attempt_id": "str", "rollout_id": "str", "sequence_id": "int", "worker_id": "str", "status": "str",
        "start_time": "float", "end_time": "float", "last_heartbeat_time": "float", "resources_version": "int",
        "error": "json", "metadata": "json", "reward": "float",
    },
    "spans": {
        "rollout_id": "str", "attempt_id": "str", "sequence_id": "int", "trace_id": "str", "span_id": "str",
        "parent_id": "str", "name": "str", "kind": "str", "status": "str", "status_message": "str",
        "start_time": "float", "end_time": "float", "attributes": "json", "events": "json", "resource": "json",
    },
    "metrics": {"run_id": "str", "step": "int", "timestamp": "float", "values": "json"},
    "samples_chat": {
        "rollout_id": "str", "attempt_id": "str", "mode": "str", "status": "str", "reward": "float", "index": "int",
        "messages": "json", "tools": "json",
    },
    "samples_triplets": {
        "rollout_id": "str", "attempt_id": "str", "span_id": "str", "index": "int", "agent_name": "str",
        "reward": "float", "prompt": "json", "response": "json", "logprobs": "json", "model": "str",
        "token_ids_source": "str", "resources_version": "int", "has_token_ids": "bool",
    },
    "samples_rl": {
        "rollout_id": "str", "attempt_id": "str", "index": "int", "reward": "float", "num_tokens": "int",
        "num_trained_tokens": "int", "token_ids": "json", "loss_mask": "json", "logprobs": "json",
        "versions": "json", "calls": "json",
    },
}
"""Columns of each table, in order. ``samples`` uses ``samples_chat``, ``samples_triplets`` or ``samples_rl``."""


class TableWriter(Protocol):
    """Appends rows to one table file; :attr:`rows` counts them."""

    path: Path
    rows: int

    def write(self, rows: Sequence[dict[str, Any]]) -> None: ...

    def close(self) -> None: ...


def file_name(table: str, format: ExportFormat, gzipped: bool = False) -> str:
    """``rollouts.jsonl``, ``rollouts.jsonl.gz`` or ``rollouts.parquet``."""
    if format == "parquet":
        return f"{table}.parquet"
    return f"{table}.jsonl.gz" if gzipped else f"{table}.jsonl"


class JsonlWriter:
    """One JSON object a line; gzip-compressed when ``gzipped``."""

    def __init__(self, path: Path, *, gzipped: bool = False) -> None:
        self.path = path
        self.rows = 0
        self._file: io.BufferedIOBase = (
            gzip.open(path, "wb", compresslevel=6) if gzipped else open(path, "wb")  # noqa: SIM115
        )

    def write(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            self._file.write(b"".join(orjson.dumps(row) + b"\n" for row in rows))
            self.rows += len(rows)

    def close(self) -> None:
        self._file.close()


class ParquetWriter:
    """Rows buffered into row groups of ``row_group_size``; nested values as JSON text."""

    def __init__(self, path: Path, columns: dict[str, Kind], *, row_group_size: int = 2000) -> None:
        pa, pq = _pyarrow()
        self.path = path
        self.rows = 0
        self._pa = pa
        self._columns = columns
        types = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "json": pa.string()}
        self._schema = pa.schema([(name, types[kind]) for name, kind in columns.items()])
        self._writer = pq.ParquetWriter(os.fspath(path), self._schema, compression="zstd")
        self._buffer: list[dict[str, Any]] = []
        self._row_group_size = row_group_size

    def write(self, rows: Sequence[dict[str, Any]]) -> None:
        self._buffer.extend(rows)
        self.rows += len(rows)
        if len(self._buffer) >= self._row_group_size:
            self._flush()

    def _flush(self) -> None:
        data = {name: [_cell(row.get(name), kind) for row in self._buffer] for name, kind in self._columns.items()}
        self._writer.write_table(self._pa.table(data, schema=self._schema))
        self._buffer = []

    def close(self) -> None:
        if self._buffer:
            self._flush()
        self._writer.close()


def open_writer(folder: Path, table: str, columns: str, format: ExportFormat, *, gzipped: bool = False) -> TableWriter:
    """A writer for ``table`` in ``folder`` (``columns`` names its :data:`COLUMNS` entry)."""
    path = folder / file_name(table, format, gzipped)
    if format == "parquet":
        return ParquetWriter(path, COLUMNS[columns])
    return JsonlWriter(path, gzipped=gzipped)


def check_format(format: str) -> None:
    """Fail early (before any file is made) on an unknown format or a missing pyarrow."""
    if format not in ("jsonl", "parquet"):
        raise ValueError(f"unknown export format {format!r}: use 'jsonl' or 'parquet'")
    if format == "parquet":
        _pyarrow()


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingParquetError() from None
    return pa, pq


def _cell(value: Any, kind: Kind) -> Any:
    if value is None:
        return None
    if kind == "json":
        return orjson.dumps(value).decode()
    return value
