"""Every class of bad input, table-driven: the right status, a message that says what was wrong,
the valid spans of the same batch kept, and the service still answering."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from dataclasses import dataclass

import grpc
import httpx
import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from otlp_builders import chat_trace, export_request, recent_base_ns, to_otlp_json
from pipeline_helpers import grpc_target

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
DAY_NS = 86_400 * 1_000_000_000
LIMIT = 1024  # max_attribute_bytes of the collector under test


@dataclass(frozen=True)
class Case:
    """An export of the 4-span chat trace plus one spoiled copy of its root (``extra``)."""

    name: str
    content_type: str | None
    status: int
    message: str
    kept: int
    """Spans of the batch stored afterwards."""
    body: Callable[[], bytes]
    headers: tuple[tuple[str, str], ...] = ()


def _with_extra(spoil: Callable[[object], None]) -> Callable[[], bytes]:
    """Protobuf body: the good trace plus a copy of its root with a new span id, spoiled."""

    def build() -> bytes:
        request = export_request(TRACE)
        spans = request.resource_spans[0].scope_spans[0].spans
        extra = spans.add()
        extra.CopyFrom(spans[0])
        extra.span_id = b"\x0e" * 8
        spoil(extra)
        return request.SerializeToString()

    return build


def _json_with_extra(spoil: Callable[[dict], None]) -> Callable[[], bytes]:
    def build() -> bytes:
        document = to_otlp_json(export_request(TRACE))
        spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
        extra = json.loads(json.dumps(spans[0]))
        extra["spanId"] = "0e" * 8
        spoil(extra)
        spans.append(extra)
        return json.dumps(document).encode()

    return build


def _set(**values: object) -> Callable[[object], None]:
    def spoil(span: object) -> None:
        for key, value in values.items():
            setattr(span, key, value)

    return spoil


def _huge_attribute(span) -> None:
    attribute = span.attributes.add()
    attribute.key = "note"  # not message content (that is dropped whole)
    attribute.value.string_value = "é" * 600_000  # 1.2 MB of UTF-8


def _not_utf8(body: bytes) -> bytes:
    """Replace the marker name by bytes that are not UTF-8 (same length, so the framing holds)."""
    assert body.count(b"MARKERNAME") == 1
    return body.replace(b"MARKERNAME", b"bad\xff\xfe\xfdname")


def _future(span) -> None:
    span.start_time_unix_nano = _now() + 30 * DAY_NS
    span.end_time_unix_nano = span.start_time_unix_nano + 1


def _now() -> int:
    import time

    return time.time_ns()


TRACE = chat_trace(recent_base_ns())

CASES = [
    Case("malformed protobuf", PROTOBUF, 400, "not a protobuf", 0, lambda: b"\x0a\xff\xff\xff\xff\x0f"),
    Case("malformed JSON", JSON, 400, "not valid JSON", 0, lambda: b'{"resourceSpans": [oops'),
    Case(
        "JSON not OTLP",
        JSON,
        400,
        "scopeSpans must be an array",
        0,
        lambda: b'{"resourceSpans": [{"scopeSpans": 5}]}',
    ),
    Case("wrong content type", "text/plain", 415, "application/x-protobuf", 0, lambda: b"{}"),
    Case("missing content type", None, 415, "unsupported Content-Type none", 0, lambda: b"{}"),
    Case(
        "gzip that is not gzip",
        PROTOBUF,
        400,
        "not valid gzip",
        0,
        lambda: b"plain",
        (("Content-Encoding", "gzip"),),
    ),
    Case("body over the limit", PROTOBUF, 413, "larger than 2000000 bytes", 0, lambda: b"\x00" * 3_000_000),
    Case(
        "gzip bomb",
        PROTOBUF,
        413,
        "after decompression",
        0,
        lambda: gzip.compress(b"\x00" * 5_000_000),
        (("Content-Encoding", "gzip"),),
    ),
    Case(
        "zero trace id", PROTOBUF, 200, "1 with an invalid trace id", 4, _with_extra(_set(trace_id=bytes(16)))
    ),
    Case(
        "short span id", PROTOBUF, 200, "1 with an invalid span id", 4, _with_extra(_set(span_id=b"\x01\x02"))
    ),
    Case(
        "bad parent id", PROTOBUF, 200, "invalid parent span id", 4, _with_extra(_set(parent_span_id=b"\x01"))
    ),
    Case(
        "non-hex JSON id",
        JSON,
        200,
        "1 with an invalid span id",
        4,
        _json_with_extra(lambda s: s.update(spanId="zz")),
    ),
    Case(
        "start before 1970 (0)",
        PROTOBUF,
        200,
        "at or before the Unix epoch",
        4,
        _with_extra(_set(start_time_unix_nano=0)),
    ),
    Case(
        "negative JSON time",
        JSON,
        200,
        "at or before the Unix epoch",
        4,
        _json_with_extra(lambda s: s.update(startTimeUnixNano="-5000")),
    ),
    Case("far future", PROTOBUF, 200, "more than 24 h in the future", 4, _with_extra(_future)),
    Case(
        "ends before start",
        PROTOBUF,
        200,
        "ending before they start",
        4,
        _with_extra(_set(end_time_unix_nano=1)),
    ),
    Case(
        "non-UTF-8 protobuf string",
        PROTOBUF,
        200,
        "1 strings with invalid UTF-8",
        5,
        lambda: _not_utf8(_with_extra(_set(name="MARKERNAME"))()),
    ),
    Case(
        "non-UTF-8 JSON bytes",
        JSON,
        200,
        "strings with invalid UTF-8",
        5,
        lambda: _not_utf8(_json_with_extra(lambda s: s.update(name="MARKERNAME"))()),
    ),
    Case(
        "lone surrogate in JSON",
        JSON,
        200,
        "1 strings with invalid UTF-8",
        5,
        lambda: _json_with_extra(lambda s: s.update(name="MARKERNAME"))().replace(b"MARKERNAME", b"\\ud800x"),
    ),
    Case("megabyte attribute", PROTOBUF, 200, "1 values truncated", 5, _with_extra(_huge_attribute)),
]


@pytest.fixture
def collector_for_table(start_collector):
    """A collector with a 2 MB body limit and a 1 KiB attribute limit."""
    return start_collector(max_body_bytes=2_000_000, max_attribute_bytes=LIMIT)


def _message(response: httpx.Response, as_json: bool) -> str:
    if response.status_code == 200:
        if as_json:
            return str(response.json().get("partialSuccess", {}).get("errorMessage", ""))
        return ExportTraceServiceResponse.FromString(response.content).partial_success.error_message
    if as_json:
        return str(response.json()["message"])
    return status_pb2.Status.FromString(response.content).message


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input(collector_for_table, case: Case) -> None:
    collector = collector_for_table
    headers = dict(case.headers)
    if case.content_type:
        headers["Content-Type"] = case.content_type
    response = httpx.post(f"{collector.url}/v1/traces", content=case.body(), headers=headers, timeout=30)
    assert response.status_code == case.status, response.content[:300]
    as_json = case.content_type == JSON or case.content_type not in (PROTOBUF,)
    assert case.message in _message(response, as_json)
    trace_id = TRACE[0].context.trace_id.to_bytes(16, "big")
    kept = collector.store.spans_of_traces([trace_id])
    assert len(kept) == case.kept
    assert httpx.get(f"{collector.url}/healthz").json() == {"status": "ok"}
    if case.name == "megabyte attribute":
        [extra] = [row for row in kept if row.span_id == b"\x0e" * 8]
        value = extra.attributes["note"]
        # 1024 bytes of "é" (2 bytes each) = 512 characters; 1_200_000 − 1024 bytes dropped.
        assert value == "é" * 512 + "…[truncated 1198976 bytes]"
    if "UTF-8" in case.message:
        [extra] = [row for row in kept if row.span_id == b"\x0e" * 8]
        assert "\ufffd" in extra.name


def test_grpc_bad_input(collector_for_table) -> None:
    """Over gRPC: undecodable → INVALID_ARGUMENT with the reason; non-UTF-8 repaired and kept."""
    collector = collector_for_table
    with grpc.insecure_channel(grpc_target(collector.url)) as channel:
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=lambda body: body,
            response_deserializer=ExportTraceServiceResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as raised:
            export(b"\x0a\xff\xff\xff\xff\x0f", timeout=10)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "not a protobuf" in raised.value.details()
        response = export(_not_utf8(_with_extra(_set(name="MARKERNAME"))()), timeout=10)
        assert response.partial_success.rejected_spans == 0
        assert "strings with invalid UTF-8" in response.partial_success.error_message
        typed = TraceServiceStub(channel).Export(ExportTraceServiceRequest(), timeout=10)
        assert not typed.HasField("partial_success")
    trace_id = TRACE[0].context.trace_id.to_bytes(16, "big")
    assert len(collector.store.spans_of_traces([trace_id])) == 5
