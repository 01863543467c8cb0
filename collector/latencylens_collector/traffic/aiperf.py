"""AIPerf's per-request export (``profile_export.jsonl``) as LatencyLens spans of a replay run.

Each line of the export is a ``MetricRecordInfo``: ``metadata`` (``request_start_ns`` and
``request_end_ns``, epoch ns; ``conversation_id``, which is the mooncake ``session_id`` and so the
recorded request's trace id when the run used a trace LatencyLens exported), ``metrics`` (name →
``{"value", "unit"}``: ``time_to_first_token``, ``request_latency``, ``inter_token_latency``,
``input_sequence_length``, ``output_sequence_length``) and ``error``. A record becomes the two spans
an instrumented streamed call makes: a request root and a model call with the client-measured
first-content and last-chunk offsets and the token counts, both tagged with the run id, so the
collector attributes and compares it as it does a replay made by ``latencylens replay``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from latencylens import semconv
from latencylens_collector.traffic.runs import service_name

UNIT_NS: Final = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "sec": 1_000_000_000}
ROUTE: Final = "aiperf"
"""Root span name of imported records (AIPerf does not know the recorded route)."""


@dataclass(frozen=True)
class AiperfRecord:
    """What LatencyLens uses of one AIPerf record; durations in integer ns."""

    start_ns: int
    end_ns: int
    ttft_ns: int | None
    input_tokens: int | None
    output_tokens: int | None
    source_trace_id: str
    error: str | None


def _metric_ns(metrics: dict[str, Any], name: str) -> int | None:
    metric = metrics.get(name)
    if not isinstance(metric, dict) or metric.get("value") is None:
        return None
    unit = str(metric.get("unit", "ms"))
    if unit not in UNIT_NS:
        raise ValueError(f"{name}: unknown unit {unit!r}")
    return round(float(metric["value"]) * UNIT_NS[unit])


def _metric_int(metrics: dict[str, Any], name: str) -> int | None:
    metric = metrics.get(name)
    if not isinstance(metric, dict) or metric.get("value") is None:
        return None
    return int(metric["value"])


def read_profile_export(lines: Iterable[str]) -> list[AiperfRecord]:
    """Records of a ``profile_export.jsonl``; raises ValueError naming the first bad line."""
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            metadata = data["metadata"]
            metrics = data.get("metrics") or {}
            start = int(metadata["request_start_ns"])
            end = int(metadata["request_end_ns"])
            latency = _metric_ns(metrics, "request_latency")
            error = data.get("error")
            records.append(
                AiperfRecord(
                    start_ns=start,
                    end_ns=start + latency if latency is not None else end,
                    ttft_ns=_metric_ns(metrics, "time_to_first_token"),
                    input_tokens=_metric_int(metrics, "input_sequence_length"),
                    output_tokens=_metric_int(metrics, "output_sequence_length"),
                    source_trace_id=str(metadata.get("conversation_id") or ""),
                    error=None if not error else str(error.get("type") or "error"),
                )
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(
                f"line {number}: not an AIPerf per-request record ({type(exc).__name__}: {exc})"
            ) from None
        if records[-1].end_ns < records[-1].start_ns:
            raise ValueError(f"line {number}: the request ends before it starts")
    return records


def export_spans(
    records: Sequence[AiperfRecord],
    *,
    run_id: str,
    endpoint: str,
    headers: dict[str, str] | None = None,
    provider: str = "openai",
    model: str = "",
) -> int:
    """Send ``records`` as spans to the collector at ``endpoint`` (its base URL) over OTLP/HTTP,
    service ``replay-<run_id>``; returns how many records were sent."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import SpanKind, Status, StatusCode

    provider_ = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name(run_id)}))
    provider_.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces", headers=headers))
    )
    tracer = provider_.get_tracer("latencylens.replay.aiperf")
    for record in records:
        tags = {semconv.REPLAY_RUN_ID: run_id}
        if record.source_trace_id:
            tags[semconv.REPLAY_SOURCE_TRACE_ID] = record.source_trace_id
        root = tracer.start_span(
            ROUTE,
            kind=SpanKind.SERVER,
            start_time=record.start_ns,
            attributes={semconv.SPAN_KIND: semconv.KIND_REQUEST, **tags},
        )
        call = tracer.start_span(
            f"{semconv.OPERATION_CHAT} {model}".strip(),
            context=trace.set_span_in_context(root),
            kind=SpanKind.CLIENT,
            start_time=record.start_ns,
            attributes={**model_attributes(record, provider, model), **tags},
        )
        if record.error is not None:
            for span in (call, root):
                span.set_status(Status(StatusCode.ERROR, record.error))
                span.set_attribute(semconv.ERROR_TYPE, record.error)
        call.end(end_time=record.end_ns)
        root.end(end_time=record.end_ns)
    provider_.force_flush()
    provider_.shutdown()
    return len(records)


def model_attributes(record: AiperfRecord, provider: str, model: str) -> dict[str, Any]:
    """The attributes the SDK's model span would carry for this streamed call."""
    attributes: dict[str, Any] = {
        semconv.SPAN_KIND: semconv.KIND_MODEL,
        semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_CHAT,
        semconv.GEN_AI_PROVIDER_NAME: provider,
        semconv.GEN_AI_REQUEST_STREAM: True,
    }
    if model:
        attributes[semconv.GEN_AI_REQUEST_MODEL] = model
    if record.input_tokens is not None:
        attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] = record.input_tokens
    if record.output_tokens is not None:
        attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = record.output_tokens
    if record.ttft_ns is not None and record.error is None:
        attributes[semconv.STREAM_FIRST_CONTENT_NS] = record.ttft_ns
        attributes[semconv.STREAM_LAST_CHUNK_NS] = record.end_ns - record.start_ns
        attributes[semconv.STREAM_COMPLETED] = True
        attributes[semconv.STREAM_END_REASON] = "completed"
    return attributes


__all__ = ["ROUTE", "UNIT_NS", "AiperfRecord", "export_spans", "model_attributes", "read_profile_export"]
