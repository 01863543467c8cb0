"""Rows as Arrow tables typed like the ClickHouse tables they are inserted into.

Spans (:class:`SpanRow`) and request rows (dicts keyed by :data:`REQUEST_COLUMNS`) become columns
in C (``attrgetter``/``itemgetter`` then ``zip``) and pyarrow builds each column in C, so an insert
costs no per-value Python work. It imports pyarrow and the records only: the row-building worker
process lays its rows out here (:func:`build_rows_as_table`) and hands the collector a table ready
to insert.
"""

from __future__ import annotations

import itertools
import operator
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pyarrow as pa

from latencylens_collector.analysis.costs import Prices
from latencylens_collector.analysis.records import REQUEST_COLUMNS, SPAN_COLUMNS, SpanEvent, SpanRow
from latencylens_collector.analysis.row_work import BuiltRows, ReadBack, TraceToBuild, build_rows


def spans_table(rows: Sequence[SpanRow]) -> pa.Table:
    """The rows as an Arrow table with :data:`SPAN_COLUMNS`, typed like the ``spans`` table.

    The rows are turned into columns in C (``attrgetter`` then ``zip``) and pyarrow builds each
    column in C (maps from the dicts as they are), so an insert costs no per-value Python work."""
    columns = list(zip(*map(_SPAN_FIELDS, rows), strict=True)) or [()] * len(SPAN_COLUMNS)
    arrays = [_column(values, kind) for values, kind in zip(columns, _SPAN_TYPES, strict=True)]
    return pa.Table.from_arrays(arrays, names=list(SPAN_COLUMNS))


def _column(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    if kind is _MAP:
        return _map_array(values)
    if kind is _EVENTS:
        return _events_array(values)
    return pa.array(values, kind)


def _events_array(per_row: Sequence[Sequence[SpanEvent]]) -> pa.ListArray:
    """The ``events`` column from flat names, times and attribute maps plus offsets (most spans
    have none, so a batch usually costs one offsets array)."""
    offsets = pa.array([0, *itertools.accumulate(map(len, per_row))], pa.int32())
    flat = list(itertools.chain.from_iterable(per_row))
    names, times, attributes = zip(*flat, strict=True) if flat else ((), (), ())
    items = pa.StructArray.from_arrays(
        [pa.array(names, _STRING), pa.array(times, _TIME_NS), _map_array(attributes)],
        fields=list(_EVENT),
    )
    return pa.ListArray.from_arrays(offsets, items, type=_EVENTS)


def _map_array(dicts: Sequence[dict[str, str]]) -> pa.MapArray:
    """A map column from its flat keys, values and offsets (half the cost of converting dicts)."""
    offsets = pa.array([0, *itertools.accumulate(map(len, dicts))], pa.int32())
    keys = pa.array(list(itertools.chain.from_iterable(dicts)), _STRING)
    values = pa.array(list(itertools.chain.from_iterable(map(dict.values, dicts))), _STRING)
    return pa.MapArray.from_arrays(offsets, keys, values, type=_MAP)


_ROW_FIELD: Final = {"start_time": "start_ns"}
"""SpanRow field of a ``spans`` column, where the names differ."""


def requests_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Request rows (dicts keyed by :data:`REQUEST_COLUMNS`) as an Arrow table typed like the
    ``requests`` table; ``start_time`` in ns, ``computed_at`` in µs, as the row dicts hold them."""
    columns = list(zip(*map(_REQUEST_ITEMS, rows), strict=True)) or [()] * len(REQUEST_COLUMNS)
    arrays = [
        _map_array(values) if kind is _MAP else pa.array(values, kind)
        for values, kind in zip(columns, _REQUEST_TYPES, strict=True)
    ]
    return pa.Table.from_arrays(arrays, names=list(REQUEST_COLUMNS))


_STRING: Final = pa.string()
_TRACE_ID: Final = pa.binary(16)
_SPAN_ID: Final = pa.binary(8)
_TIME_NS: Final = pa.timestamp("ns", tz="UTC")
_MAP: Final = pa.map_(pa.string(), pa.string())
_EVENT: Final = pa.struct([("name", _STRING), ("time", _TIME_NS), ("attributes", _MAP)])
_EVENTS: Final = pa.list_(_EVENT)
_SPAN_FIELDS: Final = operator.attrgetter(*(_ROW_FIELD.get(column, column) for column in SPAN_COLUMNS))
_REQUEST_ITEMS: Final = operator.itemgetter(*REQUEST_COLUMNS)
_REQUEST_TYPE_OF: Final[dict[str, pa.DataType]] = {
    "trace_id": _TRACE_ID,
    "start_time": _TIME_NS,
    "status_error": pa.uint8(),
    "provenance": _MAP,
    "inconsistent": pa.uint8(),
    "tokens_estimated": pa.uint8(),
    "decode_tokens_per_second": pa.float64(),
    "model_calls": pa.uint16(),
    "span_count": pa.uint32(),
    "computed_at": pa.timestamp("us"),
    "version": pa.uint64(),
    "is_deleted": pa.uint8(),
    "root_missing": pa.uint8(),
    **dict.fromkeys(("project", "service", "name", "model", "provider", "price_version"), _STRING),
}
_REQUEST_TYPES: Final = tuple(_REQUEST_TYPE_OF.get(column, pa.int64()) for column in REQUEST_COLUMNS)
"""Every other column is an integer count of ns or tokens (``Int64``, some Nullable)."""
_SPAN_TYPES: Final = (
    _STRING,  # project
    _TRACE_ID,
    _SPAN_ID,
    _SPAN_ID,  # parent_span_id
    _STRING,  # service
    _STRING,  # name
    _STRING,  # span_kind
    _STRING,  # kind
    _TIME_NS,  # start_time
    pa.int64(),  # duration_ns
    pa.uint8(),  # status_code
    _STRING,  # status_message
    _MAP,  # attributes
    _MAP,  # resource_attributes
    _EVENTS,  # events
    pa.uint32(),  # dropped_events_count
)


def build_rows_as_table(traces: Sequence[TraceToBuild] | ReadBack, prices: Prices | None = None) -> BuiltRows:
    """:func:`~latencylens_collector.analysis.row_work.build_rows`, its rows then laid out as the
    ``requests`` table (:func:`requests_table`), the layout's time counted in the build's. What the
    worker process runs: a table crosses back to the collector as a few buffers (≈ 0.6 ms to load
    for 1,600 rows), where the rows' dicts took ≈ 12 ms to unpickle and 10 ms more to lay out,
    both under the collector's GIL."""
    built = build_rows(traces, prices)
    started = time.process_time()
    table = requests_table(built.rows)
    return built._replace(rows=table, cpu_s=built.cpu_s + time.process_time() - started)


__all__ = ["build_rows_as_table", "requests_table", "spans_table"]
