"""What the store holds of a trace, for making its request row converge: how many spans and how
recently stamped, its spans with those stamps, and, of the traces touched in a minute, those
whose request rows are not what their stored spans give.

Stamps are ClickHouse's own (``spans.inserted_at``, ``DEFAULT now64(6)``), so versions computed
from them never depend on a collector's clock. Every read here is one query (and the first
bounded read under ``FINAL`` asks the server, once, which settings it needs: :meth:`Store.near_settings
<latencylens_collector.storage.store.Store.near_settings>`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, cast

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.request_rows import SPAN_COUNT_BITS, STAMP_BITS, STAMP_EPOCH_MS
from latencylens_collector.analysis.row_work import READ_BACK_COLUMNS, UNCAPPED
from latencylens_collector.storage.store import Store, settings_sql
from latencylens_collector.storage.trace_ids import TRACE_IDS_SET, trace_ids_param


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


NEAR_NS: Final = 86_400 * 10**9
"""How far from a batch's spans' starts the reads after its insert look for the rest of their
traces: a day either side. ``spans`` is partitioned by day of start, so those reads touch three
days' partitions however many days are kept. A trace with spans further apart gets a row from
what is near; the reconciler, which reads without this bound, writes its full row once it has
settled."""


class Near(NamedTuple):
    """The starts (ns) a read by trace id looks between."""

    from_ns: int
    to_ns: int

    @classmethod
    def of(cls, first_start_ns: int, last_start_ns: int) -> Near:
        """:data:`NEAR_NS` either side of a batch's earliest and latest span start."""
        return cls(first_start_ns - NEAR_NS, last_start_ns + NEAR_NS)


_NEAR: Final = (
    " AND start_time BETWEEN fromUnixTimestamp64Nano({from_ns:Int64}, 'UTC') "
    "AND fromUnixTimestamp64Nano({to_ns:Int64}, 'UTC')"
)
"""The condition a :class:`Near` puts on a read (``{near}`` in the templates below)."""


def _near(near: Near | None) -> tuple[str, dict[str, int]]:
    """The condition and parameters of a bound, or none."""
    return ("", {}) if near is None else (_NEAR, near._asdict())


_STAMPS: Final = """
SELECT trace_id, count() AS stored, uniqExact(span_id) AS spans,
       toUnixTimestamp64Micro(max(inserted_at)) AS last_insert_us,
       toUnixTimestamp64Nano(min(start_time)) AS first_start_ns,
       toUnixTimestamp64Nano(max(start_time)) AS last_start_ns
FROM {spans}
WHERE project = {{project:String}} AND trace_id IN {ids_set}{near}
GROUP BY trace_id
"""
"""No FINAL: the key columns, the stamp and the start are all it reads. The latest stamp is the same with or
without FINAL (FINAL keeps each span's latest copy)."""

_STORED_SPANS: Final = """
SELECT trace_id, span_id, parent_span_id, service, name, span_kind, kind,
       toUnixTimestamp64Nano(start_time) AS start_ns, duration_ns, status_code, '' AS no_message,
       attributes, toUnixTimestamp64Micro(inserted_at) AS inserted_us
FROM {spans} FINAL
PREWHERE project = {{project:String}} AND trace_id IN {ids_set}{near}
ORDER BY start_ns, span_id
"""
"""The columns request rows are built from (not ``resource_attributes``, ``status_message`` nor
``events``: attribution never reads them) and each span's stamp, in one read, so a row's version
describes exactly the spans it was computed from. The columns come in :class:`SpanRow`'s order
up to ``attributes`` (an empty string where the status message would be), read by column: no
dict per row.

``PREWHERE``, not ``WHERE``: see ``store._SPAN_SELECT``."""

_READ_BACK_EXPRESSIONS: Final = {
    "trace_hex": "hex(trace_id)",
    "span_hex": "hex(span_id)",
    "parent_hex": "hex(parent_span_id)",
    "start_ns": "toUnixTimestamp64Nano(start_time)",
    "inserted_us": "toUnixTimestamp64Micro(inserted_at)",
}
"""How :data:`~latencylens_collector.analysis.row_work.READ_BACK_COLUMNS` are read where they are
not the column of that name (JSON has no bytes: ids in hex)."""

_STORED_SPANS_READ_BACK: Final = f"""
SELECT {", ".join(f"{_READ_BACK_EXPRESSIONS.get(name, name)} AS {name}" for name in READ_BACK_COLUMNS)}
FROM {{spans}} FINAL
PREWHERE project = {{{{project:String}}}} AND trace_id IN {{ids_set}}{{near}}
ORDER BY start_ns, span_id
LIMIT {{{{most_spans_and_one:UInt64}}}} BY trace_id
"""
""":data:`_STORED_SPANS` as :class:`~latencylens_collector.analysis.row_work.ReadBack` reads it: of a
trace with more than ``most_spans`` distinct spans stored, ``most_spans + 1`` of them, enough for the
parse to tell it is past its cap and leave it out
(:class:`~latencylens_collector.analysis.row_work.ReadPart`). What is written out and parsed is
bounded by the cap; what the engine reads of such a trace is not, so the caller reads it once
(:meth:`~latencylens_collector.pipeline.ingest.Ingestor.read_back`).
No subquery counting each trace's spans first: it read the key columns of every granule the
batch's traces fall in a second time, over a quarter of the read with 4 M spans stored and random
trace ids (``bench read_back``)."""

_TOUCHED_IN: Final = """
SELECT project, trace_id FROM {touched}
WHERE minute = toDateTime({{minute:UInt32}}, 'UTC')
GROUP BY project, trace_id
HAVING (max(last_insert) > fromUnixTimestamp64Micro({{after:Int64}}, 'UTC')
         AND max(last_insert) <= fromUnixTimestamp64Micro({{until:Int64}}, 'UTC'))
    OR (max(last_insert) > fromUnixTimestamp64Micro({{again_after:Int64}}, 'UTC')
         AND max(last_insert) <= fromUnixTimestamp64Micro({{again_until:Int64}}, 'UTC'))
"""
"""Traces whose latest insert during one minute (the store's clock) falls in either of a pass's two
windows (:class:`Window`): a range of ``traces_touched``'s key, so a pass reads each minute once."""

_ROW_VERSION: Final = (
    f"bitOr(bitShiftLeft(toUInt64(least(spans, {(1 << SPAN_COUNT_BITS) - 1})), {STAMP_BITS}), "
    f"toUInt64(least(greatest(intDiv(toUnixTimestamp64Micro(last_insert), 1000) - {STAMP_EPOCH_MS}, 0), "
    f"{(1 << STAMP_BITS) - 1})))"
)
""":func:`~latencylens_collector.analysis.request_rows.row_version` of a trace's distinct ``spans``
and ``last_insert`` stamp, as ClickHouse computes it (from the same constants; a test checks the
two agree, clamps included)."""

_TOUCHED_TO_REWRITE: Final = f"""
WITH (SELECT (min(start_time), max(start_time)) FROM {{spans}}
      WHERE (project, trace_id) IN ({{touched_in}})) AS starts_between
SELECT count() AS checked,
       groupArrayIf((project, trace_id, live_starts),
                    NOT (length(live_versions) = 1 AND live_versions[1] = {_ROW_VERSION})) AS to_rewrite
FROM (
    SELECT project, trace_id, uniqExact(span_id) AS spans, max(inserted_at) AS last_insert
    FROM {{spans}}
    WHERE (project, trace_id) IN ({{touched_in}})
    GROUP BY project, trace_id
    HAVING last_insert <= fromUnixTimestamp64Micro({{{{until:Int64}}}}, 'UTC')
) AS stamped
LEFT JOIN (
    SELECT project, trace_id, groupArray(toUnixTimestamp64Nano(start_time)) AS live_starts,
           groupArray(version) AS live_versions
    FROM {{requests}} FINAL
    WHERE (project, trace_id) IN ({{touched_in}})
      AND start_time >= starts_between.1 AND start_time <= starts_between.2
    GROUP BY project, trace_id
) AS live USING (project, trace_id)
"""
"""Of the traces whose latest insert during one minute falls in a pass's window and which have
settled (no insert after the window), how many there are and those whose rows are not right, with
the start of each of their live rows: a trace is right when it has exactly one live row and that
row's version is what its stored spans give (same distinct spans, same latest stamp). One row
whatever the minute holds, so the common case (every row right) costs no Python per trace.

Tombstones are hidden by FINAL (``ReplacingMergeTree(version, is_deleted)``). A trace's rows all
start at one of its spans' starts, so the touched traces' earliest and latest span start bound
the ``requests`` key range (a scalar, evaluated before the key is read)."""

_TOUCHED_MINUTES: Final = """
SELECT DISTINCT toUnixTimestamp(minute) AS minute_s FROM {touched}
WHERE minute >= toStartOfMinute(fromUnixTimestamp64Micro({{after:Int64}}, 'UTC'))
  AND minute <= fromUnixTimestamp64Micro({{until:Int64}}, 'UTC')
ORDER BY minute_s
"""
"""The minutes of a window with any insert (the first column of the key: an index range)."""

TraceKey = tuple[str, bytes]
"""(project, trace id)."""


class ToRewrite(NamedTuple):
    """What a reconciler pass found of one minute's settled traces (:func:`touched_to_rewrite`)."""

    checked: int
    """Settled traces looked at."""
    live_starts: dict[TraceKey, list[int]]
    """The traces whose rows are not right, each with the start (ns) of each of its live rows."""


@dataclass(frozen=True)
class Window:
    """The inserts one reconciler pass looks at (µs, store clock): those new since the last pass,
    ``(after, until]``, and, to look at each trace a second time, those a settle delay older,
    ``(again_after, again_until]`` (empty when ``again_after == again_until``)."""

    after: int
    until: int
    again_after: int = 0
    again_until: int = 0

    @property
    def earliest(self) -> int:
        return min(self.after, self.again_after) if self.again_until > self.again_after else self.after

    def params(self) -> dict[str, int]:
        return {
            "after": self.after,
            "until": self.until,
            "again_after": self.again_after,
            "again_until": self.again_until,
        }


def _stamp(row: Mapping[str, Any]) -> Stamp:
    """A trace's stamp from a row of :data:`_STAMPS` or :data:`_TOUCHED_STAMPS` (same columns)."""
    return Stamp(
        stored=int(row["stored"]),
        spans=int(row["spans"]),
        last_insert_us=int(row["last_insert_us"]),
        first_start_ns=int(row["first_start_ns"]),
        last_start_ns=int(row["last_start_ns"]),
    )


def stamps(
    store: Store, trace_ids: Iterable[bytes], project: str, near: Near | None = None
) -> dict[bytes, Stamp]:
    """:class:`Stamp` of each trace with spans stored (others are absent), of its spans that start
    ``near`` only when given."""
    ids = trace_ids_param(trace_ids)
    if not ids:
        return {}
    condition, bounds = _near(near)
    sql = _STAMPS.format(spans=store.table("spans"), ids_set=TRACE_IDS_SET, near=condition)
    rows = store.query(sql, {"project": project, "trace_ids": ids, **bounds})
    return {bytes(row["trace_id"]): _stamp(row) for row in rows}


def stored_traces(
    store: Store, trace_ids: Iterable[bytes], project: str, near: Near | None = None
) -> dict[bytes, StoredTrace]:
    """Every stored span of each trace (that starts ``near``, when given), in start order, with the
    latest stamp among them."""
    ids = trace_ids_param(trace_ids)
    if not ids:
        return {}
    condition, bounds = _near(near)
    sql = _STORED_SPANS.format(spans=store.table("spans"), ids_set=TRACE_IDS_SET, near=condition)
    if near is not None:
        sql += settings_sql(store.near_settings())
    columns = store.query_columns(sql, {"project": project, "trace_ids": ids, **bounds})
    if not columns:  # no row: no columns either
        return {}
    inserted = columns.pop()
    spans: dict[bytes, list[SpanRow]] = {}
    latest: dict[bytes, int] = {}
    span_row = cast(Callable[..., SpanRow], SpanRow)  # the columns are SpanRow's first fields, in order
    for fields, inserted_us in zip(zip(*columns, strict=True), inserted, strict=True):
        span = span_row(*fields, project=project)
        spans.setdefault(span.trace_id, []).append(span)
        if inserted_us > latest.get(span.trace_id, 0):
            latest[span.trace_id] = inserted_us
    return {trace_id: StoredTrace(trace_spans, latest[trace_id]) for trace_id, trace_spans in spans.items()}


def stored_traces_unparsed(
    store: Store,
    trace_ids: Iterable[bytes],
    project: str,
    most_spans: int = UNCAPPED,
    near: Near | None = None,
) -> bytes:
    """What :func:`stored_traces` reads, as ClickHouse writes it out, for
    :class:`~latencylens_collector.analysis.row_work.ReadBack` to parse elsewhere: every span of a
    trace with at most ``most_spans`` distinct spans stored, ``most_spans + 1`` of any other
    (:data:`_STORED_SPANS_READ_BACK`)."""
    condition, bounds = _near(near)
    sql = _STORED_SPANS_READ_BACK.format(spans=store.table("spans"), ids_set=TRACE_IDS_SET, near=condition)
    params = {
        "project": project,
        "trace_ids": trace_ids_param(trace_ids),
        "most_spans_and_one": min(most_spans, UNCAPPED - 1) + 1,
        **bounds,
    }
    return store.query_json_columns(sql, params, store.near_settings() if near is not None else None)


def touched_minutes(store: Store, window: Window) -> list[int]:
    """Start (unix s) of each minute with spans inserted in the window, in order."""
    sql = _TOUCHED_MINUTES.format(touched=store.table("traces_touched"))
    params = {"after": window.earliest, "until": window.until}
    return [int(row["minute_s"]) for row in store.query(sql, params)]


def touched_to_rewrite(store: Store, minute_s: int, window: Window) -> ToRewrite:
    """Which traces touched during the minute that starts at ``minute_s`` settled in the window,
    and which of them need their rows rewritten (:data:`_TOUCHED_TO_REWRITE`), in one query."""
    touched_in = _touched_in(store)
    sql = _TOUCHED_TO_REWRITE.format(
        spans=store.table("spans"), requests=store.table("requests"), touched_in=touched_in
    )
    (row,) = store.query(sql, {"minute": minute_s, **window.params()})
    rewrite = {
        (str(project), bytes(trace_id)): [int(start_ns) for start_ns in live_starts]
        for project, trace_id, live_starts in row["to_rewrite"]
    }
    return ToRewrite(int(row["checked"]), rewrite)


def _touched_in(store: Store) -> str:
    return _TOUCHED_IN.format(touched=store.table("traces_touched")).strip()
