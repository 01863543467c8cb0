"""From one trace's spans to its attributed ``requests`` row: plain functions over :class:`SpanRow`.

Pure (no I/O), so the write path (:mod:`latencylens_collector.pipeline.ingest`), the reconciler
(:mod:`latencylens_collector.pipeline.reconciler`), the explanation of one request
(:mod:`latencylens_collector.queries.explain`) and tests build rows the same way.

Convergence (docs/deployment.md, "Consistency"). Several collectors may compute a trace's row from
different subsets of its spans, in any order. Three rules make the stored result the row of all
spans, whatever the order:

* **A row's version says what it saw** (:func:`row_version`): the number of distinct spans, then
  the latest insert time of those spans as ClickHouse stamped it. A computation that saw a superset
  of another's spans has a version at least as high, never lower; no collector clock is involved.
* **Lost roots.** Once a trace is settled, a trace without a parentless span is rooted at its
  top-most received span (earliest start among spans whose parent is missing) and flagged
  ``root_missing``; before that it has no row, as its root may still come.
* **One trace, one row.** ``requests`` is keyed by ``start_time``, so a row rooted elsewhere lives
  under another key. Every computation also writes a tombstone (``is_deleted = 1``, same version)
  under each key another computation could have used: the start of every span that is, or could
  have been, a root. ``ReplacingMergeTree(version, is_deleted)`` read with ``FINAL`` then shows one
  row per trace: the one with the highest version.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Sequence
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
    find_root,
)
from latencylens_collector.analysis.conventions import (
    first_int,
    model_name,
    model_timing,
    provider_name,
    resolve_trace,
    usage_estimated,
)
from latencylens_collector.analysis.conventions.reading import (
    CACHE_READ_TOKEN_KEYS,
    INPUT_TOKEN_KEYS,
    OUTPUT_TOKEN_KEYS,
)
from latencylens_collector.analysis.conventions.values import MAX_INT
from latencylens_collector.analysis.costs import CallUsage, Prices, request_cost
from latencylens_collector.analysis.records import NO_PARENT, REQUEST_COLUMNS, STATUS_ERROR, SpanRow

SPAN_COUNT_BITS: Final = 22
"""High bits of a version: distinct spans seen (saturating at 4,194,303)."""
STAMP_BITS: Final = 64 - SPAN_COUNT_BITS
"""Low bits: the latest span insert stamp, in ms since :data:`STAMP_EPOCH_MS` (139 years)."""
STAMP_EPOCH_MS: Final = 1_577_836_800_000
"""2020-01-01T00:00:00Z: stamps count from here."""


def row_version(span_count: int, last_insert_us: int) -> int:
    """The ``version`` of a row computed from ``span_count`` distinct spans whose latest insert
    ClickHouse stamped at ``last_insert_us`` (µs since the epoch, the server's ``now64``).

    Ordered by span count first: a computation that saw more of the trace wins, whatever the
    clocks. Among computations of as many spans (the same spans, once the trace is whole) the one
    that saw the later insert wins, so a span stored again with other content takes effect."""
    count = min(max(span_count, 0), (1 << SPAN_COUNT_BITS) - 1)
    stamp = min(max(last_insert_us // 1000 - STAMP_EPOCH_MS, 0), (1 << STAMP_BITS) - 1)
    return count << STAMP_BITS | stamp


def span_hex(span_id: bytes) -> str:
    return span_id.hex()


def span_node(row: SpanRow) -> SpanNode:
    # Built for every span of every trace: SpanRow's properties and span_hex are inlined.
    parent, start, kind = row.parent_span_id, row.start_ns, row.kind
    return SpanNode(
        span_id=row.span_id.hex(),
        parent_id=parent.hex() if parent != NO_PARENT else None,
        start_ns=start,
        end_ns=start + row.duration_ns,
        kind=kind,
        timing=model_timing(row.attributes) if kind == KIND_MODEL else None,
    )


_COMPONENT_COLUMNS: Final = tuple((name, f"{name}_ns", f"busy_{name}_ns") for name in COMPONENTS)
"""Each component with its critical-path and busy columns."""

TOO_LARGE_MARK: Final = "true"
"""Value of ``latencylens.trace.too_large`` on the spans a trace was admitted past its span cap."""
TRACE_PROVENANCE: Final = "trace"
"""Key of a row's ``provenance`` map that, set to :data:`TRACE_TOO_LARGE`, says the trace was too
large to attribute whole."""
TRACE_TOO_LARGE: Final = "too_large"


def attributable(spans: Sequence[SpanRow]) -> tuple[Sequence[SpanRow], bool]:
    """The spans attribution reads, and whether the trace is too large: a trace with spans marked
    ``latencylens.trace.too_large`` is attributed from its spans admitted under the cap and its
    parentless ones (the root usually ends, so arrives, last), so the work per trace is bounded by
    the cap (``max_trace_spans``) whatever the trace holds. Linear."""
    key = semconv.TRACE_TOO_LARGE
    if not any(row.attributes.get(key) == TOO_LARGE_MARK for row in spans):
        return spans, False
    return [row for row in spans if not row.has_parent or row.attributes.get(key) != TOO_LARGE_MARK], True


def attribute(spans: Sequence[SpanRow]) -> RequestBreakdown | None:
    """Attribution of one trace's spans (None while its root has not arrived); of a trace too
    large, of its :func:`attributable` spans, as its row."""
    kept, _ = attributable(spans)
    return attribute_request([span_node(row) for row in resolve_trace(kept)])


def build_request_row(
    spans: Sequence[SpanRow],
    computed_at_us: int = 0,
    *,
    version: int = 0,
    settled: bool = False,
    prices: Prices | None = None,
) -> dict[str, Any] | None:
    """The ``requests`` row of one trace, or None while it has no root.

    Without a parentless span the trace has no row, unless ``settled`` (its spans have stopped
    arriving): then it is rooted at its top-most received span and flagged ``root_missing``. A
    trace too large (:func:`attributable`) says so in its provenance (``trace: too_large``); its
    ``span_count`` counts every span. Its cost is priced at ``prices`` (default: the process's
    configured prices, :func:`~latencylens_collector.analysis.costs.use_prices`)."""
    kept, too_large = attributable(spans)
    return _build(resolve_trace(kept), computed_at_us, version, settled, len(spans), too_large, prices)


def _build(
    spans: Sequence[SpanRow],
    computed_at_us: int,
    version: int,
    settled: bool,
    span_count: int,
    too_large: bool = False,
    prices: Prices | None = None,
) -> dict[str, Any] | None:
    """:func:`build_request_row` of spans already resolved (:func:`resolve_trace`)."""
    nodes = [span_node(row) for row in spans]
    root_missing = settled and not any(node.parent_id is None for node in nodes)
    if root_missing and nodes:
        lost = top_most(nodes)
        nodes = [dataclasses.replace(node, parent_id=None) if node is lost else node for node in nodes]
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
        "span_count": span_count,
        "computed_at": computed_at_us,
        "version": version,
        "is_deleted": 0,
        "root_missing": int(root_missing),
    }
    if too_large:
        row["provenance"][TRACE_PROVENANCE] = TRACE_TOO_LARGE
    parts, busy = breakdown.parts, breakdown.busy
    for name, column, busy_column in _COMPONENT_COLUMNS:
        row[column] = parts[name]
        row[busy_column] = busy[name]
    usages = [call_usage(model) for model, _ in models]
    row.update(token_totals(usages))
    cost = request_cost(usages, root.start_ns, prices)
    row["cost_nano_usd"], row["price_version"] = _bounded(cost.nano_usd), cost.price_version
    row.update(stream_metrics(primary_row, primary[1].timing if primary else None))
    if primary_row is not None and row["ttft_ns"] is not None:
        # Where the TTFT came from: measured by a client, or reported by a server (vLLM's span).
        source = primary_row.attributes.get(semconv.PROVENANCE_TTFT, semconv.SOURCE_MEASURED)
        row["provenance"][TTFT_PROVENANCE] = source
    return row


def top_most(nodes: Sequence[SpanNode]) -> SpanNode:
    """The span a trace without its root is rooted at: the earliest start among spans whose parent
    is missing (ties: the longer span, then the smaller id); in a parent cycle, the earliest span."""
    ids = {node.span_id for node in nodes}
    orphans = [node for node in nodes if node.parent_id is None or node.parent_id not in ids] or list(nodes)
    return min(orphans, key=lambda node: (node.start_ns, node.start_ns - node.end_ns, node.span_id))


def settled_root_start(spans: Sequence[SpanRow]) -> int | None:
    """The start time a settled computation of exactly ``spans`` keys its row by (its root's, or
    its top-most span's when the root is missing); None without spans. The write path tombstones
    it when a batch adds to a stored trace: a row of the earlier spans may be stored there."""
    nodes = [span_node(row) for row in resolve_trace(attributable(spans)[0])]
    root = find_root(nodes) or (top_most(nodes) if nodes else None)
    return root.start_ns if root is not None else None


def root_candidate_starts(spans: Sequence[SpanRow]) -> set[int]:
    """Start times of every span some computation of this trace may have rooted its row at: spans
    without a parent or whose parent is not among ``spans``, as received and as resolved."""
    return _orphan_starts(spans) | _orphan_starts(resolve_trace(attributable(spans)[0]))


def _orphan_starts(spans: Sequence[SpanRow]) -> set[int]:
    ids = {row.span_id for row in spans}
    return {row.start_ns for row in spans if not row.has_parent or row.parent_span_id not in ids}


def tombstone(project: str, trace_id: bytes, start_ns: int, version: int) -> dict[str, Any]:
    """A row that deletes, under ``FINAL``, any row of the trace at this start time with a lower
    version (a row rooted where this computation did not root it). Its ``computed_at`` is 0, so
    a read of the newest ``computed_at`` never prefers it to a row."""
    row: dict[str, Any] = dict.fromkeys(REQUEST_COLUMNS, 0)
    row.update(
        project=project,
        trace_id=trace_id,
        start_time=start_ns,
        service="",
        name="",
        model="",
        provider="",
        provenance={},
        input_tokens=None,
        output_tokens=None,
        cache_read_input_tokens=None,
        ttft_ns=None,
        itl_ns=None,
        decode_tokens_per_second=None,
        cost_nano_usd=None,
        price_version="",
        computed_at=0,
        version=version,
        is_deleted=1,
    )
    return row


def trace_rows(
    spans: Sequence[SpanRow],
    *,
    version: int,
    computed_at_us: int = 0,
    settled: bool = False,
    stored_starts: Iterable[int] = (),
    prices: Prices | None = None,
) -> list[dict[str, Any]]:
    """What to write for one trace: its row (when it has one) and a tombstone under every other
    key a row of it may be stored at (:func:`root_candidate_starts`, and ``stored_starts``: where
    rows of it were read), all at ``version``. Empty while the trace has no row. The row's cost is
    priced at ``prices`` (default: the process's configured prices), so the write path and the
    reconciler price a trace alike."""
    kept, too_large = attributable(spans)
    resolved = resolve_trace(kept)
    row = _build(resolved, computed_at_us, version, settled, len(spans), too_large, prices)
    if row is None:
        return []
    candidates = _orphan_starts(spans) | _orphan_starts(resolved)  # root_candidate_starts, resolved once
    others = (candidates | set(stored_starts)) - {row["start_time"]}
    tombstones = [
        tombstone(row["project"], row["trace_id"], start_ns, version) for start_ns in sorted(others)
    ]
    return [row, *tombstones]


def _primary_model(
    models: Sequence[tuple[SpanRow, SpanNode]], breakdown: RequestBreakdown
) -> tuple[SpanRow, SpanNode] | None:
    """The model call that owns the most critical-path time (ties: the longer call)."""
    if not models:
        return None
    critical = breakdown.span_critical_ns
    return max(models, key=lambda pair: (critical.get(pair[1].span_id, 0), pair[0].duration_ns))


def token_totals(usages: Sequence[CallUsage]) -> dict[str, Any]:
    """Token counts summed over model calls (their :func:`call_usage`). A count some call did not
    report is unknown (None), never 0; ``tokens_estimated`` is 1 when a call's counts are an
    instrumentation's estimate."""
    return {
        "input_tokens": _total(usage.input_tokens for usage in usages),
        "output_tokens": _total(usage.output_tokens for usage in usages),
        "cache_read_input_tokens": _total(usage.cached_tokens for usage in usages),
        "tokens_estimated": int(any(usage.estimated for usage in usages)),
    }


def _total(counts: Iterable[int | None]) -> int | None:
    total = 0
    for count in counts:
        if count is None:
            return None
        total += count
    return _bounded(total)


def _bounded(value: int | None) -> int | None:
    """``value`` when a row's Int64 column holds it with room to add up, else unknown: a sum of
    counts each read within :data:`MAX_INT` (or their cost) can still pass it, and one value out of
    range would fail the insert of every row beside it."""
    return value if value is None or -MAX_INT <= value <= MAX_INT else None


def call_usage(model: SpanRow) -> CallUsage:
    """A model call's provider, model and reported token counts, for pricing."""
    attrs = model.attributes
    return CallUsage(
        provider=provider_name(attrs),
        model=model_name(attrs),
        input_tokens=first_int(attrs, *INPUT_TOKEN_KEYS),
        cached_tokens=first_int(attrs, *CACHE_READ_TOKEN_KEYS),
        output_tokens=first_int(attrs, *OUTPUT_TOKEN_KEYS),
        estimated=usage_estimated(attrs),
    )


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
    output = 0 if usage_estimated(attrs) else first_int(attrs, *OUTPUT_TOKEN_KEYS) or 0
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
