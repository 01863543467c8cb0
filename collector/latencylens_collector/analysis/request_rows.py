"""From one trace's spans to its attributed ``requests`` row: plain functions over :class:`SpanRow`.

Pure (no I/O), so the write path (:mod:`latencylens_collector.pipeline.ingest`), the explanation of
one request (:mod:`latencylens_collector.queries.explain`) and tests build rows the same way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Final

from latencylens import semconv
from latencylens.streamstats import inter_token_latency_ns
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
    return attribute_request([span_node(row) for row in resolve_trace(spans)])


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
    if primary_row is not None and row["ttft_ns"] is not None:
        # Where the TTFT came from: measured by a client, or reported by a server (vLLM's span).
        source = primary_row.attributes.get(semconv.PROVENANCE_TTFT, semconv.SOURCE_MEASURED)
        row["provenance"][TTFT_PROVENANCE] = source
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


TTFT_PROVENANCE: Final = "ttft"
"""Key of a row's ``provenance`` map saying where its ``ttft_ns`` came from (beside the components)."""


def stream_metrics(primary: SpanRow | None, timing: ModelTiming | None = None) -> dict[str, Any]:
    """TTFT, inter-token latency and decode rate of the primary model call (its own output tokens).

    ITL is the SDK's own definition (:func:`latencylens.streamstats.inter_token_latency_ns`), so a
    row and the span's ``latencylens.stream.itl_ns`` agree; that attribute is used when the output
    count is unknown (a stream whose usage never came). ``timing``: the call's
    :func:`model_timing`, when the caller has it already."""
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
    if first is not None and last is not None:
        metrics["itl_ns"] = inter_token_latency_ns(first, last, output)
    if metrics["itl_ns"] is None:
        metrics["itl_ns"] = first_int(attrs, semconv.STREAM_ITL_NS)
    decode_ns = timing.decode_ns if timing.decode_ns is not None else streamed_ns
    if decode_ns and decode_ns > 0 and output > 0:
        metrics["decode_tokens_per_second"] = output / (decode_ns / 1e9)
    return metrics


def group_by_trace(spans: Sequence[SpanRow]) -> dict[bytes, list[SpanRow]]:
    grouped: dict[bytes, list[SpanRow]] = defaultdict(list)
    for span in spans:
        grouped[span.trace_id].append(span)
    return grouped
