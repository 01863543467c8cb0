"""``latencylens spool status|replay``: what the disk spool holds, and sending it to ClickHouse again.

Both read the spool directory itself (an operator's tool on the collector's machine), whether or not
a collector runs. ``replay`` moves the batches ClickHouse refused back into the replay order: a
running collector (it holds the spool's lock) replays them within seconds; with none running the
command replays the whole spool itself into the configured ClickHouse.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.cli.errors import FAILED, OK
from latencylens_collector.cli.output import Column, Table, error_line, one_line, pairs, render, show, utc
from latencylens_collector.cli.output import show_json as print_json
from latencylens_collector.pipeline.spool import (
    SpoolCounts,
    count_files,
    failed_batches,
    is_locked,
    requeue_failed,
)
from latencylens_collector.settings import Settings, env_var

EXAMPLE_CHARS: Final = 300
"""ClickHouse's text of a refusal is shown cut to this many characters (the file has it whole)."""
POLL_S: Final = 0.2


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    spool = sub.add_parser(
        "spool",
        help="show or replay the batches waiting in the disk spool",
        description="Acknowledged spans ClickHouse does not have yet wait in the spool directory: "
        "pending batches (ClickHouse unreachable or turning writes away for now) and spans it refused "
        "for good (kept in failed/ with ClickHouse's reason).",
    )
    actions = spool.add_subparsers(dest="spool_command", metavar="ACTION", required=True)
    status = actions.add_parser(
        "status", help="pending and refused spans, with the reasons", description="What the spool holds."
    )
    replay = actions.add_parser(
        "replay",
        help="send refused spans to ClickHouse again (after fixing the cause)",
        description="Move the refused batches back into the replay order. A running collector replays "
        "them within seconds; with none running, this command replays the whole spool itself.",
    )
    replay.add_argument(
        "--wait",
        type=float,
        default=30.0,
        help="with a collector running, seconds to wait for it to replay them (default 30; 0: do not wait)",
    )
    for parser in (status, replay):
        parser.add_argument(
            "--spool-dir", help=f"spool directory (env {env_var('spool_dir')}; default: the collector's)"
        )
        parser.add_argument("--dsn", help=f"ClickHouse DSN (env {env_var('clickhouse_dsn')})")
        parser.add_argument("--database", help=f"ClickHouse database (env {env_var('database')})")
        parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    status.set_defaults(handler=_status)
    replay.set_defaults(handler=_replay)


def _settings(args: argparse.Namespace) -> Settings:
    return Settings(clickhouse_dsn=args.dsn, database=args.database, spool_dir=args.spool_dir)


def _directory(settings: Settings) -> Path | None:
    if settings.spool_dir is None:
        show(error_line(f"the spool is turned off ({env_var('spool_dir')}=off)"), sys.stderr)
        return None
    if not settings.spool_dir.is_dir():
        show(error_line(f"no spool at {settings.spool_dir}"), sys.stderr)
        return None
    return settings.spool_dir


def _status(args: argparse.Namespace) -> int:
    settings = _settings(args)
    directory = _directory(settings)
    if directory is None:
        return FAILED
    counts = count_files(directory)
    failed = failed_batches(directory)
    running = is_locked(directory)
    if args.json:
        print_json(
            {
                "directory": str(directory),
                "collector_running": running,
                **_counts_json(counts),
                "max_bytes": settings.max_spool_bytes or None,
                "failed": [
                    {
                        "file": batch.name,
                        "spans": batch.spans,
                        "reasons": batch.reasons,
                        "refused_at": utc(batch.refused_at_ns) if batch.refused_at_ns else None,
                        "example": batch.example,
                    }
                    for batch in failed
                ],
            }
        )
        return OK
    show(_summary(directory, counts, running, settings.max_spool_bytes))
    if failed:
        table = Table(
            "Spans ClickHouse refused (kept in failed/; 'latencylens spool replay' sends them again)",
            [
                Column("file"),
                Column("spans", numeric=True),
                Column("reasons", wraps=True),
                Column("refused at"),
            ],
        )
        for batch in failed:
            reasons = ", ".join(f"{name} ×{count}" for name, count in sorted(batch.reasons.items()))
            table.add(
                batch.name, batch.spans, reasons, utc(batch.refused_at_ns) if batch.refused_at_ns else "-"
            )
        examples = [batch.example for batch in failed if batch.example]
        if examples:
            table.notes = [f"ClickHouse said: {one_line(examples[0])[:EXAMPLE_CHARS]}"]
        show("")
        show(render(table))
    return OK


def _replay(args: argparse.Namespace) -> int:
    settings = _settings(args)
    directory = _directory(settings)
    if directory is None:
        return FAILED
    if is_locked(directory):
        return _replay_by_collector(directory, args)
    return _replay_here(settings, directory, args)


def _replay_by_collector(directory: Path, args: argparse.Namespace) -> int:
    """A collector holds the spool: hand the refused batches back to it and watch them go."""
    moved = sorted(path.name for path in (directory / "failed").glob("*.spool"))
    batches, spans = requeue_failed(directory)
    deadline = time.monotonic() + max(0.0, args.wait)
    while args.wait > 0 and time.monotonic() < deadline:
        if not any((directory / name).exists() for name in moved):
            break
        time.sleep(POLL_S)
    left = [name for name in moved if (directory / name).exists()]
    counts = count_files(directory)
    if args.json:
        print_json(
            {"moved_batches": batches, "moved_spans": spans, "waiting": len(left), **_counts_json(counts)}
        )
    else:
        show(f"moved {batches} batches ({spans} spans) back for the running collector to replay")
        if left:
            show(f"{len(left)} of them not replayed yet; see 'latencylens spool status'")
        show(_summary(directory, counts, True, None))
    return FAILED if counts.failed_spans or left else OK


def _replay_here(settings: Settings, directory: Path, args: argparse.Namespace) -> int:
    """No collector runs: replay everything into ClickHouse from this process."""
    from latencylens_collector.analysis.costs import use_prices
    from latencylens_collector.pipeline.ingest import Ingestor
    from latencylens_collector.pipeline.replay import replay_spool
    from latencylens_collector.pipeline.spool import Spool, SpoolError
    from latencylens_collector.storage.store import Store

    spool = Spool(directory, settings.max_spool_bytes)
    try:
        spool.open()  # takes the lock and moves failed batches back
    except SpoolError as exc:
        show(error_line(str(exc)), sys.stderr)
        return FAILED
    store = Store(settings)
    use_prices(settings.prices)  # rows are priced as the collector would price them
    ingestor = Ingestor(store)

    def write(spans: Sequence[SpanRow], token: str) -> None:
        ingestor.ingest(spans, dedup_token=token)

    try:
        report = replay_spool(spool, write)
        counts = spool.refresh()
    finally:
        spool.close()
        store.close()
    refused = sum(report.refused.values())
    if args.json:
        print_json(
            {
                "stored_spans": report.stored,
                "batches": report.batches,
                "refused": dict(report.refused),
                "stopped_by": report.stopped.name if report.stopped else None,
                **_counts_json(counts),
            }
        )
    else:
        show(f"stored {report.stored} spans of {report.batches} batches")
        if refused:
            reasons = ", ".join(f"{name} ×{count}" for name, count in sorted(report.refused.items()))
            show(f"ClickHouse refused {refused} spans again ({reasons}); kept in failed/")
        if report.stopped is not None:
            show(
                f"stopped: ClickHouse turns writes away for now ({report.stopped.name}): "
                f"{one_line(report.stopped.message)[:EXAMPLE_CHARS]}"
            )
        show(_summary(directory, counts, False, settings.max_spool_bytes))
    return FAILED if refused or report.stopped is not None else OK


def _counts_json(counts: SpoolCounts) -> dict[str, Any]:
    return {
        "pending_batches": counts.pending_batches,
        "pending_spans": counts.pending_spans,
        "failed_batches": counts.failed_batches,
        "failed_spans": counts.failed_spans,
        "bytes": counts.bytes,
    }


def _summary(directory: Path, counts: SpoolCounts, running: bool, max_bytes: int | None) -> str:
    size = _bytes(counts.bytes) + (f" of {_bytes(max_bytes)}" if max_bytes else "")
    return pairs(
        f"Spool {directory}",
        [
            ("collector", "running (holds the spool)" if running else "not running"),
            ("pending", f"{counts.pending_batches} batches, {counts.pending_spans} spans"),
            ("refused", f"{counts.failed_batches} batches, {counts.failed_spans} spans"),
            ("size", size),
        ],
    )


def _bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"
