"""Realistic OTLP/protobuf export bodies for the ingest benchmark, encoded once and re-stamped cheaply.

One trace is what a RAG chat endpoint sends: the request root (HTTP server attributes), a retrieval,
a tool call and two model calls with usage and provider timing (≈ 15 attributes per span on
average, like LLM spans in practice). A body holds :data:`TRACES_PER_BODY` traces (500 spans, close
to the SDK's 512-span export batch). Every trace id in a template starts with :data:`MARKER`;
:func:`stamp` swaps the marker for a fresh 8-byte counter, so each post carries new traces without
re-encoding (a byte replace of a 100 KB body costs microseconds).
"""

from __future__ import annotations

import functools
import itertools
import random
import struct
import time
from typing import Any, Final

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from latencylens import semconv

MARKER: Final = b"\xfe\xedLLbn\x00\x01"
"""First 8 bytes of every template trace id; appears nowhere else in a body."""
TRACES_PER_BODY: Final = 100
SPANS_PER_TRACE: Final = 5
_SERVICE: Final = "chat-api"
_stamps = itertools.count(1)


def _kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, bool):
        any_value = AnyValue(bool_value=value)
    elif isinstance(value, int):
        any_value = AnyValue(int_value=value)
    elif isinstance(value, float):
        any_value = AnyValue(double_value=value)
    elif isinstance(value, list):
        any_value = AnyValue()
        any_value.array_value.values.extend(AnyValue(string_value=item) for item in value)
    else:
        any_value = AnyValue(string_value=value)
    return KeyValue(key=key, value=any_value)


def _model_attributes(index: int) -> dict[str, Any]:
    return {
        semconv.SPAN_KIND: semconv.KIND_MODEL,
        semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_CHAT,
        semconv.GEN_AI_PROVIDER_NAME: "groq",
        semconv.GEN_AI_REQUEST_MODEL: "llama-3.3-70b-versatile",
        semconv.GEN_AI_RESPONSE_MODEL: "llama-3.3-70b-versatile",
        semconv.GEN_AI_RESPONSE_ID: f"chatcmpl-{index:08x}",
        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["stop"],
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 1200 + index % 800,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 200 + index % 300,
        semconv.GEN_AI_REQUEST_STREAM: False,
        semconv.PROVIDER_QUEUE_NS: 41_905_864,
        semconv.PROVIDER_PREFILL_NS: 3_940_145,
        semconv.PROVIDER_DECODE_NS: 652_230_333,
        semconv.PROVIDER_SERVER_TOTAL_NS: 698_076_342,
        semconv.PROVENANCE_QUEUE: semconv.SOURCE_REPORTED,
        semconv.PROVENANCE_PREFILL: semconv.SOURCE_REPORTED,
        semconv.PROVENANCE_DECODE: semconv.SOURCE_REPORTED,
        semconv.PROVENANCE_SERVER_TOTAL: semconv.SOURCE_DERIVED,
        semconv.PROVIDER_FIELDS_REPORTED: [
            "usage.prompt_tokens",
            "usage.completion_tokens",
            "usage.queue_time",
        ],
    }


def _trace_spans(trace_index: int, base_ns: int) -> list[Span]:
    trace_id = MARKER + struct.pack(">Q", trace_index)
    root_id = struct.pack(">Q", trace_index * 8 + 1)
    start = base_ns + trace_index * 1_000_000
    root = Span(
        trace_id=trace_id,
        span_id=root_id,
        name="POST /chat",
        kind=Span.SPAN_KIND_SERVER,
        start_time_unix_nano=start,
        end_time_unix_nano=start + 1_500_000_000,
    )
    root.attributes.extend(
        _kv(k, v)
        for k, v in {
            semconv.SPAN_KIND: semconv.KIND_REQUEST,
            "http.request.method": "POST",
            "http.route": "/chat",
            "url.path": "/chat",
            "url.scheme": "https",
            "http.response.status_code": 200,
            "server.address": "chat.example.com",
            "user_agent.original": "python-httpx/0.28.1",
            "client.address": "10.0.3.17",
            "network.protocol.version": "1.1",
            "http.request.body.size": 2817,
            "http.response.body.size": 1934,
        }.items()
    )
    children = []
    # (name, kind, offset ms, duration ms, attributes)
    plan: list[tuple[str, Any, int, int, dict[str, Any]]] = [
        (
            "retrieval docs",
            Span.SPAN_KIND_INTERNAL,
            5,
            120,
            {
                semconv.SPAN_KIND: semconv.KIND_RETRIEVAL,
                semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_RETRIEVAL,
                semconv.GEN_AI_DATA_SOURCE_ID: "docs",
                "db.system.name": "qdrant",
                "db.collection.name": "docs",
                "db.operation.name": "search",
                "code.function.name": "app.rag.search_docs",
                "code.file.path": "/srv/app/rag.py",
                "code.line.number": 88,
            },
        ),
        ("chat llama-3.3-70b-versatile", Span.SPAN_KIND_CLIENT, 130, 700, _model_attributes(trace_index)),
        (
            "execute_tool lookup",
            Span.SPAN_KIND_INTERNAL,
            835,
            60,
            {
                semconv.SPAN_KIND: semconv.KIND_TOOL,
                semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_EXECUTE_TOOL,
                semconv.GEN_AI_TOOL_NAME: "lookup",
                "gen_ai.tool.call.id": f"call_{trace_index:06d}",
                "gen_ai.tool.type": "function",
                "code.function.name": "app.tools.lookup",
                "code.file.path": "/srv/app/tools.py",
                "code.line.number": 41,
            },
        ),
        ("chat llama-3.3-70b-versatile", Span.SPAN_KIND_CLIENT, 900, 590, _model_attributes(trace_index + 1)),
    ]
    for number, (name, kind, offset_ms, duration_ms, attributes) in enumerate(plan, start=2):
        span = Span(
            trace_id=trace_id,
            span_id=struct.pack(">Q", trace_index * 8 + number),
            parent_span_id=root_id,
            name=name,
            kind=kind,
            start_time_unix_nano=start + offset_ms * 1_000_000,
            end_time_unix_nano=start + (offset_ms + duration_ms) * 1_000_000,
        )
        span.attributes.extend(_kv(k, v) for k, v in attributes.items())
        children.append(span)
    return [root, *children]


def templates(count: int, base_ns: int | None = None) -> list[bytes]:
    """``count`` distinct bodies of :data:`TRACES_PER_BODY` traces each, starting near ``base_ns``."""
    base = base_ns if base_ns is not None else time.time_ns() - 3_600 * 1_000_000_000
    bodies = []
    for body_index in range(count):
        request = ExportTraceServiceRequest()
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.extend(
            [
                _kv("service.name", _SERVICE),
                _kv("service.version", "1.4.2"),
                _kv("deployment.environment.name", "production"),
                _kv("telemetry.sdk.language", "python"),
                _kv("telemetry.sdk.name", "opentelemetry"),
                _kv("telemetry.sdk.version", "1.39.1"),
                _kv("host.name", "chat-api-7d9f8b6c5-x2x4q"),
            ]
        )
        scope_spans = resource_spans.scope_spans.add()
        scope_spans.scope.name = "latencylens"
        for trace_index in range(body_index * TRACES_PER_BODY, (body_index + 1) * TRACES_PER_BODY):
            scope_spans.spans.extend(_trace_spans(trace_index, base))
        body = request.SerializeToString()
        assert body.count(MARKER) == TRACES_PER_BODY * SPANS_PER_TRACE
        bodies.append(body)
    return bodies


def stamp(template: bytes) -> bytes:
    """``template`` with new trace ids (unique within this process). They ascend: the first 8 bytes
    of every id in a body are one counter, so each body's traces sort after the last body's, where
    SDKs make random ids (:func:`stamp_random`; ``bench read_back`` and ``bench ingest_ids`` say
    what that changes)."""
    return template.replace(MARKER, struct.pack(">Q", (0xA1 << 56) | (next(_stamps) << 8)))


def stamp_random(template: bytes) -> bytes:
    """``template`` with new trace ids as SDKs make them: each trace's first 8 bytes random (its
    last 8 are its index in the templates), so a body's traces scatter over the key of ``spans``."""
    body = bytearray(template)
    for offsets in _trace_offsets(template):
        high = random.randbytes(8)
        for offset in offsets:
            body[offset : offset + 8] = high
    return bytes(body)


@functools.cache
def _trace_offsets(template: bytes) -> tuple[tuple[int, ...], ...]:
    """Where each trace's :data:`MARKER` is in ``template``, per trace (one per span)."""
    found: dict[bytes, list[int]] = {}
    at = template.find(MARKER)
    while at >= 0:
        found.setdefault(template[at + 8 : at + 16], []).append(at)
        at = template.find(MARKER, at + 1)
    return tuple(tuple(offsets) for offsets in found.values())


SPANS_PER_BODY: Final = TRACES_PER_BODY * SPANS_PER_TRACE
