"""A burst at 10× the sustained rate: the sender sees backpressure it can retry (429 + Retry-After,
RESOURCE_EXHAUSTED + RetryInfo), never an error it cannot, and nothing acknowledged is lost.

The queue is small (50 spans = 2½ exports) so the burst overflows it within a flush; the loops are
bounded in time and use loopback only.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import httpx
from google.rpc.error_details_pb2 import RetryInfo
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from otlp_builders import MS, export_request, new_span_id, new_trace_id, protobuf_body, recent_base_ns, span
from pipeline_helpers import grpc_target, span_counts

SPANS_PER_EXPORT = 20
SUSTAINED_S = 1.0
BURST_S = 2.0


def _export_spans() -> list:
    """20 spans of a fresh trace: a root and 19 children."""
    base, trace_id, root = recent_base_ns(), new_trace_id(), new_span_id()
    children = [
        span(f"step {i}", trace_id, new_span_id(), root, base + i * MS, base + (i + 1) * MS)
        for i in range(SPANS_PER_EXPORT - 1)
    ]
    return [span("root", trace_id, root, None, base, base + SPANS_PER_EXPORT * MS), *children]


async def _post(client: httpx.AsyncClient, url: str, spans: list) -> httpx.Response:
    return await client.post(
        f"{url}/v1/traces", content=protobuf_body(spans), headers={"Content-Type": "application/x-protobuf"}
    )


async def _sustained_rate(url: str) -> float:
    """Exports per second one sequential sender gets through."""
    done = 0
    async with httpx.AsyncClient(timeout=30) as client:
        started = time.monotonic()
        while time.monotonic() - started < SUSTAINED_S:
            assert (await _post(client, url, _export_spans())).status_code == 200
            done += 1
        return done / (time.monotonic() - started)


async def _burst(url: str, rate: float) -> list[tuple[httpx.Response, list]]:
    """Open loop: one export every 1/rate s for BURST_S, without waiting for answers."""
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=500)) as client:
        tasks = []
        started = time.monotonic()
        sent = 0
        while time.monotonic() - started < BURST_S:
            spans = _export_spans()
            tasks.append((asyncio.create_task(_post(client, url, spans)), spans))
            sent += 1
            await asyncio.sleep(max(0.0, started + sent / rate - time.monotonic()))
        return [(await task, spans) for task, spans in tasks]


def test_http_burst_gets_backpressure_and_loses_nothing(start_collector) -> None:
    collector = start_collector(max_queue_spans=50, flush_interval_ms=50)
    rate = asyncio.run(_sustained_rate(collector.url))
    sustained_spans = span_counts(collector.store)["final"]
    results = asyncio.run(_burst(collector.url, 10 * rate))

    statuses = [response.status_code for response, _ in results]
    assert set(statuses) <= {200, 429, 503}, set(statuses)
    throttled = [response for response, _ in results if response.status_code != 200]
    assert throttled, f"no backpressure at {10 * rate:.0f} exports/s"
    assert all(int(response.headers["retry-after"]) >= 1 for response in throttled)
    assert all("queue full" in response.content.decode(errors="replace") for response in throttled)
    acknowledged = sum(len(spans) for response, spans in results if response.status_code == 200)
    assert acknowledged > 0
    assert span_counts(collector.store)["final"] == sustained_spans + acknowledged
    assert httpx.get(f"{collector.url}/healthz").status_code == 200


def test_grpc_burst_gets_resource_exhausted_with_retry_info(start_collector) -> None:
    collector = start_collector(max_queue_spans=50, flush_interval_ms=50)
    batches = [_export_spans() for _ in range(40)]
    with grpc.insecure_channel(grpc_target(collector.url)) as channel:
        stub = TraceServiceStub(channel)

        def send(spans: list) -> grpc.StatusCode:
            try:
                stub.Export(export_request(spans), timeout=30)
                return grpc.StatusCode.OK
            except grpc.RpcError as error:
                trailers = dict(error.trailing_metadata() or ())
                info = RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
                assert info.retry_delay.seconds >= 1
                return error.code()

        with ThreadPoolExecutor(max_workers=16) as pool:
            codes = list(pool.map(send, batches))
    assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED}, set(codes)
    assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes
    acknowledged = sum(
        len(spans) for spans, code in zip(batches, codes, strict=True) if code == grpc.StatusCode.OK
    )
    assert span_counts(collector.store)["final"] == acknowledged
