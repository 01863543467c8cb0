"""Reads by trace id on finer granules: does reading fewer rows make them cheaper?

``bench read_back`` shows the reads a batch makes after its INSERT growing with the spans stored
when trace ids are random: the batch's 1,600 traces fall in nearly every granule of 8,192 rows.
Finer granules are the obvious lever: with 256 rows a granule, the same traces touch a tenth of the
table's rows. Here the spans of ``bench read_back``'s largest size (random ids) are copied into
tables that differ from ``spans`` only in ``index_granularity`` and, last, in the size of their
compressed blocks (a granule read decompresses its whole block, 64 KiB to 1 MiB by default: many
small granules share one). Each table holds the stored spans merged into one part and the batch in
a part of its own, as right after the batch's INSERT; then everything merged into one part, as the
reconciler and the API find a trace later. Each copy in turn takes ``spans``' name
(``EXCHANGE TABLES``), and the collector's own reads of the batch (``trace_state.stamps`` and
``trace_state.stored_traces_unparsed``, near the batch's starts) run on it, checked equal to the
reads on ``spans`` as the migrations make it, which is the baseline. Since migration 0021 that
has a set index over trace ids, which keeps only the granules that hold one of the batch's ids: the
first copy is ``spans`` without it, as before. Beside the CPU, the granules the batch's condition
selects (``EXPLAIN indexes = 1``: after the set index where the table has one) and the CPU of the
INSERT that filled each copy. One INSERT a layout drifts by a third between runs, so what the set
costs an insert is measured apart: INSERTs with and without it in alternating rounds, each with no
merge running.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Final

from bench import _stored_traces
from bench.read_back import (
    _RANDOM,
    SIZES,
    _last_batch,
    _median_cpu_ms,
    fill,
    granules,
    store_with_source,
)
from latencylens_collector.storage import trace_state
from latencylens_collector.storage.store import Store

DATABASE: Final = "bench_read_granules"
COPY: Final = "as migrated, a copy"
WITHOUT_SET: Final = "without the trace-id set (as before migration 0021)"
LAYOUTS: Final = (
    (COPY, "index_granularity = 8192"),
    (WITHOUT_SET, "index_granularity = 8192"),
    ("1,024 rows a granule", "index_granularity = 1024"),
    ("256 rows a granule", "index_granularity = 256"),
    (
        "256 rows a granule, compressed blocks of 2–4 KiB",
        "index_granularity = 256, min_compress_block_size = 2048, max_compress_block_size = 4096",
    ),
)
"""Each copy's table settings; its structure, indexes, engine and sorting key are ``spans``' own,
but for the second, which drops the set index over trace ids that migration 0021 adds. The first is
``spans`` as it is, for the INSERTs' CPU (``spans`` itself was filled by many)."""
INSERT_ROUNDS: Final = 4
"""Alternating rounds of the INSERTs with and without the trace-id set."""


def _answers(store: Store, batch: list[bytes], near: trace_state.Near) -> tuple[Any, Any]:
    """What the reads give, to check every layout gives the same: parsed, per trace (spans of
    different traces with the same start may come in either order)."""
    return (
        trace_state.stamps(store, batch, "default", near),
        trace_state.stored_traces(store, batch, "default", near),
    )


def _read_back_ms(store: Store, batch: list[bytes], near: trace_state.Near) -> float:
    return _median_cpu_ms(lambda: trace_state.stored_traces_unparsed(store, batch, "default", near=near))


def _measure(store: Store, batch: list[bytes], near: trace_state.Near) -> dict[str, Any]:
    """The reads with the batch in a part of its own, then with everything merged into one part."""
    spans = store.table("spans")
    kept = granules(store, batch, near)
    figures: dict[str, Any] = {
        "stamps": _median_cpu_ms(lambda: trace_state.stamps(store, batch, "default", near)),
        "read_back": _read_back_ms(store, batch, near),
        "granules": kept.by_key if kept.by_set is None else kept.by_set,
        "of": kept.of,
        "answers": _answers(store, batch, near),
    }
    store.command(f"OPTIMIZE TABLE {spans} FINAL")
    figures["merged"] = _read_back_ms(store, batch, near)
    assert _answers(store, batch, near) == figures["answers"]
    return figures


def _merges_done(store: Store, timeout_s: float = 300.0) -> None:
    """Wait until no merge runs: an INSERT's CPU is the process's (chdb's threads included), so a
    merge left over from the last statement would be counted as the INSERT's."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        [row] = store.query("SELECT count() AS running FROM system.merges")
        if not row["running"]:
            return
        time.sleep(0.2)


def _insert_s(store: Store, layout: str, condition: str) -> float:
    """CPU seconds of an INSERT of ``spans``' rows that meet ``condition`` into ``layout``, with no
    merge running before it and none of ``layout``'s own during it."""
    _merges_done(store)
    store.command(f"SYSTEM STOP MERGES {layout}")
    try:
        began = time.process_time()
        store.command(f"INSERT INTO {layout} SELECT * FROM {store.table('spans')} WHERE {condition}")
        return time.process_time() - began
    finally:
        store.command(f"SYSTEM START MERGES {layout}")


def _stored_before_batch(store: Store) -> str:
    """The condition of the stored spans, the batch (the last insert) left out."""
    return f"inserted_at < (SELECT max(inserted_at) FROM {store.table('spans')})"


def _copy_as_stored(store: Store, layout: str) -> float:
    """``spans``' rows into ``layout`` as ``spans`` holds them: the stored spans merged into one
    part, then the batch (the last insert) in a part of its own; the CPU seconds of the first
    INSERT (which builds the layout's indexes)."""
    inserted = _insert_s(store, layout, _stored_before_batch(store))
    store.command(f"OPTIMIZE TABLE {layout} FINAL")
    last = f"(SELECT max(inserted_at) FROM {store.table('spans')})"
    store.command(f"INSERT INTO {layout} SELECT * FROM {store.table('spans')} WHERE inserted_at = {last}")
    return inserted


def _set_insert_s(store: Store, layouts: dict[str, str]) -> dict[str, float]:
    """Median CPU seconds of INSERTs of the stored spans into an empty table with the trace-id set
    and into one without it, in alternating rounds: what the set costs an insert, which one INSERT
    a layout cannot tell apart from the machine's drift."""
    times: dict[str, list[float]] = {COPY: [], WITHOUT_SET: []}
    for round_ in range(INSERT_ROUNDS):
        for label in (COPY, WITHOUT_SET) if round_ % 2 == 0 else (WITHOUT_SET, COPY):
            store.command(f"TRUNCATE TABLE {layouts[label]}")
            times[label].append(_insert_s(store, layouts[label], _stored_before_batch(store)))
    return {label: statistics.median(seconds) for label, seconds in times.items()}


def run(report: Any) -> None:
    store, source_spans = store_with_source(DATABASE)
    spans = store.table("spans")
    try:
        store.command(f"TRUNCATE TABLE {spans}")
        stored, _ = fill(store, _RANDOM, source_spans, SIZES[-1])
        batch, near = _last_batch(store)
        # the merged copy is made from the layout before the batch is merged in, so copy first
        layouts = []
        for index, (label, settings) in enumerate(LAYOUTS):
            layout = store.table(f"spans_layout_{index}")
            store.command(
                f"CREATE TABLE {layout} AS {spans} ENGINE = ReplacingMergeTree(inserted_at) "
                "PARTITION BY toYYYYMMDD(start_time) ORDER BY (project, trace_id, span_id) "
                f"SETTINGS {settings}"
            )
            if label == WITHOUT_SET:
                store.command(f"ALTER TABLE {layout} DROP INDEX trace_id_set")
            layouts.append((layout, _copy_as_stored(store, layout)))
        print(f"    {stored:,} spans stored and a batch, random ids; {len(LAYOUTS)} copies", flush=True)
        base = _measure(store, batch, near)
        figures = []
        for (label, _), (layout, insert_s) in zip(LAYOUTS, layouts, strict=True):
            store.command(f"EXCHANGE TABLES {spans} AND {layout}")
            try:
                measured = _measure(store, batch, near)
            finally:
                store.command(f"EXCHANGE TABLES {spans} AND {layout}")
            assert measured["answers"] == base["answers"], label
            figures.append((label, {**measured, "insert_s": insert_s}))
            print(f"    {label}: measured", flush=True)
        by_label = {label: layout for (label, _), (layout, _) in zip(LAYOUTS, layouts, strict=True)}
        set_insert = _set_insert_s(store, by_label)
    finally:
        _stored_traces.drop(store)
    report.add(
        f"stamps of a batch, {stored:,} spans stored, random ids, as migrated (the trace-id set)",
        base["stamps"],
        "ms CPU",
        f"baseline; {base['granules']:,} of {base['of']:,} granules selected; median of 5",
    )
    report.add("read-back of the batch, as migrated", base["read_back"], "ms CPU", "baseline")
    report.add(
        "read-back of the batch once merged in (as the reconciler finds it), as migrated",
        base["merged"],
        "ms CPU",
        "against the read-back right after the insert",
        ratio=base["merged"] / base["read_back"],
    )
    added_us = (set_insert[COPY] - set_insert[WITHOUT_SET]) / stored * 1e6
    report.add(
        f"INSERT of the {stored:,} stored spans with the trace-id set, against without it",
        set_insert[COPY],
        "s CPU",
        f"medians of {INSERT_ROUNDS} alternating rounds, no merge running; without it "
        f"{set_insert[WITHOUT_SET]:.2f} s; {added_us:+.2f} µs a span",
        ratio=set_insert[COPY] / set_insert[WITHOUT_SET],
    )
    copy_insert_s = dict(figures)[COPY]["insert_s"]
    for label, measured in figures:
        report.add(
            f"INSERT of the {stored:,} stored spans, {label}",
            measured["insert_s"],
            "s CPU",
            "one INSERT, no merge running, building the layout's indexes; against the copy as migrated",
            ratio=measured["insert_s"] / copy_insert_s,
        )
        report.add(
            f"stamps, {label}",
            measured["stamps"],
            "ms CPU",
            f"{measured['granules']:,} of {measured['of']:,} granules selected",
            ratio=measured["stamps"] / base["stamps"],
        )
        report.add(
            f"read-back, {label}",
            measured["read_back"],
            "ms CPU",
            ratio=measured["read_back"] / base["read_back"],
        )
        report.add(
            f"read-back once merged in, {label}",
            measured["merged"],
            "ms CPU",
            "against the same as migrated",
            ratio=measured["merged"] / base["merged"],
        )
