"""Real OpenTelemetry exporters against a running collector: OTLP/HTTP protobuf, OTLP/HTTP JSON and
OTLP/gRPC, each acknowledged only once the spans are stored."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import grpc
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from opentelemetry.sdk.trace.export import SpanExportResult
from otlp_builders import (
    MS,
    chat_trace,
    export_request,
    new_span_id,
    post_protobuf,
    recent_base_ns,
    span,
    to_otlp_json,
)
from pipeline_helpers import grpc_target, metric, sent_while_the_writer_waits

from latencylens_collector import queries
from latencylens_collector.analysis.records import DEFAULT_PROJECT
from latencylens_collector.auth import KeyStore


def stored(collector, spans) -> int:
    trace_ids = {s.context.trace_id.to_bytes(16, "big") for s in spans}
    return len(collector.store.spans_of_traces(trace_ids))


def request_row(collector, spans) -> dict | None:
    trace_hex = spans[0].context.trace_id.to_bytes(16, "big").hex()
    detail = queries.request_detail(collector.store, DEFAULT_PROJECT, trace_hex)
    return None if detail is None else detail.model_dump()


def test_http_protobuf_exporter(collector) -> None:
    spans = chat_trace(recent_base_ns())
    exporter = HttpExporter(endpoint=f"{collector.url}/v1/traces")
    try:
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    # Acknowledged means written: spans and the request row are there without waiting.
    assert stored(collector, spans) == 4
    row = request_row(collector, spans)
    assert row is not None and row["e2e_ns"] == 1000 * MS


def test_http_json_from_the_official_encoder(collector) -> None:
    spans = chat_trace(recent_base_ns())
    body = json.dumps(to_otlp_json(export_request(spans)))  # encode_spans + json_format, hex ids
    response = httpx.post(
        f"{collector.url}/v1/traces", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 200
    assert response.json() == {}
    assert stored(collector, spans) == 4


def test_grpc_exporter(collector) -> None:
    spans = chat_trace(recent_base_ns())
    received_before = metric("latencylens_spans_received_total", protocol="grpc")
    exporter = GrpcExporter(endpoint=grpc_target(collector.url), insecure=True)
    try:
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert stored(collector, spans) == 4
    row = request_row(collector, spans)
    assert row is not None and row["span_count"] == 4
    assert metric("latencylens_spans_received_total", protocol="grpc") - received_before == 4


def test_grpc_partial_success_and_project(collector) -> None:
    base = recent_base_ns()
    good = chat_trace(base)
    backwards = span("backwards", good[0].context.trace_id, new_span_id(), None, base + 10 * MS, base)
    with grpc.insecure_channel(grpc_target(collector.url)) as channel:
        response = TraceServiceStub(channel).Export(
            export_request([*good, backwards]), metadata=(("authorization", "Bearer whatever"),), timeout=10
        )
    assert response.partial_success.rejected_spans == 1
    assert "ending before they start" in response.partial_success.error_message
    assert stored(collector, good) == 4
    # The project comes from resolve_project, as for HTTP: today every caller is the default one.
    trace_id = good[0].context.trace_id.to_bytes(16, "big")
    assert {row.project for row in collector.store.spans_of_traces([trace_id], project=DEFAULT_PROJECT)} == {
        DEFAULT_PROJECT
    }


def test_grpc_can_be_disabled(start_collector) -> None:
    running = start_collector(grpc_enabled=False)
    assert httpx.get(f"{running.url}/readyz").json()["grpc"] == "disabled"


def test_concurrent_exports_share_inserts(start_collector) -> None:
    """20 exports that wait for the writer together go in one insert, not 20. The test holds the
    writer (an export "being decoded": it lingers for those, up to the flush interval) until all
    20 are queued, so how fast the senders' threads start does not matter."""
    running = start_collector(flush_interval_ms=600_000)
    pipeline = running.service.app.state.pipeline
    inserts_before = metric("latencylens_batch_spans_count")
    traces = [chat_trace(recent_base_ns()) for _ in range(20)]
    with ThreadPoolExecutor(max_workers=20) as pool:
        send = lambda spans: post_protobuf(running.url, spans).status_code  # noqa: E731
        answers = sent_while_the_writer_waits(pool, pipeline, send, traces)
        assert [answer.result(timeout=60) for answer in answers] == [200] * 20
    assert metric("latencylens_batch_spans_count") - inserts_before == 1
    assert sum(stored(running, spans) for spans in traces) == 80


def test_grpc_uses_the_callers_api_key(start_collector, tmp_path) -> None:
    """gRPC resolves the project like HTTP: a key's spans land in its project; no key, no entry."""
    metadata_url = f"sqlite:///{tmp_path / 'metadata.db'}"
    keys = KeyStore(metadata_url)
    _, raw = keys.create("alpha")
    running = start_collector(metadata_url=metadata_url)
    spans = chat_trace(recent_base_ns())
    with grpc.insecure_channel(grpc_target(running.url)) as channel:
        stub = TraceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(export_request(spans), timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        stub.Export(export_request(spans), metadata=(("authorization", f"Bearer {raw}"),), timeout=10)
    trace_id = spans[0].context.trace_id.to_bytes(16, "big")
    assert len(running.store.spans_of_traces([trace_id], project="alpha")) == 4
    assert running.store.spans_of_traces([trace_id], project=DEFAULT_PROJECT) == []
    keys.close()
