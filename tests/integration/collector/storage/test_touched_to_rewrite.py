"""The reconciler's one query a minute (:func:`trace_state.touched_to_rewrite`): of the settled
traces touched, it counts them all and returns exactly those whose rows are not what their stored
spans give (no live row, two live rows, a row of another version), each with its live rows'
starts, for their tombstones. The version it compares is :func:`row_version` computed in
ClickHouse; the two must agree, clamps included."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
from convergence_support import chat

from latencylens_collector.analysis.request_rows import (
    SPAN_COUNT_BITS,
    STAMP_BITS,
    STAMP_EPOCH_MS,
    row_version,
)
from latencylens_collector.analysis.row_work import TraceToBuild, build_rows
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.storage import trace_state
from latencylens_collector.storage.store import Store

S = 1_000_000_000
EPOCH_US = STAMP_EPOCH_MS * 1000


@pytest.mark.parametrize(
    ("spans", "last_insert_us"),
    [
        (1, EPOCH_US),  # the stamp's zero
        (5, 1_796_000_000_123_456),  # an insert in 2026: ms of it, µs dropped
        (5, 1_796_000_000_123_999),  # the same ms, rounded down, not to the nearest
        (0, 1_796_000_000_000_000),
        ((1 << SPAN_COUNT_BITS) - 1, 1_796_000_000_000_000),  # the largest count kept
        (1 << SPAN_COUNT_BITS, 1_796_000_000_000_000),  # clamped to it
        (10**12, 1_796_000_000_000_000),
        (3, EPOCH_US - 1),  # before 2020: the stamp clamps at 0
        (3, 946_684_800_000_000),  # 2000
        (3, EPOCH_US + ((1 << STAMP_BITS) - 1) * 1000),  # the largest stamp
        (3, EPOCH_US + (1 << STAMP_BITS) * 1000 + 7000),  # past it: clamped
    ],
)
def test_the_version_in_sql_is_row_version(store: Store, spans: int, last_insert_us: int) -> None:
    sql = (
        f"SELECT {trace_state._ROW_VERSION} AS version FROM (SELECT toUInt64({{spans:UInt64}}) AS spans, "
        "fromUnixTimestamp64Micro({us:Int64}, 'UTC') AS last_insert)"
    )
    (row,) = store.query(sql, {"spans": spans, "us": last_insert_us})
    assert int(row["version"]) == row_version(spans, last_insert_us)


def _right_row(store: Store, trace_id: bytes) -> dict[str, Any]:
    """The row the trace's stored spans give (what the collector wrote)."""
    stored = trace_state.stored_traces(store, [trace_id], "default")[trace_id]
    (row,) = build_rows([TraceToBuild(stored.spans, stored.last_insert_us)]).rows
    return dict(row)


def test_only_traces_whose_rows_are_not_right_come_back_with_their_live_starts(store: Store) -> None:
    rng = random.Random(11)
    base_ns = time.time_ns() - 120 * S
    right, unwritten, two_rows, other_version = (
        chat(rng, base_ns + index * S, "default") for index in range(4)
    )
    Ingestor(store).ingest([*right.spans, *two_rows.spans, *other_version.spans])
    store.insert_spans(unwritten.spans)  # stored; the collector stopped before its row
    ids = {
        name: trace.spans[0].trace_id
        for name, trace in (
            ("two_rows", two_rows),
            ("other_version", other_version),
            ("unwritten", unwritten),
        )
    }

    moved = _right_row(store, ids["two_rows"])
    moved_start = int(moved["start_time"]) - 5_000_000
    kept = _right_row(store, ids["other_version"])
    store.upsert_requests(
        [
            {**moved, "start_time": moved_start},  # a second live row, under another key
            {**kept, "version": int(kept["version"]) + 1},
        ]
    )

    until_us = store.now_ns() // 1000 + 1
    window = trace_state.Window(until_us - 3600 * 1_000_000, until_us)
    checked, live_starts = 0, {}
    for minute_s in trace_state.touched_minutes(store, window):
        found = trace_state.touched_to_rewrite(store, minute_s, window)
        checked += found.checked
        live_starts.update(found.live_starts)

    assert checked == 4
    right_start = int(_right_row(store, ids["two_rows"])["start_time"])
    assert {trace_id: sorted(starts) for (_, trace_id), starts in live_starts.items()} == {
        ids["unwritten"]: [],
        ids["two_rows"]: sorted([right_start, moved_start]),
        ids["other_version"]: [int(kept["start_time"])],
    }


def test_a_minute_with_no_trace_settled_in_the_window_gives_nothing_to_rewrite(store: Store) -> None:
    trace = chat(random.Random(12), time.time_ns() - 60 * S, "default")
    Ingestor(store).ingest(trace.spans)
    before_us = store.now_ns() // 1000 - 3600 * 1_000_000  # the window ends before the insert
    window = trace_state.Window(before_us - 3600 * 1_000_000, before_us)
    until_us = store.now_ns() // 1000 + 1
    minutes = trace_state.touched_minutes(store, trace_state.Window(until_us - 3600 * 1_000_000, until_us))
    assert minutes
    found = [trace_state.touched_to_rewrite(store, minute_s, window) for minute_s in minutes]
    assert [(each.checked, each.live_starts) for each in found] == [(0, {})] * len(minutes)
