"""``JsonlSink``: one JSON object per line in the run directory — the record that is
always there, readable without agentbolt (``pandas.read_json(path, lines=True)``)."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import orjson

from agentbolt.metrics.base import MetricsSink
from agentbolt.types import MetricValue

__all__ = ["JsonlSink", "read_jsonl"]


def _jsonable(value: Any) -> Any:
    """NaN and infinities are not JSON: written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    item = getattr(value, "item", None)  # third-party: numpy / torch scalars
    if callable(item) and not isinstance(value, (int, float)):
        return _jsonable(item())
    return value


class JsonlSink(MetricsSink):
    """Appends ``{"step": ..., "time": ..., **values}`` per :meth:`log` to ``path``.

    Each line is flushed to the OS as it is written, so a crashed run loses nothing it
    logged; the file is opened in append mode, so a resumed run continues it. Parent
    folders are created. ``fsync=True`` also forces each line to disk (slower).
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._file: IO[bytes] | None = None

    def _open(self) -> IO[bytes]:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("ab")
        return self._file

    async def log(self, step: int, values: Mapping[str, MetricValue]) -> None:
        row: dict[str, Any] = {"step": step, "time": time.time()}
        row.update((str(k), _jsonable(v)) for k, v in values.items())
        f = self._open()
        f.write(orjson.dumps(row) + b"\n")
        f.flush()
        if self.fsync:
            os.fsync(f.fileno())

    async def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every row a :class:`JsonlSink` wrote to ``path``, in order. A last line cut short
    by a crash is skipped."""
    rows: list[dict[str, Any]] = []
    with Path(path).open("rb") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            if i == len(lines) - 1:
                break  # a torn final write
            raise ValueError(f"{path}: line {i + 1} is not JSON; was the file written by JsonlSink?") from None
    return rows
