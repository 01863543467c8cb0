"""An SDK given one endpoint for every signal (``OTEL_EXPORTER_OTLP_ENDPOINT``) sends its metrics
and logs to the collector too. They are answered with what to change, in a form OTLP exporters
do not retry (404 over HTTP, UNIMPLEMENTED over gRPC), and traces keep flowing beside them."""

from __future__ import annotations

import logging

import grpc
import httpx
import pytest
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2_grpc import LogsServiceStub
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2_grpc import MetricsServiceStub
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, PeriodicExportingMetricReader
from otlp_builders import chat_trace, post_protobuf, recent_base_ns
from pipeline_helpers import grpc_target, metric

NOT_FOUND = 5  # google.rpc.Code


def refused(protocol: str) -> float:
    return metric("latencylens_exports_refused_total", protocol=protocol, reason="not_traces")


@pytest.mark.parametrize("signal", ["metrics", "logs"])
def test_metrics_and_logs_over_http_are_404_saying_what_to_change(collector, signal: str) -> None:
    before = refused("http")
    response = httpx.post(
        f"{collector.url}/v1/{signal}", content=b"", headers={"Content-Type": "application/x-protobuf"}
    )
    assert response.status_code == 404
    status = status_pb2.Status.FromString(response.content)  # the request's encoding: protobuf
    assert status.code == NOT_FOUND
    assert f"receives traces only (POST /v1/traces), not {signal}" in status.message
    assert f"OTEL_{signal.upper()}_EXPORTER=none" in status.message
    response = httpx.post(
        f"{collector.url}/v1/{signal}", json={}, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 404
    assert response.json()["code"] == NOT_FOUND and "traces only" in response.json()["message"]
    assert refused("http") - before == 2
    # Traces are received as before.
    assert post_protobuf(collector.url, chat_trace(recent_base_ns())).status_code == 200


def _export_one_counter(exporter: MetricExporter) -> None:
    """A real MeterProvider exporting one counter through ``exporter`` (the reader's own timer is
    out of the way: a minute)."""
    provider = MeterProvider(metric_readers=[PeriodicExportingMetricReader(exporter, 60_000)])
    try:
        provider.get_meter("checkout").create_counter("orders").add(1)
        provider.force_flush()
    finally:
        provider.shutdown()


def test_the_sdks_http_metric_exporter_is_refused_without_retries(collector) -> None:
    before = refused("http")
    _export_one_counter(HttpMetricExporter(endpoint=f"{collector.url}/v1/metrics"))
    # Two exports (the flush, then shutdown's last collection), each answered once: no retries.
    # (This SDK logs the status line, "404 Not Found", not the body.)
    assert refused("http") - before == 2


def test_metrics_and_logs_over_grpc_are_unimplemented_saying_what_to_change(collector) -> None:
    before = refused("grpc")
    with grpc.insecure_channel(grpc_target(collector.url)) as channel:
        calls = (
            (
                "metrics",
                lambda: MetricsServiceStub(channel).Export(ExportMetricsServiceRequest(), timeout=10),
            ),
            ("logs", lambda: LogsServiceStub(channel).Export(ExportLogsServiceRequest(), timeout=10)),
        )
        for signal, call in calls:
            with pytest.raises(grpc.RpcError) as raised:
                call()
            assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
            assert (
                f"receives traces only (opentelemetry.proto.collector.trace.v1.TraceService), not {signal}"
                in (raised.value.details())
            )
    assert refused("grpc") - before == 2


def test_the_sdks_grpc_metric_exporter_logs_what_to_change_without_retries(
    collector, caplog: pytest.LogCaptureFixture
) -> None:
    before = refused("grpc")
    with caplog.at_level(logging.ERROR):
        _export_one_counter(GrpcMetricExporter(endpoint=grpc_target(collector.url), insecure=True))
    assert "OTEL_METRICS_EXPORTER=none" in caplog.text  # the exporter logs the status's details
    assert refused("grpc") - before == 2  # UNIMPLEMENTED is not retried
