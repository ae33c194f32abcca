"""``agentbolt store ...``: read what a store holds — stats, rollouts, spans,
resources, workers, training metrics — from a SQLite file or a running server; export a
run to files and delete old spans (``export``, ``prune-spans``: see docs/retention.md)."""

import contextlib
import time
from collections import deque
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.markup import escape

from agentbolt.cli.connect import DEFAULT_STORE_URL, query_store
from agentbolt.cli.failures import CliFailure, reported_errors
from agentbolt.cli.output import emit_json_lines, note, show
from agentbolt.cli.render import (
    json_line,
    masked_resources,
    resources_table,
    resources_view,
    rollout_view,
    rollouts_table,
    spans_table,
    stats_view,
    workers_table,
)
from agentbolt.cli.render_metrics import metrics_table
from agentbolt.retention import (
    ExportSelection,
    InvalidTimeError,
    PruneResult,
    RetentionError,
    export_run,
    format_time,
    parse_duration,
    parse_time,
    prune_spans,
)
from agentbolt.retention.formats import check_format
from agentbolt.store import Store
from agentbolt.store.pagination import ROLLOUT_SORT_KEYS
from agentbolt.types import Attempt, MetricRecord, Page, Resources, Rollout, RolloutMode, RolloutStatus, Span

__all__ = ["store_app"]

store_app = typer.Typer(
    name="store",
    help="Inspect a store (a SQLite file sqlite:///path.db, or a server http://host:port), "
    "export runs, delete old spans.",
    no_args_is_help=True,
)

SortKey = StrEnum("SortKey", {key: key for key in ROLLOUT_SORT_KEYS})  # type: ignore[misc]  # a dynamic Enum
"""The fields rollouts can be sorted by (those the store supports)."""
DEFAULT_SORT = SortKey("created_at")

StoreUrl = Annotated[
    str,
    typer.Option(
        "--store",
        envvar="AGENTBOLT_STORE",
        help="Store to read: sqlite:///path.db or http://host:port.",
        show_default=True,
    ),
]
Token = Annotated[
    str | None,
    typer.Option("--token", envvar="AGENTBOLT_TOKEN", help="Admin token for an http:// store.", show_default=False),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON lines (one object per line) for scripts.")]
Cursor = Annotated[
    str | None, typer.Option("--cursor", help="Continue after a previous page (its printed next cursor).")
]


def _next_page(cursor: str | None, as_json: bool) -> None:
    if cursor is None:
        return
    if as_json:
        note(f"next cursor: {cursor}")
    else:
        show(f"[dim]more: pass[/dim] --cursor {cursor}")


@store_app.command()
def stats(store: StoreUrl = DEFAULT_STORE_URL, token: Token = None, as_json: AsJson = False) -> None:
    """Counts of rollouts and attempts by status, queue depth, spans, workers."""
    with reported_errors():
        result = query_store(store, token, lambda s: s.stats())
        if as_json:
            typer.echo(json_line(result))
        else:
            show(stats_view(result, store))


@store_app.command()
def rollouts(
    status: Annotated[
        list[RolloutStatus] | None,
        typer.Option("--status", "-s", help="Only rollouts in this status (repeat for several)."),
    ] = None,
    mode: Annotated[RolloutMode | None, typer.Option("--mode", "-m", help="Only rollouts of this mode.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=10_000, help="Rollouts per page.")] = 50,
    sort_by: Annotated[SortKey, typer.Option("--sort-by", help="Field to sort by.")] = DEFAULT_SORT,
    desc: Annotated[bool, typer.Option("--desc", help="Sort in descending order.")] = False,
    cursor: Cursor = None,
    store: StoreUrl = DEFAULT_STORE_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """List rollouts, one page at a time (oldest first unless --desc)."""
    with reported_errors():
        page = query_store(
            store,
            token,
            lambda s: s.query_rollouts(
                status=status or None,
                mode=mode,
                sort_by=sort_by.value,
                descending=desc,
                limit=limit,
                cursor=cursor,
            ),
        )
        if as_json:
            emit_json_lines(page.items)
        elif page.items:
            show(rollouts_table(page.items, time.time()))
        else:
            show("[dim]no rollouts match[/dim]")
        _next_page(page.next_cursor, as_json)


@store_app.command()
def rollout(
    rollout_id: Annotated[str, typer.Argument(help="The rollout to show.", show_default=False)],
    store: StoreUrl = DEFAULT_STORE_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """One rollout with all its attempts."""

    async def load(s: Store) -> tuple[Rollout, list[Attempt]]:
        return await s.get_rollout(rollout_id), await s.query_attempts(rollout_id)

    with reported_errors():
        found, attempts = query_store(store, token, load)
        if as_json:
            doc = {"rollout": found.model_dump(mode="json"), "attempts": [a.model_dump(mode="json") for a in attempts]}
            typer.echo(json_line(doc))
        else:
            show(rollout_view(found, attempts, time.time()))


@store_app.command()
def spans(
    rollout_id: Annotated[str, typer.Argument(help="The rollout whose spans to list.", show_default=False)],
    attempt: Annotated[
        str | None,
        typer.Option("--attempt", "-a", help="Only this attempt id, or 'latest'. Default: every attempt."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=10_000, help="Spans per page.")] = 200,
    cursor: Cursor = None,
    store: StoreUrl = DEFAULT_STORE_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """The spans of a rollout, by attempt then sequence id (``#`` is attempt.sequence)."""

    async def load(s: Store) -> tuple[Page[Span], dict[str, int]]:
        page = await s.query_spans(rollout_id, attempt, limit=limit, cursor=cursor)
        numbers = {} if as_json else {a.attempt_id: a.sequence_id for a in await s.query_attempts(rollout_id)}
        return page, numbers

    with reported_errors():
        page, numbers = query_store(store, token, load)
        if as_json:
            emit_json_lines(page.items)
        elif page.items:
            show(spans_table(page.items, numbers))
        else:
            show("[dim]no spans[/dim]")
        _next_page(page.next_cursor, as_json)


@store_app.command()
def resources(
    version: Annotated[
        int | None, typer.Option("--version", min=1, help="Show this version in full. Default: list versions.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=10_000, help="Versions per page.")] = 20,
    cursor: Cursor = None,
    show_secrets: Annotated[bool, typer.Option("--show-secrets", help="Print API keys instead of ***.")] = False,
    store: StoreUrl = DEFAULT_STORE_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Published resources versions (newest first), or one version in full."""
    with reported_errors():
        if version is not None:
            one: Resources = query_store(store, token, lambda s: s.get_resources(version))
            if as_json:
                typer.echo(json_line(masked_resources(one, show_secrets)))
            else:
                show(resources_view(one, show_secrets))
            return
        page = query_store(store, token, lambda s: s.query_resources(limit=limit, cursor=cursor))
        if as_json:
            emit_json_lines(masked_resources(r, show_secrets) for r in page.items)
        elif page.items:
            show(resources_table(page.items))
        else:
            show("[dim]no resources published yet[/dim]")
        _next_page(page.next_cursor, as_json)


@store_app.command()
def workers(store: StoreUrl = DEFAULT_STORE_URL, token: Token = None, as_json: AsJson = False) -> None:
    """Workers known to the store and what each is doing."""
    with reported_errors():
        found = query_store(store, token, lambda s: s.query_workers())
        if as_json:
            emit_json_lines(found)
        elif found:
            show(workers_table(found, time.time()))
        else:
            show("[dim]no workers have registered[/dim]")


async def _last_metrics(store: Store, run_id: str, last: int) -> list[MetricRecord]:
    """The last ``last`` steps of a run: pages through in step order, keeping the tail."""
    tail: deque[MetricRecord] = deque(maxlen=last)
    after: int | None = None
    while True:
        page = await store.query_metrics(run_id, after_step=after, limit=10_000)
        tail.extend(page)
        if len(page) < 10_000:
            return list(tail)
        after = page[-1].step


@store_app.command()
def metrics(
    run_id: Annotated[
        str | None,
        typer.Argument(help="The training run. Default: list the runs that logged metrics.", show_default=False),
    ] = None,
    last: Annotated[int, typer.Option("--last", "-n", min=1, max=100_000, help="Show the last N steps.")] = 20,
    key: Annotated[
        list[str] | None,
        typer.Option("--key", "-k", help="Only this metric (repeat for several). Default: all."),
    ] = None,
    store: StoreUrl = DEFAULT_STORE_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Training metrics of a run, one row per step (the last --last steps), or the runs."""
    with reported_errors():
        if run_id is None:
            runs = query_store(store, token, lambda s: s.metric_runs())
            if as_json:
                emit_json_lines({"run_id": r} for r in runs)
            elif runs:
                show(escape("\n".join(runs)))
            else:
                show("[dim]no run has logged metrics yet[/dim]")
            return
        records = query_store(store, token, lambda s: _last_metrics(s, run_id, last))
        if key:
            records = [r.model_copy(update={"values": {k: r.values.get(k) for k in key}}) for r in records]
        if as_json:
            emit_json_lines(records)
        elif records:
            show(metrics_table(records, key, time.time()))
        else:
            show(f"[dim]no metrics for run {escape(repr(run_id))} (list runs: agentbolt store metrics)[/dim]")


# ---------------------------------------------------------------------- retention
class ExportFormatChoice(StrEnum):
    jsonl = "jsonl"
    parquet = "parquet"


class SamplesChoice(StrEnum):
    chat = "chat"
    triplets = "triplets"
    rl = "rl"
    none = "none"


def _when(text: str, option: str) -> float:
    """A time typed on the command line: ISO 8601, epoch seconds, or a duration (``7d``) meaning that long ago."""
    try:
        return parse_time(text)
    except InvalidTimeError as time_err:
        try:
            return time.time() - parse_duration(text)
        except InvalidTimeError:
            raise CliFailure(
                f"{option} {text!r}: {time_err} — or a duration back from now, like 7d or 12h"
            ) from None


@contextlib.contextmanager
def _retention_errors() -> Iterator[None]:
    """Bad input of the retention commands as one-line usage errors."""
    try:
        yield
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'selection'}: {e['msg']}" for e in err.errors())
        raise CliFailure(problems) from None
    except RetentionError as err:
        raise CliFailure(str(err)) from None


@store_app.command("export")
def export_cmd(
    out_dir: Annotated[Path, typer.Argument(help="Folder to write (created; must be empty).", show_default=False)],
    format: Annotated[ExportFormatChoice, typer.Option("--format", "-f", help="File format.")] = (
        ExportFormatChoice.jsonl),
    since: Annotated[
        str | None, typer.Option("--since", help="Rollouts created at/after: ISO time, epoch seconds, or 7d (ago).")
    ] = None,
    until: Annotated[str | None, typer.Option("--until", help="Rollouts created before (same forms).")] = None,
    status: Annotated[
        list[RolloutStatus] | None, typer.Option("--status", "-s", help="Only this status (repeat for several).")
    ] = None,
    mode: Annotated[RolloutMode | None, typer.Option("--mode", "-m", help="Only rollouts of this mode.")] = None,
    min_version: Annotated[
        int | None, typer.Option("--min-resources-version", min=1, help="Rollouts run with this version or later.")
    ] = None,
    max_version: Annotated[
        int | None, typer.Option("--max-resources-version", min=1, help="Rollouts run with this version or earlier.")
    ] = None,
    rollout_id: Annotated[
        list[str] | None, typer.Option("--rollout-id", help="Only this rollout (repeat for several).")
    ] = None,
    metrics_run: Annotated[
        list[str] | None, typer.Option("--metrics-run", help="Export this run's training metrics (repeatable).")
    ] = None,
    samples: Annotated[
        SamplesChoice, typer.Option("--samples", help="Training samples of finished rollouts: chat records, triplets, "
                                    "or rl (what GRPO trains on).")
    ] = SamplesChoice.chat,
    gzip: Annotated[bool, typer.Option("--gzip", help="Compress JSONL files (.jsonl.gz).")] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace a previous export in OUT_DIR.")] = False,
    store: StoreUrl = DEFAULT_STORE_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Export rollouts, attempts, spans, training samples and metrics to JSONL or Parquet files."""
    with reported_errors(), _retention_errors():
        selection = ExportSelection(
            since=None if since is None else _when(since, "--since"),
            until=None if until is None else _when(until, "--until"),
            status=status or None,
            mode=mode,
            min_resources_version=min_version,
            max_resources_version=max_version,
            rollout_ids=rollout_id or None,
            metric_runs=metrics_run or [],
        )
        if gzip and format == ExportFormatChoice.parquet:
            raise CliFailure("--gzip applies to --format jsonl only (Parquet files are compressed already)")
        check_format(format.value)
        manifest = query_store(
            store,
            token,
            lambda s: export_run(
                s,
                out_dir,
                selection,
                format=format.value,
                samples=samples.value,
                gzip=gzip,
                overwrite=overwrite,
                progress=not as_json,
            ),
        )
        if as_json:
            typer.echo(json_line(manifest))
            return
        counts = ", ".join(f"{n} {table}" for table, n in manifest.counts.items())
        show(f"exported {escape(counts)} to {escape(str(out_dir))} in {manifest.seconds:.1f} s")


def _confirmed(question: str) -> bool:
    """Ask on the terminal; no answer (end of input, as in cron) is a no."""
    try:
        return typer.confirm(question, default=False, err=True)
    except typer.Abort:
        typer.echo("", err=True)
        return False


@store_app.command("prune-spans")
def prune_spans_cmd(
    older_than: Annotated[
        str | None, typer.Option("--older-than", help="Rollouts that finished longer ago than this: 30d, 12h...")
    ] = None,
    before: Annotated[
        str | None, typer.Option("--before", help="Rollouts that finished before this ISO time or epoch seconds.")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count the spans that would go; delete nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    vacuum: Annotated[
        bool, typer.Option("--vacuum", help="SQLite: shrink the file afterwards (VACUUM; holds the write lock).")
    ] = False,
    store: StoreUrl = DEFAULT_STORE_URL,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Delete the spans of rollouts that finished before a time (rollouts and rewards stay)."""
    with reported_errors(), _retention_errors():
        if (older_than is None) == (before is None):
            raise CliFailure("give one of --older-than (like 30d) and --before (an ISO time or epoch seconds)")
        if older_than is not None:
            cut = time.time() - parse_duration(older_than)
        else:
            assert before is not None
            cut = parse_time(before)
        where = f"rollouts finished before {format_time(cut)}"
        count = query_store(store, token, lambda s: prune_spans(s, before=cut, dry_run=True)).deleted
        if dry_run or count == 0:
            result = PruneResult(before=cut, before_iso=format_time(cut), deleted=count, dry_run=True, vacuumed=False)
            if as_json:
                typer.echo(json_line(result))
            else:
                nothing = f"no spans of {where}: nothing to delete"
                show(f"{count} spans of {where} would be deleted" if count else nothing)
            return
        if not yes and not _confirmed(f"Delete {count} spans of {where}?"):
            raise CliFailure("nothing deleted (pass --yes to skip this question in scripts)")
        result = query_store(store, token, lambda s: prune_spans(s, before=cut, vacuum=vacuum))
        if as_json:
            typer.echo(json_line(result))
        else:
            show(f"deleted {result.deleted} spans of {where}" + (" and vacuumed the file" if result.vacuumed else ""))
