"""What the store holds of a trace, for making its request row converge: how many spans and how
recently stamped, its spans with those stamps, its live request rows, and which traces were touched.

Stamps are ClickHouse's own (``spans.inserted_at``, ``DEFAULT now64(6)``), so versions computed
from them never depend on a collector's clock. Every read here is one query.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.storage.store import Store


@dataclass(frozen=True)
class Stamp:
    """What is stored of one trace's spans, read from key columns only."""

    stored: int
    """Span rows, copies not yet merged counted too."""
    spans: int
    """Distinct span ids."""
    last_insert_us: int
    """The latest insert of any of its spans, on the store's clock (µs)."""
    first_start_ns: int = 0
    last_start_ns: int = 0
    """The earliest and latest span start: every row of the trace is keyed by one of them or between."""


@dataclass(frozen=True)
class StoredTrace:
    """Every stored span of one trace (deduplicated) and the latest insert stamp among them."""

    spans: list[SpanRow]
    last_insert_us: int


@dataclass(frozen=True)
class Touched:
    """A trace whose spans were inserted, and when last (store clock, µs)."""

    project: str
    trace_id: bytes
    touched_us: int


_STAMPS: Final = """
SELECT trace_id, count() AS stored, uniqExact(span_id) AS spans,
       toUnixTimestamp64Micro(max(inserted_at)) AS last_insert_us,
       toUnixTimestamp64Nano(min(start_time)) AS first_start_ns,
       toUnixTimestamp64Nano(max(start_time)) AS last_start_ns
FROM {spans}
WHERE project = {{project:String}} AND trace_id IN {{trace_ids:Array(FixedString(16))}}
GROUP BY trace_id
"""
"""No FINAL: the key columns, the stamp and the start are all it reads. The latest stamp is the same with or
without FINAL (FINAL keeps each span's latest copy)."""

_STORED_SPANS: Final = """
SELECT project, trace_id, span_id, parent_span_id, service, name, span_kind, kind,
       toUnixTimestamp64Nano(start_time) AS start_ns, duration_ns, status_code, attributes,
       toUnixTimestamp64Micro(inserted_at) AS inserted_us
FROM {spans} FINAL
WHERE project = {{project:String}} AND trace_id IN {{trace_ids:Array(FixedString(16))}}
ORDER BY start_ns, span_id
"""
"""The columns request rows are built from (not ``resource_attributes``, ``status_message`` nor
``events``: attribution never reads them) and each span's stamp, in one read, so a row's version
describes exactly the spans it was computed from."""

_LIVE_ROWS: Final = """
SELECT trace_id, toUnixTimestamp64Nano(start_time) AS start_ns, version
FROM {requests} FINAL
WHERE project = {{project:String}} AND trace_id IN {{trace_ids:Array(FixedString(16))}}
  AND start_time >= fromUnixTimestamp64Nano({{since:Int64}}, 'UTC')
  AND start_time <= fromUnixTimestamp64Nano({{until:Int64}}, 'UTC')
"""
"""Tombstones are hidden by FINAL (``ReplacingMergeTree(version, is_deleted)``). A trace's rows
all start at one of its spans' starts, so [earliest, latest span start] bounds the key range."""

_TOUCHED: Final = """
SELECT project, trace_id, toUnixTimestamp64Micro(max(last_insert)) AS touched_us
FROM {touched}
WHERE minute >= toStartOfMinute(fromUnixTimestamp64Micro({{after:Int64}}, 'UTC'))
GROUP BY project, trace_id
HAVING touched_us > {{after:Int64}} AND touched_us <= {{until:Int64}}
   AND (touched_us, project, trace_id)
       > ({{key_us:Int64}}, {{key_project:String}}, {{key_trace:FixedString(16)}})
ORDER BY touched_us, project, trace_id
LIMIT {{limit:UInt32}}
"""
"""Traces whose latest insert lies in (after, until], oldest first, one page after the key given.
A trace inserted again after ``until`` is left for a later window (it has not settled)."""


def stamps(store: Store, trace_ids: Iterable[bytes], project: str) -> dict[bytes, Stamp]:
    """:class:`Stamp` of each trace with spans stored (others are absent)."""
    ids = sorted(set(trace_ids))
    if not ids:
        return {}
    rows = store.query(_STAMPS.format(spans=store.table("spans")), {"project": project, "trace_ids": ids})
    return {
        bytes(row["trace_id"]): Stamp(
            stored=int(row["stored"]),
            spans=int(row["spans"]),
            last_insert_us=int(row["last_insert_us"]),
            first_start_ns=int(row["first_start_ns"]),
            last_start_ns=int(row["last_start_ns"]),
        )
        for row in rows
    }


def stored_traces(store: Store, trace_ids: Iterable[bytes], project: str) -> dict[bytes, StoredTrace]:
    """Every stored span of each trace, in start order, with the latest stamp among them."""
    ids = sorted(set(trace_ids))
    if not ids:
        return {}
    rows = store.query(
        _STORED_SPANS.format(spans=store.table("spans")), {"project": project, "trace_ids": ids}
    )
    spans: dict[bytes, list[SpanRow]] = {}
    latest: dict[bytes, int] = {}
    for row in rows:
        inserted_us = int(row.pop("inserted_us"))
        span = SpanRow(**row)
        spans.setdefault(span.trace_id, []).append(span)
        latest[span.trace_id] = max(latest.get(span.trace_id, 0), inserted_us)
    return {trace_id: StoredTrace(trace_spans, latest[trace_id]) for trace_id, trace_spans in spans.items()}


def live_rows(
    store: Store, trace_ids: Sequence[bytes], project: str, since_ns: int, until_ns: int
) -> dict[bytes, list[tuple[int, int]]]:
    """(start ns, version) of each live request row of these traces starting in [since, until]."""
    if not trace_ids:
        return {}
    params = {"project": project, "trace_ids": sorted(set(trace_ids)), "since": since_ns, "until": until_ns}
    found: dict[bytes, list[tuple[int, int]]] = {}
    for row in store.query(_LIVE_ROWS.format(requests=store.table("requests")), params):
        found.setdefault(bytes(row["trace_id"]), []).append((int(row["start_ns"]), int(row["version"])))
    return found


def touched(
    store: Store, after_us: int, until_us: int, limit: int, key: Touched | None = None
) -> list[Touched]:
    """Up to ``limit`` traces last inserted in (after, until] on the store's clock, ordered by
    (time, project, trace id), starting after ``key`` (the last of the previous page)."""
    params = {
        "after": after_us,
        "until": until_us,
        "limit": limit,
        "key_us": key.touched_us if key else 0,
        "key_project": key.project if key else "",
        "key_trace": key.trace_id if key else bytes(16),
    }
    rows = store.query(_TOUCHED.format(touched=store.table("traces_touched")), params)
    return [Touched(str(row["project"]), bytes(row["trace_id"]), int(row["touched_us"])) for row in rows]
