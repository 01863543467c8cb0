"""POST /v1/traces against a running collector: good input, bad input, and storage down."""

from __future__ import annotations

import gzip
import json
import socket
from collections.abc import Callable

import httpx
import pytest
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult
from otlp_builders import (
    chat_trace,
    export_request,
    json_body,
    new_span_id,
    new_trace_id,
    post_json,
    post_protobuf,
    protobuf_body,
    recent_base_ns,
    span,
)

from latencylens_collector.storage.store import StorageUnavailable

PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}


def assert_still_serving(url: str) -> None:
    assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}


def stored_span_count(collector, spans) -> int:
    trace_ids = {s.context.trace_id.to_bytes(16, "big") for s in spans}
    return len(collector.store.spans_of_traces(trace_ids))


def test_protobuf_export_is_stored(collector) -> None:
    spans = chat_trace(recent_base_ns())
    response = post_protobuf(collector.url, spans)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-protobuf"
    decoded = ExportTraceServiceResponse.FromString(response.content)
    assert not decoded.HasField("partial_success")
    assert stored_span_count(collector, spans) == 4


def test_json_export_is_stored(collector) -> None:
    spans = chat_trace(recent_base_ns())
    response = post_json(collector.url, spans)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {}
    assert stored_span_count(collector, spans) == 4


def test_gzip_body(collector) -> None:
    spans = chat_trace(recent_base_ns())
    response = httpx.post(
        f"{collector.url}/v1/traces",
        content=gzip.compress(protobuf_body(spans)),
        headers={**PROTOBUF, "Content-Encoding": "gzip"},
    )
    assert response.status_code == 200
    assert stored_span_count(collector, spans) == 4


def test_the_sdk_exporter_talks_to_the_collector(collector) -> None:
    spans = chat_trace(recent_base_ns())
    exporter = OTLPSpanExporter(endpoint=f"{collector.url}/v1/traces")
    try:
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert stored_span_count(collector, spans) == 4


def test_garbage_protobuf_is_400(collector) -> None:
    response = httpx.post(f"{collector.url}/v1/traces", content=b"not a protobuf \xff\xfe", headers=PROTOBUF)
    assert response.status_code == 400
    status = status_pb2.Status.FromString(response.content)
    assert "protobuf" in status.message
    assert_still_serving(collector.url)


def test_invalid_json_is_400(collector) -> None:
    response = httpx.post(f"{collector.url}/v1/traces", content=b"{oops", headers=JSON)
    assert response.status_code == 400
    assert response.json()["code"] == 3
    assert "not valid JSON" in response.json()["message"]
    assert_still_serving(collector.url)


@pytest.mark.parametrize("content_type", ["text/plain", None, "application/xml"])
def test_unsupported_content_type_is_415(collector, content_type: str | None) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    response = httpx.post(f"{collector.url}/v1/traces", content=b"{}", headers=headers)
    assert response.status_code == 415
    message = response.json()["message"]
    assert "application/x-protobuf" in message
    assert "application/json" in message
    assert_still_serving(collector.url)


def test_unsupported_content_encoding_is_415(collector) -> None:
    response = httpx.post(
        f"{collector.url}/v1/traces", content=b"{}", headers={**JSON, "Content-Encoding": "br"}
    )
    assert response.status_code == 415
    assert "Content-Encoding" in response.json()["message"]


def test_oversize_body_is_413(start_collector: Callable) -> None:
    small = start_collector(max_body_bytes=2000)
    response = httpx.post(f"{small.url}/v1/traces", content=b"\x00" * 5000, headers=PROTOBUF)
    assert response.status_code == 413
    assert "2000 bytes" in status_pb2.Status.FromString(response.content).message
    # A small gzip body that inflates past the limit is refused too.
    bomb = gzip.compress(b"\x00" * 1_000_000)
    assert len(bomb) < 2000
    response = httpx.post(
        f"{small.url}/v1/traces", content=bomb, headers={**PROTOBUF, "Content-Encoding": "gzip"}
    )
    assert response.status_code == 413
    assert_still_serving(small.url)


def test_invalid_gzip_is_400(collector) -> None:
    response = httpx.post(
        f"{collector.url}/v1/traces", content=b"not gzip", headers={**JSON, "Content-Encoding": "gzip"}
    )
    assert response.status_code == 400
    assert "gzip" in response.json()["message"]


def test_invalid_spans_are_rejected_and_valid_ones_stored(collector) -> None:
    good = chat_trace(recent_base_ns())
    base = recent_base_ns()
    bad_trace = new_trace_id()
    backwards = span("backwards", bad_trace, new_span_id(), None, base + 10, base)
    request = export_request([*good, backwards])
    zero = request.resource_spans[0].scope_spans[0].spans.add()
    zero.CopyFrom(request.resource_spans[0].scope_spans[0].spans[0])
    zero.trace_id = bytes(16)

    response = httpx.post(f"{collector.url}/v1/traces", content=request.SerializeToString(), headers=PROTOBUF)
    assert response.status_code == 200
    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert partial.rejected_spans == 2
    assert "invalid trace id" in partial.error_message
    assert stored_span_count(collector, good) == 4
    assert collector.store.spans_of_traces([bad_trace.to_bytes(16, "big")]) == []

    document = json.loads(json_body(good))
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "00" * 16
    response = httpx.post(f"{collector.url}/v1/traces", content=json.dumps(document), headers=JSON)
    assert response.status_code == 200
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert_still_serving(collector.url)


def test_empty_export_is_accepted(collector) -> None:
    response = httpx.post(f"{collector.url}/v1/traces", content=b"", headers=PROTOBUF)
    assert response.status_code == 200


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_storage_down_is_503_and_the_service_stays_up(start_collector: Callable) -> None:
    # Without a spool nothing can take the batch: 503. (With one it is spooled: test_pipeline_fault.)
    down = start_collector(clickhouse_dsn=f"http://default:@127.0.0.1:{_closed_port()}/", spool_dir="off")
    response = post_protobuf(down.url, chat_trace(recent_base_ns()))
    assert response.status_code == 503
    assert response.headers["retry-after"]
    assert "unavailable" in status_pb2.Status.FromString(response.content).message
    queried = httpx.get(f"{down.url}/api/requests")
    assert queried.status_code == 503
    assert queried.headers["retry-after"]
    assert_still_serving(down.url)
    with pytest.raises(StorageUnavailable, match=r"127\.0\.0\.1"):
        down.store.migrate()
