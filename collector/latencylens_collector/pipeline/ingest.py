"""From stored spans to one attributed row per request.

Every batch recomputes the rows of the traces it touched from *all* their stored spans, so spans
arriving late (children after the root, a slow service's export) simply produce a newer row; the
``requests`` table keeps the latest computation. Traces the batch holds whole (the common case)
are computed from the batch itself, without reading them back. Row building is plain functions over
:class:`SpanRow` values, testable without ClickHouse.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from latencylens_collector.analysis.attribution import (
    COMPONENTS,
    KIND_MODEL,
    ModelTiming,
    RequestBreakdown,
    SpanNode,
    attribute_request,
)
from latencylens_collector.analysis.conventions import (
    TOKEN_KEYS,
    first_int,
    model_name,
    model_timing,
    provider_name,
    resolve_trace,
    usage_estimated,
)
from latencylens_collector.analysis.records import STATUS_ERROR, SpanRow
from latencylens_collector.storage.store import Store

Clock = Callable[[], int]
"""Returns the current time in integer ns since the epoch."""


def span_hex(span_id: bytes) -> str:
    return span_id.hex()


def span_node(row: SpanRow) -> SpanNode:
    return SpanNode(
        span_id=span_hex(row.span_id),
        parent_id=span_hex(row.parent_span_id) if row.has_parent else None,
        start_ns=row.start_ns,
        end_ns=row.end_ns,
        kind=row.kind,
        timing=model_timing(row.attributes) if row.kind == KIND_MODEL else None,
    )


def attribute(spans: Sequence[SpanRow]) -> RequestBreakdown | None:
    """Attribution of one trace's spans (None while its root has not arrived)."""
    return _attribute_resolved(resolve_trace(spans))


def _attribute_resolved(spans: Sequence[SpanRow]) -> RequestBreakdown | None:
    return attribute_request([span_node(row) for row in spans])


def build_request_row(spans: Sequence[SpanRow], computed_at_us: int) -> dict[str, Any] | None:
    """The ``requests`` row of one trace, or None when its root span is not stored yet."""
    spans = resolve_trace(spans)  # other instrumentations' names and server spans, read once
    nodes = [span_node(row) for row in spans]
    breakdown = attribute_request(nodes)
    if breakdown is None:
        return None
    root = next(row for row, node in zip(spans, nodes, strict=True) if node.span_id == breakdown.root_span_id)
    models = [(row, node) for row, node in zip(spans, nodes, strict=True) if row.kind == KIND_MODEL]
    primary = _primary_model(models, breakdown)
    primary_row = primary[0] if primary else None
    row: dict[str, Any] = {
        "project": root.project,
        "trace_id": root.trace_id,
        "start_time": root.start_ns,
        "e2e_ns": breakdown.e2e_ns,
        "service": root.service,
        "name": root.name,
        "model": model_name(primary_row.attributes) if primary_row else "",
        "provider": provider_name(primary_row.attributes) if primary_row else "",
        "status_error": int(root.status_code == STATUS_ERROR),
        "provenance": dict(breakdown.provenance),
        "inconsistent": int(breakdown.inconsistent),
        "model_calls": len(models),
        "span_count": len(spans),
        "computed_at": computed_at_us,
    }
    for name in COMPONENTS:
        row[f"{name}_ns"] = breakdown.parts[name]
        row[f"busy_{name}_ns"] = breakdown.busy[name]
    row.update(token_totals([model for model, _ in models]))
    row.update(stream_metrics(primary_row, primary[1].timing if primary else None))
    return row


def _primary_model(
    models: Sequence[tuple[SpanRow, SpanNode]], breakdown: RequestBreakdown
) -> tuple[SpanRow, SpanNode] | None:
    """The model call that owns the most critical-path time (ties: the longer call)."""
    if not models:
        return None
    critical = breakdown.span_critical_ns
    return max(models, key=lambda pair: (critical.get(pair[1].span_id, 0), pair[0].duration_ns))


def token_totals(models: Sequence[SpanRow]) -> dict[str, Any]:
    """Token counts summed over model calls. A count some call did not report is unknown (None),
    never 0; ``tokens_estimated`` is 1 when a call's counts are an instrumentation's estimate."""
    totals: dict[str, Any] = {}
    for column, keys in TOKEN_KEYS.items():
        counts = [first_int(row.attributes, *keys) for row in models]
        known = [count for count in counts if count is not None]
        totals[column] = sum(known) if len(known) == len(counts) else None
    totals["tokens_estimated"] = int(any(usage_estimated(row.attributes) for row in models))
    return totals


def stream_metrics(primary: SpanRow | None, timing: ModelTiming | None = None) -> dict[str, Any]:
    """TTFT, inter-token latency and decode rate of the primary model call (its own output tokens).

    ``timing``: the call's :func:`model_timing`, when the caller has it already."""
    metrics: dict[str, Any] = {"ttft_ns": None, "itl_ns": None, "decode_tokens_per_second": None}
    if primary is None:
        return metrics
    attrs = primary.attributes
    timing = timing or model_timing(attrs)
    # An estimated count (OpenLIT's characters / 2) would make ITL and the rate up: use none.
    output = 0 if usage_estimated(attrs) else first_int(attrs, *TOKEN_KEYS["output_tokens"]) or 0
    first, last = timing.first_content_ns, timing.last_chunk_ns
    metrics["ttft_ns"] = first
    streamed_ns = last - first if first is not None and last is not None and last >= first else None
    if streamed_ns is not None and output > 1:
        metrics["itl_ns"] = streamed_ns // (output - 1)
    from latencylens import semconv  # the SDK's own ITL also covers streams whose usage never came

    reported_itl = first_int(attrs, semconv.STREAM_ITL_NS)
    if metrics["itl_ns"] is None and reported_itl is not None:
        metrics["itl_ns"] = reported_itl
    decode_ns = timing.decode_ns if timing.decode_ns is not None else streamed_ns
    if decode_ns and decode_ns > 0 and output > 0:
        metrics["decode_tokens_per_second"] = output / (decode_ns / 1e9)
    return metrics


class Ingestor:
    """Stores span batches and recomputes the request rows of the traces they touch.

    Rewriting a batch is harmless: spans collapse by (project, trace_id, span_id) and each request
    row is recomputed from all stored spans of its trace, so a replayed batch yields the same row.
    """

    def __init__(self, store: Store, clock: Clock = time.time_ns) -> None:
        self.store = store
        self.clock = clock
        # Serialises insert → read back → write within this process, so two batches of one trace
        # cannot write their rows out of order. Across processes, computed_at (taken before the
        # read) orders them: a later read sees at least as many spans.
        self._lock = threading.Lock()

    def ingest(self, spans: Sequence[SpanRow], dedup_token: str | None = None) -> int:
        """Insert spans in one insert, then rewrite the request rows of their traces; returns how
        many request rows were (re)written. Raises StorageError.

        After the insert, one cheap count per project (key columns only) says which traces have
        nothing stored but this batch's spans: their rows are built from the batch in memory. Only
        traces with other spans stored (late spans, replays) are read back, in one query."""
        if not spans:
            return 0
        with self._lock:
            self.store.ensure_ready()
            self.store.insert_spans(spans, dedup_token=dedup_token)
            by_project: dict[str, dict[bytes, list[SpanRow]]] = defaultdict(lambda: defaultdict(list))
            for span in spans:
                by_project[span.project][span.trace_id].append(span)
            rows = []
            for project, batch_traces in by_project.items():
                computed_at_us = self.clock() // 1000
                for trace_spans in self._whole_traces(project, batch_traces):
                    row = build_request_row(trace_spans, computed_at_us)
                    if row is not None:
                        rows.append(row)
            self.store.upsert_requests(rows)
            return len(rows)

    def _whole_traces(self, project: str, batch: dict[bytes, list[SpanRow]]) -> list[list[SpanRow]]:
        """Every stored span of each trace in ``batch`` (grouped by trace, in read-back order).

        A trace whose stored row count equals its number of distinct span ids in the batch holds
        exactly the batch's spans (the insert put each of them there), so it is taken from memory;
        any other trace is read back."""
        counts = self.store.stored_span_counts(batch, project=project)
        whole: list[list[SpanRow]] = []
        read_back: list[bytes] = []
        for trace_id, trace_spans in batch.items():
            distinct = {span.span_id for span in trace_spans}
            if len(distinct) == len(trace_spans) == counts.get(trace_id, 0):
                whole.append(sorted(trace_spans, key=_stored_order))
            else:
                read_back.append(trace_id)
        if read_back:
            stored = self.store.spans_of_traces(read_back, project=project, for_requests=True)
            whole.extend(group_by_trace(stored).values())
        return whole


def _stored_order(span: SpanRow) -> tuple[int, bytes]:
    """The order :meth:`Store.spans_of_traces` returns spans in."""
    return span.start_ns, span.span_id


def group_by_trace(spans: Sequence[SpanRow]) -> dict[bytes, list[SpanRow]]:
    grouped: dict[bytes, list[SpanRow]] = defaultdict(list)
    for span in spans:
        grouped[span.trace_id].append(span)
    return grouped
