"""The pure rules that make request rows converge: versions, lost roots, tombstones (no store)."""

from __future__ import annotations

import random

from convergence_support import chat, lost_root, outer_root

from latencylens_collector.analysis.request_rows import (
    build_request_row,
    row_version,
    settled_root_start,
    span_node,
    top_most,
    trace_rows,
)

T0_US = 1_796_000_000_000_000
"""A stamp in µs (2026-11)."""
MS = 1_000_000


def test_a_version_ranks_span_count_above_any_stamp() -> None:
    # 4 spans seen an hour earlier beat 2 spans seen now: a collector's clock cannot reorder them.
    assert row_version(4, T0_US - 3_600_000_000) > row_version(2, T0_US)
    # The same spans: the later insert stamp (a span stored again) wins, at ms resolution.
    assert row_version(4, T0_US + 1000) > row_version(4, T0_US)
    assert row_version(4, T0_US + 999) == row_version(4, T0_US)
    # Counts saturate, stamps before 2020 count as 2020: never a wrap-around.
    assert row_version(10**9, 0) == row_version(2**22 - 1, 0) < 2**64
    assert row_version(1, 0) == 1 << 42


def test_a_trace_without_its_root_has_no_row_until_settled() -> None:
    trace = lost_root(random.Random(1), 1_796_000_000 * 10**9, "p")
    assert build_request_row(trace.spans) is None
    row = build_request_row(trace.spans, settled=True)
    assert row is not None
    top = trace.spans[0]  # the app's POST /chat, whose parent (a gateway) was never exported
    assert (row["root_missing"], row["start_time"], row["e2e_ns"], row["name"]) == (
        1,
        top.start_ns,
        top.duration_ns,
        "POST /chat",
    )
    # Below it, attribution as if it were the root: chat_trace's 1000 ms split as documented.
    assert (row["decode_ns"], row["tool_ns"], row["retrieval_ns"]) == (400 * MS, 50 * MS, 100 * MS)


def test_the_top_most_span_is_the_earliest_orphan() -> None:
    trace = lost_root(random.Random(2), 1_796_000_000 * 10**9, "p")
    root, retrieval, model, tool = trace.spans
    # Without the app's span, its three children are orphans: the earliest (retrieval, at 10 ms)
    # is the top-most, and that is where a settled row of just these spans is keyed.
    nodes = [span_node(row) for row in (model, tool, retrieval)]
    assert top_most(nodes).span_id == retrieval.span_id.hex()
    assert settled_root_start([model, tool, retrieval]) == retrieval.start_ns
    assert settled_root_start(trace.spans) == root.start_ns


def test_a_moved_root_leaves_a_tombstone_at_every_other_possible_key() -> None:
    trace = outer_root(random.Random(3), 1_796_000_000 * 10**9, "p")
    *app, proxy = trace.spans
    rows = trace_rows(trace.spans, version=7, stored_starts=[123])
    row, *tombstones = rows
    assert (row["start_time"], row["is_deleted"], row["version"], row["name"]) == (
        proxy.start_ns,
        0,
        7,
        "proxy",
    )
    # The app's root (parentless too: a computation without the proxy rooted there) and the
    # stored row's key, each deleted at the same version; nothing else.
    assert [(t["start_time"], t["is_deleted"], t["version"]) for t in tombstones] == [
        (123, 1, 7),
        (app[0].start_ns, 1, 7),
    ]
    assert all(t["trace_id"] == row["trace_id"] and t["computed_at"] == 0 for t in tombstones)


def test_a_whole_trace_writes_its_row_alone() -> None:
    trace = chat(random.Random(4), 1_796_000_000 * 10**9, "p")
    [row] = trace_rows(trace.spans, version=5, computed_at_us=T0_US)
    assert (row["version"], row["computed_at"], row["root_missing"], row["span_count"]) == (5, T0_US, 0, 4)
