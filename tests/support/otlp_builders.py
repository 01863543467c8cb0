"""Build OTLP export requests with the real OpenTelemetry SDK encoder, with exact ids and times."""

from __future__ import annotations

import base64
import json
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from latencylens import semconv

MS = 1_000_000
_rng = random.Random(1234)
SCOPE = InstrumentationScope("tests.collector")


def new_trace_id() -> int:
    return _rng.getrandbits(128) | 1


def new_span_id() -> int:
    return _rng.getrandbits(64) | 1


def recent_base_ns() -> int:
    """A start time a minute ago: inside the query API's default 24 h window."""
    return time.time_ns() - 60_000 * MS


def span(
    name: str,
    trace_id: int,
    span_id: int,
    parent_id: int | None,
    start_ns: int,
    end_ns: int,
    attributes: Mapping[str, Any] | None = None,
    service: str = "api",
    kind: SpanKind = SpanKind.INTERNAL,
    status: Status | None = None,
) -> ReadableSpan:
    context = SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1))
    parent = SpanContext(trace_id, parent_id, is_remote=False) if parent_id is not None else None
    return ReadableSpan(
        name=name,
        context=context,
        parent=parent,
        resource=Resource.create({SERVICE_NAME: service}),
        attributes=dict(attributes or {}),
        kind=kind,
        instrumentation_scope=SCOPE,
        status=status or Status(StatusCode.UNSET),
        start_time=start_ns,
        end_time=end_ns,
    )


def export_request(spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
    return encode_spans(spans)


def protobuf_body(spans: Sequence[ReadableSpan]) -> bytes:
    return export_request(spans).SerializeToString()


def to_otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON: protobuf JSON mapping, except that ids are hex strings."""
    document = json_format.MessageToDict(request)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for item in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in item:
                        item[key] = base64.b64decode(item[key]).hex()
    return document


def json_body(spans: Sequence[ReadableSpan]) -> bytes:
    return json.dumps(to_otlp_json(export_request(spans))).encode()


def post_protobuf(url: str, spans: Sequence[ReadableSpan]) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/traces",
        content=protobuf_body(spans),
        headers={"Content-Type": "application/x-protobuf"},
    )


def post_json(url: str, spans: Sequence[ReadableSpan]) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/traces", content=json_body(spans), headers={"Content-Type": "application/json"}
    )


def chat_trace(
    base_ns: int,
    trace_id: int | None = None,
    service: str = "api",
    model: str = "llama-3.3-70b",
    scale: int = 1,
) -> list[ReadableSpan]:
    """A request of 1000 ms × scale: retrieval, a streamed model call with reported server timing,
    then a tool call. Critical path (ms × scale): app_other 150, retrieval 100, network 230,
    queue 50, prefill 20, decode 400, tool 50."""
    trace_id = trace_id or new_trace_id()
    root, retrieval, model_call, tool = (new_span_id() for _ in range(4))

    def at(ms: int) -> int:
        return base_ns + ms * scale * MS

    return [
        span("POST /chat", trace_id, root, None, at(0), at(1000), service=service, kind=SpanKind.SERVER),
        span(
            "retrieve docs",
            trace_id,
            retrieval,
            root,
            at(10),
            at(110),
            {semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_RETRIEVAL},
            service=service,
        ),
        span(
            f"chat {model}",
            trace_id,
            model_call,
            root,
            at(200),
            at(900),
            {
                semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_CHAT,
                semconv.GEN_AI_PROVIDER_NAME: "groq",
                semconv.GEN_AI_REQUEST_MODEL: model,
                semconv.GEN_AI_RESPONSE_MODEL: model,
                semconv.GEN_AI_REQUEST_STREAM: True,
                semconv.GEN_AI_USAGE_INPUT_TOKENS: 500,
                semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 101,
                semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 100,
                semconv.PROVIDER_QUEUE_NS: 50 * scale * MS,
                semconv.PROVIDER_PREFILL_NS: 20 * scale * MS,
                semconv.PROVIDER_DECODE_NS: 400 * scale * MS,
                semconv.PROVIDER_SERVER_TOTAL_NS: 470 * scale * MS,
                semconv.STREAM_FIRST_CONTENT_NS: 300 * scale * MS,
                semconv.STREAM_LAST_CHUNK_NS: 700 * scale * MS,
            },
            service=service,
            kind=SpanKind.CLIENT,
        ),
        span(
            "execute_tool lookup",
            trace_id,
            tool,
            root,
            at(900),
            at(950),
            {semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_EXECUTE_TOOL},
            service=service,
        ),
    ]


EXPECTED_PARTS_MS = {
    "retrieval": 100,
    "tool": 50,
    "app_other": 150,
    "network": 230,
    "queue": 50,
    "prefill": 20,
    "decode": 400,
    "inference": 0,
    "server_other": 0,
    "model_unattributed": 0,
}
