"""What the receivers decoded, counted: OTLP/HTTP and OTLP/gRPC call this after decoding an export.

It belongs to intake, not to the pipeline: the counts are about decoding (rejected spans by reason,
content and span events dropped), and the pipeline only ever sees the spans that were kept.
"""

from __future__ import annotations

from latencylens_collector.intake.otlp import EVENTS_DROPPED, REASON_CODES, DecodedBatch
from latencylens_collector.runtime import metrics


def count_received(batch: DecodedBatch, protocol: str) -> None:
    """Metrics of one decoded export: spans received and rejected (by reason), content and events
    dropped."""
    metrics.SPANS_RECEIVED.labels(protocol=protocol).inc(len(batch.spans) + batch.rejected)
    for reason, count in batch.reasons.items():
        code = REASON_CODES.get(reason, "other")
        metrics.SPANS_REJECTED.labels(protocol=protocol, reason=code).inc(count)
    if batch.content.attributes or batch.content.bytes:
        metrics.CONTENT_DROPPED_ATTRIBUTES.labels(protocol=protocol).inc(batch.content.attributes)
        metrics.CONTENT_DROPPED_BYTES.labels(protocol=protocol).inc(batch.content.bytes)
    if batch.warnings.get(EVENTS_DROPPED):
        metrics.SPAN_EVENTS_DROPPED.labels(protocol=protocol).inc(batch.warnings[EVENTS_DROPPED])
