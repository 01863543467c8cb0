"""The request rows of many traces in one call: the unit of work a row-building process is handed.

It imports nothing but the analysis (no storage, no service), so a worker process that runs it
starts in a fraction of a second and stays small. It returns the CPU time it took, so the caller
can charge that time to the traces' projects even when it was spent in another process.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from latencylens_collector.analysis.costs import Prices
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.request_rows import row_version, trace_rows


class TraceToBuild(NamedTuple):
    """One trace's spans, the latest insert stamp they were seen with, and where rows of it may be
    stored already (each gets a tombstone)."""

    spans: Sequence[SpanRow]
    last_insert_us: int
    stored_starts: Sequence[int] = ()
    settled: bool = False
    """The reconciler's: the trace has settled (its row may be rooted at its top-most span)."""


class BuiltRows(NamedTuple):
    rows: list[dict[str, Any]]
    cpu_s: float
    """CPU time of the process that built them, spent building them."""


def build_rows(traces: Sequence[TraceToBuild], prices: Prices | None = None) -> BuiltRows:
    """Rows and tombstones of each trace, versioned by its spans and the latest stamp seen, priced
    at ``prices`` (default: this process's configured prices; a worker process is passed the
    collector's)."""
    started = time.process_time()
    rows: list[dict[str, Any]] = []
    for trace in traces:
        version = row_version(len(trace.spans), trace.last_insert_us)
        rows.extend(
            trace_rows(
                trace.spans,
                version=version,
                computed_at_us=trace.last_insert_us,
                settled=trace.settled,
                stored_starts=trace.stored_starts,
                prices=prices,
            )
        )
    return BuiltRows(rows, time.process_time() - started)


RowBuild = Callable[[Sequence[TraceToBuild]], BuiltRows]
"""Builds the rows of traces: :func:`build_rows` itself, or the same in a worker process
(:class:`~latencylens_collector.pipeline.row_processes.RowProcess`)."""
