"""The request rows of many traces in one call: the unit of work a row-building process is handed.

It imports nothing but the analysis (no storage, no service), so a worker process that runs it
(through :mod:`~latencylens_collector.storage.arrow_tables`, which adds pyarrow to lay the rows
out) starts in a fraction of a second and stays small. It returns the CPU time it took, so the caller
can charge that time to the traces' projects even when it was spent in another process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from latencylens_collector.analysis.costs import Prices
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.request_rows import row_version, trace_rows

if TYPE_CHECKING:
    import pyarrow as pa


class TraceToBuild(NamedTuple):
    """One trace's spans, the latest insert stamp they were seen with, and where rows of it may be
    stored already (each gets a tombstone)."""

    spans: Sequence[SpanRow]
    last_insert_us: int
    stored_starts: Sequence[int] = ()
    settled: bool = False
    """The reconciler's: the trace has settled (its row may be rooted at its top-most span)."""


READ_BACK_COLUMNS: Final = (
    "trace_hex",
    "span_hex",
    "parent_hex",
    "service",
    "name",
    "span_kind",
    "kind",
    "start_ns",
    "duration_ns",
    "status_code",
    "attributes",
    "inserted_us",
)
"""The columns of a :class:`ReadBack`, in order (the read's SELECT is made from them,
:mod:`~latencylens_collector.storage.trace_state`): a span's ids in hex, then :class:`SpanRow`'s
fields up to ``attributes`` (without ``status_message``: attribution never reads it), then the
span's insert stamp in µs."""


UNCAPPED: Final = 2**64 - 1
"""A ``most_spans`` that caps no trace (the largest a UInt64 holds)."""


class ReadPart(NamedTuple):
    """One project's traces, read back (:class:`ReadBack`)."""

    project: str
    columns_json: bytes
    """``JSONCompactColumns`` of :data:`READ_BACK_COLUMNS`, in start order."""
    most_spans: int = UNCAPPED
    """A trace with more spans than this is past its cap: the read gave only some of its spans
    (``most_spans + 1``), and it is left out."""


class ReadBack(NamedTuple):
    """Stored spans of traces as ClickHouse wrote them out, per project, turned into
    :class:`TraceToBuild` only where the rows are built. The engine path's writer hands these to
    the worker process: bytes cross at no pickling cost, and parsing them (≈ 5 µs a span in C, then
    a :class:`SpanRow` each) holds the worker's GIL, not the collector's."""

    parts: tuple[ReadPart, ...]
    spans: int
    """A lower bound of the spans read (those the batch brought): whether a build is worth the
    worker's trip."""

    def traces(self) -> list[TraceToBuild]:
        """Each trace's spans in start order, with the latest insert stamp among them; the traces
        of a project in id order (hex digits sort as the bytes do). Traces past their cap are
        left out (:meth:`parsed`)."""
        return self.parsed()[0]

    def parsed(self) -> tuple[list[TraceToBuild], list[tuple[str, bytes]]]:
        """:meth:`traces`, and the (project, trace id) of each trace left out as past its cap."""
        traces: list[TraceToBuild] = []
        past_cap: list[tuple[str, bytes]] = []
        for project, columns_json, most_spans in self.parts:
            columns = json.loads(columns_json)
            if not columns or not columns[0]:
                continue
            *fields, inserted = columns
            trace_hex, span_hex, parent_hex, *rest = fields
            spans: dict[str, list[SpanRow]] = {}
            latest: dict[str, int] = {}
            fromhex = bytes.fromhex
            for trace, span, parent, values, inserted_us in zip(
                trace_hex, span_hex, parent_hex, zip(*rest, strict=True), inserted, strict=True
            ):
                service, name, span_kind, kind, start_ns, duration_ns, status_code, attributes = values
                row = SpanRow(
                    fromhex(trace),
                    fromhex(span),
                    fromhex(parent),
                    service,
                    name,
                    span_kind,
                    kind,
                    start_ns,
                    duration_ns,
                    status_code,
                    "",
                    attributes,
                    project=project,
                )
                # get, not setdefault: setdefault makes an empty list for every span (≈ 15 % of this loop)
                found = spans.get(trace)
                if found is None:
                    spans[trace] = [row]
                    latest[trace] = inserted_us
                else:
                    found.append(row)
                    if inserted_us > latest[trace]:
                        latest[trace] = inserted_us
            for trace in sorted(spans):
                if len(spans[trace]) > most_spans:
                    past_cap.append((project, fromhex(trace)))
                else:
                    traces.append(TraceToBuild(spans[trace], latest[trace]))
        return traces, past_cap


class BuiltRows(NamedTuple):
    rows: list[dict[str, Any]] | pa.Table
    """Rows and tombstones: dicts keyed by ``REQUEST_COLUMNS``, or, from the worker process, the
    same laid out as the ``requests`` table (``storage.arrow_tables.build_rows_as_table``). Either
    is what ``Store.upsert_requests`` inserts."""
    cpu_s: float
    """CPU time of the process that built them, spent building them."""
    spans: int = 0
    """The spans they were built from."""
    live: int = 0
    """The rows that are not tombstones."""
    past_cap: tuple[tuple[str, bytes], ...] = ()
    """(project, trace id) of each trace read back and left out as past its cap (no row)."""


def build_rows(traces: Sequence[TraceToBuild] | ReadBack, prices: Prices | None = None) -> BuiltRows:
    """Rows and tombstones of each trace, versioned by its spans and the latest stamp seen, priced
    at ``prices`` (default: this process's configured prices; a worker process is passed the
    collector's). A :class:`ReadBack` is parsed here, its time counted in the build's."""
    started = time.process_time()
    past_cap: list[tuple[str, bytes]] = []
    if isinstance(traces, ReadBack):
        traces, past_cap = traces.parsed()
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
    spans = sum(len(trace.spans) for trace in traces)
    live = sum(1 for row in rows if not row["is_deleted"])
    return BuiltRows(rows, time.process_time() - started, spans, live, tuple(past_cap))


def span_count(traces: Sequence[TraceToBuild] | ReadBack) -> int:
    """How many spans a build starts from (for a :class:`ReadBack`, its lower bound)."""
    if isinstance(traces, ReadBack):
        return traces.spans
    return sum(len(trace.spans) for trace in traces)


RowBuild = Callable[[Sequence[TraceToBuild]], BuiltRows]
"""Builds the rows of traces: :func:`build_rows` itself, or the same in a worker process
(:class:`~latencylens_collector.pipeline.row_processes.RowProcess`)."""
