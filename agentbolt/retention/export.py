"""Export rollouts, attempts, spans, training samples and metrics to a folder of files.

::

    from agentbolt.retention import ExportSelection, export_run

    manifest = await export_run(
        store, "exports/run-7",
        ExportSelection(since="2026-01-30", mode="train", metric_runs=["grpo-7"]),
        format="parquet",
    )

Works over any :class:`~agentbolt.store.base.Store` (a remote server through
``HttpStore`` too) and streams: rollouts are read ``page_size`` at a time, the attempts
and spans of at most ``concurrency`` rollouts are held at once, metrics are read 1,000
steps at a time. The folder gets one file per table (see :mod:`.formats`) and, last,
``manifest.json``: an export without a manifest did not finish.

``samples`` are the training data of each finished rollout's latest attempt, made by the
adapters from its model calls: ``"chat"`` gives OpenAI chat records
(:class:`~agentbolt.adapters.MessagesAdapter`), ``"triplets"`` (prompt, response,
reward) triplets with token ids (:class:`~agentbolt.adapters.TripletAdapter`), ``"rl"``
the token-level samples GRPO trains on (:class:`~agentbolt.adapters.SampleAdapter`:
merged by lineage, loss masks, logprobs, policy versions; every agent trained).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, Field

from agentbolt.adapters import (
    MessagesAdapter,
    MissingTokenIdsError,
    SampleAdapter,
    TripletAdapter,
)
from agentbolt.retention.errors import OutputDirError
from agentbolt.retention.formats import (
    ExportFormat,
    TableWriter,
    check_format,
    file_name,
    open_writer,
)
from agentbolt.retention.selection import ExportSelection
from agentbolt.retention.times import format_time
from agentbolt.store.base import Store
from agentbolt.types import Attempt, Rollout, Span
from agentbolt.version import __version__

__all__ = ["MANIFEST", "ExportManifest", "SampleKind", "export_run"]

log = logging.getLogger("agentbolt.retention")

SampleKind = Literal["chat", "triplets", "rl", "none"]
MANIFEST = "manifest.json"
TABLES = ("rollouts", "attempts", "spans", "samples", "metrics")

_SPAN_PAGE = 2000
_METRIC_PAGE = 1000


class ExportManifest(BaseModel):
    """``manifest.json``: what was exported, how, and how many rows each file holds."""

    agentbolt_version: str
    exported_at: float
    exported_at_iso: str
    format: ExportFormat
    gzip: bool
    samples: SampleKind
    selection: ExportSelection
    files: dict[str, str] = Field(description="Table name -> file name in the folder.")
    counts: dict[str, int] = Field(description="Table name -> rows written.")
    seconds: float = Field(description="How long the export took.")


async def export_run(
    store: Store,
    out_dir: str | os.PathLike[str],
    selection: ExportSelection | None = None,
    *,
    format: ExportFormat = "jsonl",
    samples: SampleKind = "chat",
    gzip: bool = False,
    page_size: int = 200,
    concurrency: int = 8,
    overwrite: bool = False,
    progress: bool = True,
) -> ExportManifest:
    """Write the selected rollouts (with their attempts, spans and samples) and metric runs
    to ``out_dir`` and return the manifest (also saved as ``manifest.json``).

    ``out_dir`` is created; if it exists it must be empty, unless ``overwrite`` (which
    replaces the export files, nothing else). ``gzip`` compresses JSONL files
    (``.jsonl.gz``); Parquet files are always compressed (zstd).
    """
    selection = selection or ExportSelection()
    check_format(format)
    if gzip and format != "jsonl":
        raise ValueError("gzip applies to JSONL only (Parquet files are compressed already): drop gzip")
    if samples not in ("chat", "triplets", "rl", "none"):
        raise ValueError(f"unknown samples kind {samples!r}: use 'chat', 'triplets', 'rl' or 'none'")
    if not 1 <= page_size <= 1000:
        raise ValueError(f"page_size must be 1..1000, got {page_size}")
    if not 1 <= concurrency <= 64:
        raise ValueError(f"concurrency must be 1..64, got {concurrency}")
    folder = _prepare(Path(out_dir), overwrite, format, gzip)
    started = time.time()
    tables = [t for t in TABLES if t != "samples" or samples != "none"]
    writers: dict[str, TableWriter] = {}
    try:
        for table in tables:
            columns = f"samples_{samples}" if table == "samples" else table
            writers[table] = open_writer(folder, table, columns, format, gzipped=gzip)
        run = _Export(store, selection, writers, samples, page_size, concurrency)
        with _progress(progress) as bar:
            await run.rollouts(bar)
            await run.metrics(bar)
    finally:
        for writer in writers.values():
            writer.close()
    manifest = ExportManifest(
        agentbolt_version=__version__,
        exported_at=started,
        exported_at_iso=format_time(started),
        format=format,
        gzip=gzip,
        samples=samples,
        selection=selection,
        files={t: w.path.name for t, w in writers.items()},
        counts={t: w.rows for t, w in writers.items()},
        seconds=round(time.time() - started, 3),
    )
    tmp = folder / (MANIFEST + ".tmp")
    tmp.write_bytes(orjson.dumps(manifest.model_dump(mode="json"), option=orjson.OPT_INDENT_2))
    tmp.replace(folder / MANIFEST)
    log.info("exported %s to %s in %.1f s", manifest.counts, folder, manifest.seconds)
    return manifest


def _prepare(folder: Path, overwrite: bool, format: ExportFormat, gzipped: bool) -> Path:
    if folder.exists() and not folder.is_dir():
        raise OutputDirError(f"{folder} is a file: give a folder to export into")
    if folder.is_dir() and any(folder.iterdir()):
        if not overwrite:
            raise OutputDirError(f"{folder} is not empty: give a new folder, or pass overwrite=True (--overwrite)")
        for name in [MANIFEST, *(file_name(t, format, gzipped) for t in TABLES)]:
            (folder / name).unlink(missing_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class _Export:
    """One export in progress: reads the store page by page, writes each table."""

    def __init__(
        self,
        store: Store,
        selection: ExportSelection,
        writers: dict[str, TableWriter],
        samples: SampleKind,
        page_size: int,
        concurrency: int,
    ) -> None:
        self.store = store
        self.sel = selection
        self.writers = writers
        self.samples = samples
        self.page_size = page_size
        self.concurrency = concurrency

    async def rollouts(self, bar: _Bar) -> None:
        bar.start("rollouts", await self._total())
        async for page in self._pages():
            for i in range(0, len(page), self.concurrency):
                batch = page[i : i + self.concurrency]
                details = await asyncio.gather(*(self._details(r) for r in batch))
                for rollout, detail in zip(batch, details, strict=True):
                    if detail is not None:
                        self._write_rollout(rollout, *detail)
                bar.advance(len(batch))

    async def metrics(self, bar: _Bar) -> None:
        for run_id in dict.fromkeys(self.sel.metric_runs):
            bar.start(f"metrics {run_id}", None)
            after: int | None = None
            while True:
                records = await self.store.query_metrics(run_id, after_step=after, limit=_METRIC_PAGE)
                self.writers["metrics"].write([r.model_dump(mode="json") for r in records])
                bar.advance(len(records))
                if len(records) < _METRIC_PAGE:
                    break
                after = records[-1].step

    async def _total(self) -> int | None:
        sel = self.sel
        if sel.rollout_ids is not None:
            return len(set(sel.rollout_ids))
        if sel.since is None and sel.until is None:
            return await self.store.count_rollouts(status=sel.status, mode=sel.mode)
        return None  # a time window is applied while reading: the total is not known ahead

    async def _pages(self) -> AsyncIterator[list[Rollout]]:
        """Selected rollouts (before the version filter), a page at a time, by creation."""
        sel, store = self.sel, self.store
        if sel.rollout_ids is not None:
            ids = list(dict.fromkeys(sel.rollout_ids))
            for i in range(0, len(ids), self.page_size):
                chunk = ids[i : i + self.page_size]
                page = await store.query_rollouts(rollout_ids=chunk, status=sel.status, mode=sel.mode, limit=len(chunk))
                yield [r for r in page.items if sel.created_in_window(r)]
            return
        cursor: str | None = None
        while True:
            page = await store.query_rollouts(status=sel.status, mode=sel.mode, limit=self.page_size, cursor=cursor)
            items = page.items
            ended = sel.until is not None and bool(items) and items[-1].created_at >= sel.until
            yield [r for r in items if sel.created_in_window(r)]
            if ended or page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def _details(self, rollout: Rollout) -> tuple[list[Attempt], list[Span]] | None:
        """The rollout's attempts and spans, or None when the version filter drops it."""
        attempts = await self.store.query_attempts(rollout.rollout_id)
        if not self.sel.version_matches(rollout, attempts):
            return None
        spans: list[Span] = []
        cursor: str | None = None
        while True:
            page = await self.store.query_spans(rollout.rollout_id, limit=_SPAN_PAGE, cursor=cursor)
            spans.extend(page.items)
            if page.next_cursor is None:
                return attempts, spans
            cursor = page.next_cursor

    def _write_rollout(self, rollout: Rollout, attempts: list[Attempt], spans: list[Span]) -> None:
        self.writers["rollouts"].write([rollout.model_dump(mode="json")])
        self.writers["attempts"].write([a.model_dump(mode="json") for a in attempts])
        self.writers["spans"].write([s.model_dump(mode="json") for s in spans])
        if self.samples != "none" and rollout.status.is_terminal and rollout.latest_attempt_id is not None:
            latest = [s for s in spans if s.attempt_id == rollout.latest_attempt_id]
            self.writers["samples"].write(self._samples(rollout, latest))

    def _samples(self, rollout: Rollout, spans: list[Span]) -> list[dict[str, Any]]:
        if self.samples == "triplets":
            return [t.model_dump(mode="json") for t in TripletAdapter().adapt(spans)]
        if self.samples == "rl":
            return _rl_rows(spans)
        return [
            {
                "rollout_id": rollout.rollout_id,
                "attempt_id": rollout.latest_attempt_id,
                "mode": rollout.mode.value,
                "status": rollout.status.value,
                "reward": rollout.reward,
                "index": i,
                **record,
            }
            for i, record in enumerate(MessagesAdapter().adapt(spans))
        ]


def _rl_rows(spans: list[Span]) -> list[dict[str, Any]]:
    """The RL samples of one attempt; none (logged) when its calls have no token ids."""
    try:
        samples = SampleAdapter()(spans)
    except MissingTokenIdsError as exc:
        log.info("no RL samples for rollout %s: %s", spans[0].rollout_id if spans else "?", exc)
        return []
    out = []
    for i, sample in enumerate(samples):
        row = sample.as_dict()
        row.pop("advantage")
        out.append({"index": i, **row})
    return out


class _Bar:
    """Progress of one export: a rich bar, or nothing."""

    def __init__(self, progress: Any | None) -> None:
        self._progress = progress
        self._task: Any = None

    def start(self, what: str, total: int | None) -> None:
        if self._progress is not None:
            self._task = self._progress.add_task(what, total=total)

    def advance(self, n: int) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=n)


@contextlib.contextmanager
def _progress(enabled: bool) -> Iterator[_Bar]:
    if not enabled:
        yield _Bar(None)
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(
        TextColumn("[bold]export[/] {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
    ) as progress:
        yield _Bar(progress)
