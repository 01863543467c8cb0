"""Reads by trace id as the stored spans grow, with trace ids as SDKs make them: random.

After each batch, the collector reads back the traces the batch touched: the engine path every
span of them (``trace_state.stored_traces_unparsed``), the Python path their stamps first
(``trace_state.stamps``). ``spans`` is sorted by (project, trace_id, span_id), and OpenTelemetry's
trace ids are random, so a batch's 1,600 traces fall in nearly every granule of every part: what
such a read touches grows with the spans stored, not with the batch. The ingest benchmarks stamp
their ids with a counter (``bench._payloads.stamp``), so each batch's traces sort together at
the end of the key and their reads stay small whatever is stored: they do not show this.

Here the benchmark's traces (:mod:`bench._stored_traces`: the ingest benchmark's rows, ≈ 15
attributes a span) are stored, then copied with new trace ids until :data:`SIZES` spans are
stored, and at each size a fresh batch of :data:`BATCH_TRACES` traces is stored and read back.
Ids are random (a SipHash of the original id and the copy), or, for contrast, ascending as the
ingest benchmarks'.
Before each batch the stored spans are merged into one part, the layout a read costs least in
(a busy table has several, each read apart), so the figures are a lower bound and repeatable.
Each read runs :data:`REPEATS` times; the figure is the median process CPU (ClickHouse's threads
included: the engine runs in this process). The baseline is the read-back with only the first
size stored. Two earlier forms of the read-back are measured beside it: with each trace's spans
counted first, in a subquery, to leave out traces past their cap (which read the key columns of
every granule touched a second time), and before that, with its filter in ``WHERE`` under
``FINAL`` (which ClickHouse keeps out of ``PREWHERE``).

``spans`` is partitioned by day of ``start_time``, and a collector that keeps spans for weeks holds
many days. The collector reads near the batch only (a day either side of its spans' starts,
``trace_state.Near``: the partitions of other days pruned), which on one day changes nothing. Last,
the largest size is stored again over :data:`DAYS` days (a copy a day, back, each day's part
merged), a batch is stored on the newest day, and its reads are measured near it and, as before
the bound, over every day.
"""

from __future__ import annotations

import os
import re
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Final, NamedTuple

from bench import _payloads, _stored_traces
from latencylens_collector.analysis.row_work import READ_BACK_COLUMNS
from latencylens_collector.storage import trace_state
from latencylens_collector.storage.store import Store
from latencylens_collector.storage.trace_ids import TRACE_IDS_SET, trace_ids_param

DATABASE: Final = "bench_read_back"
_SIZES_ENV: Final = "LATENCYLENS_BENCH_READ_BACK_SIZES"
SIZES: Final = tuple(int(size) for size in os.environ.get(_SIZES_ENV, "100000,1000000,4000000").split(","))
"""Spans stored before each measured batch (the first is the baseline's)."""
BATCH_TRACES: Final = 1_600
"""The traces of an INSERT of 16 bodies under load (8,000 spans)."""
REPEATS: Final = 5

_COLUMNS: Final = ", ".join(
    f"{trace_state._READ_BACK_EXPRESSIONS.get(name, name)} AS {name}" for name in READ_BACK_COLUMNS
)
_CAP_SUBQUERY: Final = f"""
SELECT {_COLUMNS}
FROM {{spans}} FINAL
PREWHERE project = {{{{project:String}}}} AND trace_id IN (
    SELECT trace_id FROM {{spans}}
    WHERE project = {{{{project:String}}}} AND trace_id IN {{ids_set}}
    GROUP BY trace_id HAVING uniqExact(span_id) <= {{{{most_spans:UInt64}}}})
ORDER BY start_ns, span_id
"""
"""The read-back as it was until the parse left out traces past their cap: a subquery counted each
trace's spans first."""
_BEFORE: Final = _CAP_SUBQUERY.replace("PREWHERE", "WHERE", 1)
"""The read-back as it was before that: its filter in ``WHERE``, which ClickHouse keeps out of
``PREWHERE`` under ``FINAL``."""


def _copy(store: Store, copy: int, ids: str, traces: int | None = None, days_back: int = 0) -> None:
    """The source spans again (of its first ``traces`` traces only, when given), each trace under a
    new id (``ids``: an expression of ``trace_id`` and ``{copy}``), with a fresh insert stamp,
    starting ``days_back`` days earlier."""
    source = store.table("read_back_source")
    if traces is not None:
        first = f"SELECT DISTINCT trace_id FROM {source} ORDER BY trace_id LIMIT {traces}"
        source = f"(SELECT * FROM {source} WHERE trace_id IN ({first}))"
    store.command(
        f"INSERT INTO {store.table('spans')} SELECT * REPLACE "
        f"({ids.format(copy=copy)} AS trace_id, now64(6) AS inserted_at, "
        f"start_time - toIntervalDay({days_back}) AS start_time) FROM {source}"
    )


_RANDOM: Final = "sipHash128(trace_id, toUInt32({copy}))"
_ASCENDING: Final = (
    "toFixedString(concat(reverse(reinterpretAsString(toUInt64(4000000000 + {copy}))), "
    "substring(sipHash128(trace_id), 1, 8)), 16)"
)
"""As ``bench._payloads.stamp`` stamps them, the first 8 bytes a counter (big-endian): each copy's
traces sort after the last copy's."""


def _median_cpu_ms(
    read: Callable[[], object], before: Callable[[], object] | None = None, repeats: int = REPEATS
) -> float:
    """Median process CPU of ``read``, in ms; ``before`` runs ahead of each read, untimed."""
    times = []
    for _ in range(repeats):
        if before is not None:
            before()
        began = time.process_time()
        read()
        times.append((time.process_time() - began) * 1e3)
    return statistics.median(times)


def _reads(store: Store, batch_ids: list[bytes], near: trace_state.Near) -> dict[str, float]:
    """The collector's reads of a batch's traces (near its spans' starts) and the read-back's
    earlier forms (unbounded: on one day, the same spans), checked equal first."""
    spans = store.table("spans")
    ids = trace_ids_param(batch_ids)
    earlier = {"project": "default", "trace_ids": ids, "most_spans": 2**63}
    before = _BEFORE.format(spans=spans, ids_set=TRACE_IDS_SET)
    subquery = _CAP_SUBQUERY.format(spans=spans, ids_set=TRACE_IDS_SET)

    def read_now() -> bytes:
        return trace_state.stored_traces_unparsed(store, batch_ids, "default", near=near)

    assert store.query_json_columns(subquery, earlier) == read_now()
    assert store.query_json_columns(before, earlier) == read_now()
    return {
        "read_back": _median_cpu_ms(read_now),
        "read_back_subquery": _median_cpu_ms(lambda: store.query_json_columns(subquery, earlier)),
        "read_back_before": _median_cpu_ms(lambda: store.query_json_columns(before, earlier)),
        "stamps": _median_cpu_ms(lambda: trace_state.stamps(store, batch_ids, "default", near)),
    }


class Granules(NamedTuple):
    """What ``EXPLAIN indexes = 1`` says the indexes kept of the stamps' read of some traces."""

    by_key: int
    """Kept by the sorting key: those whose key range one of the ids falls in."""
    of: int
    """The table's (the near days' partitions)."""
    by_set: int | None
    """Kept of ``by_key`` by the set index over trace ids (none without it)."""


_KEY_GRANULES: Final = re.compile(r"\bPrimaryKey.*?Granules: (\d+)/(\d+)", re.S)
_SET_GRANULES: Final = re.compile(r"Name: trace_id_set.*?Granules: (\d+)/\d+", re.S)


def granules(store: Store, batch: list[bytes], near: trace_state.Near) -> Granules:
    """The granules the stamps' read of ``batch`` (near its spans) keeps by each index."""
    spans = store.table("spans")
    sql = trace_state._STAMPS.format(spans=spans, ids_set=TRACE_IDS_SET, near=trace_state._NEAR)
    parameters = {"project": "default", "trace_ids": trace_ids_param(batch), **near._asdict()}
    plan = "\n".join(row["explain"] for row in store.query(f"EXPLAIN indexes = 1 {sql}", parameters))
    key = _KEY_GRANULES.search(plan)
    assert key, plan
    by_set = _SET_GRANULES.search(plan)
    return Granules(int(key[1]), int(key[2]), int(by_set[1]) if by_set else None)


SMALLER_BATCHES: Final = (16, 160)
"""Traces of the batch read at the largest size beside the whole batch: what a read costs is the
granules the key keeps, each looked at by the set, and those are about one a trace."""


def _by_batch_traces(store: Store, batch: list[bytes], near: trace_state.Near) -> dict[int, dict[str, Any]]:
    """The stamps and the read-back of the first 16, 160 and all of ``batch``'s traces, with the
    granules the key and the set keep."""
    figures = {}
    for traces in (*SMALLER_BATCHES, len(batch)):
        some = batch[:traces]
        figures[traces] = {
            "stamps": _median_cpu_ms(partial(trace_state.stamps, store, some, "default", near)),
            "read_back": _median_cpu_ms(
                partial(trace_state.stored_traces_unparsed, store, some, "default", near=near)
            ),
            "granules": granules(store, some, near),
        }
    return figures


def _last_batch(store: Store) -> tuple[list[bytes], trace_state.Near]:
    """The trace ids of the last insert into ``spans`` (a batch of :data:`BATCH_TRACES`), and where
    the collector reads their traces (near its spans' starts, all on one day)."""
    spans = store.table("spans")
    last = f"inserted_at = (SELECT max(inserted_at) FROM {spans})"
    ids = [
        bytes(row["trace_id"]) for row in store.query(f"SELECT DISTINCT trace_id FROM {spans} WHERE {last}")
    ]
    assert len(ids) == BATCH_TRACES, len(ids)
    [starts] = store.query(
        "SELECT toUnixTimestamp64Nano(min(start_time)) AS first, "
        "toUnixTimestamp64Nano(max(start_time)) AS last, "
        f"uniqExact(_partition_id) AS days FROM {spans} WHERE {last}"
    )
    assert starts["days"] == 1, starts
    return ids, trace_state.Near.of(int(starts["first"]), int(starts["last"]))


def fill(
    store: Store, ids: str, source_spans: int, size: int, stored: int = 0, copy: int = 0
) -> tuple[int, int]:
    """Copies of the source added to the ``stored`` spans of ``copy`` copies until ``size`` spans are
    stored, merged into one part (the fewest granules a read can touch), then a batch of
    :data:`BATCH_TRACES` traces in an insert of its own, stored last as the collector's newest
    batch is; the spans stored before the batch and the copies made, the batch's included."""
    while stored + source_spans <= size:
        copy += 1
        _copy(store, copy, ids)
        stored += source_spans
    store.command(f"OPTIMIZE TABLE {store.table('spans')} FINAL")
    copy += 1
    _copy(store, copy, ids, BATCH_TRACES)
    return stored, copy


def _grow(store: Store, ids: str, source_spans: int, by_traces: bool = False) -> dict[int, dict[str, Any]]:
    """Copies up to each of :data:`SIZES`, a batch stored and read at each; at the largest, with
    ``by_traces``, parts of the batch read too (:func:`_by_batch_traces`)."""
    store.command(f"TRUNCATE TABLE {store.table('spans')}")
    stored, copy = 0, 0
    figures: dict[int, dict[str, Any]] = {}
    for size in SIZES:
        stored, copy = fill(store, ids, source_spans, size, stored, copy)
        batch, near = _last_batch(store)
        figures[stored] = {**_reads(store, batch, near)}
        print(f"    {stored:>10,} spans stored: {figures[stored]}", flush=True)
    if by_traces:
        figures[stored]["by_batch_traces"] = _by_batch_traces(store, batch, near)
    return figures


DAYS: Final = 30
"""Days the spans of :func:`_spread` start on: ``spans`` is partitioned by day of ``start_time``."""


def _spread(store: Store, source_spans: int) -> dict[str, float]:
    """The largest of :data:`SIZES` in spans again, over :data:`DAYS` days (a copy a day, back),
    merged; then a batch on the newest day, read back and stamped near its spans' starts (as the
    collector reads) and over every day (as it read before)."""
    spans = store.table("spans")
    store.command(f"TRUNCATE TABLE {spans}")
    copy = 0
    while (copy + 1) * source_spans <= SIZES[-1]:
        copy += 1
        _copy(store, copy, _RANDOM, days_back=copy % DAYS)
    store.command(f"OPTIMIZE TABLE {spans} FINAL")
    _copy(store, copy + 1, _RANDOM, BATCH_TRACES)
    batch, near = _last_batch(store)
    [stored] = store.query(f"SELECT count() AS spans, uniqExact(_partition_id) AS days FROM {spans}")
    print(f"    {stored['spans']:,} spans stored over {stored['days']} days", flush=True)
    assert trace_state.stored_traces_unparsed(
        store, batch, "default", near=near
    ) == trace_state.stored_traces_unparsed(store, batch, "default")
    assert trace_state.stamps(store, batch, "default", near) == trace_state.stamps(store, batch, "default")
    return {
        "days": stored["days"],
        "read_back": _median_cpu_ms(
            lambda: trace_state.stored_traces_unparsed(store, batch, "default", near=near)
        ),
        "read_back_every_day": _median_cpu_ms(
            lambda: trace_state.stored_traces_unparsed(store, batch, "default")
        ),
        "stamps": _median_cpu_ms(lambda: trace_state.stamps(store, batch, "default", near)),
        "stamps_every_day": _median_cpu_ms(lambda: trace_state.stamps(store, batch, "default")),
    }


def store_with_source(database: str, index_cache_bytes: int | None = None) -> tuple[Store, int]:
    """A fresh store holding the benchmark's traces in ``spans`` and, as the copies' source, in
    ``read_back_source``; and how many spans that is."""
    store = _stored_traces.fresh_store(database, index_cache_bytes)
    _, source_spans = _stored_traces.load(store)
    source, spans = store.table("read_back_source"), store.table("spans")
    store.command(f"CREATE TABLE {source} AS {spans}")
    store.command(f"INSERT INTO {source} SELECT * FROM {spans} FINAL")
    return store, source_spans


def run(report: Any) -> None:
    store, source_spans = store_with_source(DATABASE)
    try:
        random = _grow(store, _RANDOM, source_spans, by_traces=True)
        ascending = _grow(store, _ASCENDING, source_spans)
        spread = _spread(store, source_spans)
    finally:
        _stored_traces.drop(store)
    sizes = sorted(random)
    base = random[sizes[0]]
    batch_spans = BATCH_TRACES * _payloads.SPANS_PER_TRACE
    report.add(
        f"read-back of a batch, {sizes[0]:,} spans stored, random ids (baseline)",
        base["read_back"],
        "ms CPU",
        f"{BATCH_TRACES:,} traces, {batch_spans:,} spans; median of {REPEATS}",
    )
    for size in sizes[1:]:
        report.add(
            f"the same, {size:,} spans stored",
            random[size]["read_back"],
            "ms CPU",
            f"{random[size]['read_back'] / batch_spans * 1e3:.1f} µs a span of the batch",
            ratio=random[size]["read_back"] / base["read_back"],
        )
    for form, label in (
        ("read_back_subquery", "the read-back with its cap counted first (a subquery)"),
        ("read_back_before", "the read-back before that (WHERE under FINAL)"),
    ):
        for size in sizes:
            report.add(
                f"{label}, {size:,} spans stored, against today's",
                random[size][form],
                "ms CPU",
                ratio=random[size][form] / random[size]["read_back"],
            )
    for size in sizes[1:]:
        report.add(
            f"the Python path's stamps of a batch, {size:,} spans stored, against {sizes[0]:,}",
            random[size]["stamps"],
            "ms CPU",
            f"{random[sizes[0]]['stamps']:.1f} ms at {sizes[0]:,}",
            ratio=random[size]["stamps"] / random[sizes[0]]["stamps"],
        )
    last = sizes[-1]
    by_traces = random[last]["by_batch_traces"]
    fewest = by_traces[SMALLER_BATCHES[0]]
    for traces, read in by_traces.items():
        kept: Granules = read["granules"]
        per_granule = ""
        if traces != SMALLER_BATCHES[0] and kept.by_key > fewest["granules"].by_key:
            looked_at = kept.by_key - fewest["granules"].by_key
            further_us = (read["stamps"] - fewest["stamps"]) / looked_at * 1e3
            per_granule = f"; {further_us:.0f} µs a further granule"
        report.add(
            f"stamps of {traces:,} of the batch's traces, {last:,} spans stored, random ids",
            read["stamps"],
            "ms CPU",
            f"read-back {read['read_back']:.1f} ms; granules kept by the key {kept.by_key:,} of {kept.of:,}, "
            f"by the set {kept.by_set}{per_granule}",
            ratio=read["stamps"] / fewest["stamps"],
        )
    report.add(
        f"read-back with ascending ids (as the ingest benchmarks stamp them), {last:,} spans stored",
        ascending[last]["read_back"],
        "ms CPU",
        f"{ascending[sizes[0]]['read_back']:.1f} ms at {sizes[0]:,}; against random ids at {sizes[0]:,}",
        ratio=ascending[last]["read_back"] / base["read_back"],
    )
    report.add(
        f"read-back with {last:,} spans stored over {spread['days']:.0f} days (daily partitions), "
        f"random ids, near the batch's starts (a day either side), against {last:,} in one day",
        spread["read_back"],
        "ms CPU",
        ratio=spread["read_back"] / random[last]["read_back"],
    )
    report.add(
        "the same, read from every day (as before the bound), against near the batch",
        spread["read_back_every_day"],
        "ms CPU",
        ratio=spread["read_back_every_day"] / spread["read_back"],
    )
    report.add(
        f"the Python path's stamps with {last:,} spans over {spread['days']:.0f} days, near the batch, "
        f"against {last:,} in one day",
        spread["stamps"],
        "ms CPU",
        ratio=spread["stamps"] / random[last]["stamps"],
    )
    report.add(
        "the same, stamped from every day (as before the bound), against near the batch",
        spread["stamps_every_day"],
        "ms CPU",
        ratio=spread["stamps_every_day"] / spread["stamps"],
    )
