"""A trace past the per-trace span cap: stored whole, its row says ``too_large`` and is attributed
from the spans under the cap and its root only, so its cost is bounded by the cap."""

from __future__ import annotations

from typing import Any

import httpx
from otlp_builders import MS, new_span_id, new_trace_id, post_protobuf, recent_base_ns, span

from latencylens import semconv
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.request_rows import (
    TRACE_PROVENANCE,
    TRACE_TOO_LARGE,
    attributable,
    build_request_row,
)
from latencylens_collector.pipeline.admission import TraceCap
from latencylens_collector.pipeline.reconciler import Reconciler

CAP = 5


def _tool_trace(children: int) -> tuple[int, list[Any]]:
    """A 1 s root (exported last, as an SDK does: it ends last) over ``children`` tool spans of
    50 ms one after another from its start."""
    base = recent_base_ns()
    trace, root = new_trace_id(), new_span_id()
    spans = [
        span(
            f"tool {i}",
            trace,
            new_span_id(),
            root,
            base + i * 50 * MS,
            base + (i + 1) * 50 * MS,
            {semconv.SPAN_KIND: semconv.KIND_TOOL},
        )
        for i in range(children)
    ]
    spans.append(span("POST /agent", trace, root, None, base, base + 1000 * MS))
    return trace, spans


def test_the_row_of_a_trace_past_the_cap_says_so_and_counts_every_span(start_collector: Any) -> None:
    collector = start_collector(max_trace_spans=CAP)
    trace, spans = _tool_trace(11)
    assert post_protobuf(collector.url, spans).is_success
    detail = httpx.get(f"{collector.url}/api/requests/{trace:032x}").json()
    assert detail["provenance"][TRACE_PROVENANCE] == TRACE_TOO_LARGE
    assert detail["span_count"] == 12  # every span stored and counted
    # The first CAP spans of the export (tools 0-4) are attributed: 5 × 50 ms of tool; the six
    # marked tools are left out, so their time is the root's own: 1000 − 250 = 750 ms app_other.
    assert detail["parts"]["tool"] == 250 * MS
    assert detail["parts"]["app_other"] == 750 * MS
    assert sum(detail["parts"].values()) == detail["e2e_ns"] == 1000 * MS
    # The span tree still shows every span, the marked ones with their mark.
    tree = detail["spans"][0]
    assert len(tree["children"]) == 11
    marked = [child for child in tree["children"] if child["attributes"].get(semconv.TRACE_TOO_LARGE)]
    assert len(marked) == 6


def test_a_trace_under_the_cap_is_attributed_whole_without_the_mark(start_collector: Any) -> None:
    collector = start_collector(max_trace_spans=CAP)
    trace, spans = _tool_trace(CAP - 1)
    assert post_protobuf(collector.url, spans).is_success
    detail = httpx.get(f"{collector.url}/api/requests/{trace:032x}").json()
    assert TRACE_PROVENANCE not in detail["provenance"]
    assert detail["parts"]["tool"] == (CAP - 1) * 50 * MS


def test_a_trace_past_the_cap_in_pieces_is_not_read_back_per_piece(start_collector: Any) -> None:
    collector = start_collector(max_trace_spans=CAP)
    trace, spans = _tool_trace(11)
    rows_sql = (
        f"SELECT span_count, provenance FROM {collector.store.table('requests')} FINAL "
        "WHERE trace_id = unhex({t:String}) AND is_deleted = 0"
    )
    # The first piece (4 tools, under the cap, no root yet) has no row; the second (7 tools, the
    # root) is past the cap: read back per piece it would be; here it is left to the reconciler.
    assert post_protobuf(collector.url, spans[:4]).is_success
    assert post_protobuf(collector.url, spans[4:]).is_success
    assert collector.store.query(rows_sql, {"t": f"{trace:032x}"}) == []
    Reconciler(collector.store, settle_s=0, lookback_s=3600).run_once()
    [row] = collector.store.query(rows_sql, {"t": f"{trace:032x}"})
    assert row["span_count"] == 12
    assert dict(row["provenance"])[TRACE_PROVENANCE] == TRACE_TOO_LARGE


def _rows(count: int, cap: int) -> list[SpanRow]:
    trace, root = b"\x01" * 16, (1).to_bytes(8, "big")
    rows = [
        SpanRow(
            trace_id=trace,
            span_id=(i + 2).to_bytes(8, "big"),
            parent_span_id=(i + 1).to_bytes(8, "big") if i else root,
            service="s",
            name=f"s{i}",
            span_kind="internal",
            kind="other",
            start_ns=i,
            duration_ns=10 * count - 2 * i,
        )
        for i in range(count)
    ]
    rows.append(SpanRow(trace, root, bytes(8), "s", "root", "server", "request", 0, 10 * count + 1))
    marked, _ = TraceCap(cap).admit(rows)
    return marked


def test_attribution_of_a_huge_trace_reads_the_cap_and_the_root_only() -> None:
    # A chain of 50,000 spans (the deep chain, larger): admitted with a cap of 1,000, the
    # row builder's attribution, conventions and tree walks see 1,000 spans plus the root.
    rows = _rows(50_000, 1_000)
    kept, too_large = attributable(rows)
    assert too_large and len(kept) == 1_001
    assert kept[-1].name == "root"
    row = build_request_row(rows)
    assert row is not None
    assert row["span_count"] == 50_001
    assert row["provenance"][TRACE_PROVENANCE] == TRACE_TOO_LARGE
    assert row["app_other_ns"] == row["e2e_ns"] == 10 * 50_000 + 1
