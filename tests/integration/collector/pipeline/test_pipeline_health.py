"""/healthz, /readyz and /metrics of the ingest side."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import httpx
from otlp_builders import chat_trace, new_span_id, post_protobuf, recent_base_ns, span
from pipeline_helpers import metric


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_healthz(collector) -> None:
    response = httpx.get(f"{collector.url}/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_ready_on_storage(collector) -> None:
    response = httpx.get(f"{collector.url}/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert (body["writes_to"], body["storage"], body["migrations"], body["spool"]) == (
        "storage",
        "ok",
        "applied",
        "writable",
    )
    assert body["grpc"].startswith("listening on 127.0.0.1:")


def test_ready_on_spool_when_storage_is_down(start_collector: Callable, tmp_path: Path) -> None:
    down = start_collector(
        clickhouse_dsn=f"http://default:@127.0.0.1:{_closed_port()}/", spool_dir=str(tmp_path)
    )
    body = httpx.get(f"{down.url}/readyz").json()
    assert (body["status"], body["writes_to"], body["migrations"], body["spool"]) == (
        "ready",
        "spool",
        "pending",
        "writable",
    )
    assert body["storage"] == "unreachable"  # the address and driver text go to the log only
    spooled_before = metric("latencylens_spans_spooled_total")
    assert post_protobuf(down.url, chat_trace(recent_base_ns())).status_code == 200
    assert metric("latencylens_spans_spooled_total") - spooled_before == 4
    assert httpx.get(f"{down.url}/readyz").json()["spool_pending_spans"] == 4


def test_not_ready_without_storage_or_spool(start_collector: Callable) -> None:
    down = start_collector(clickhouse_dsn=f"http://default:@127.0.0.1:{_closed_port()}/", spool_dir="off")
    response = httpx.get(f"{down.url}/readyz")
    assert response.status_code == 503
    body = response.json()
    assert (body["status"], body["writes_to"], body["spool"]) == ("not ready", "nowhere", "disabled")
    assert httpx.get(f"{down.url}/healthz").status_code == 200  # alive, just not ready


def test_metrics_count_the_pipeline(collector) -> None:
    names = (
        "latencylens_spans_received_total",
        "latencylens_spans_rejected_total",
        "latencylens_spans_written_total",
        "latencylens_spans_spooled_total",
        "latencylens_queue_depth",
        "latencylens_insert_duration_seconds_bucket",
        "latencylens_exports_refused_total",
    )
    before = {
        "received": metric("latencylens_spans_received_total", protocol="http"),
        "rejected": metric("latencylens_spans_rejected_total", protocol="http", reason="end_before_start"),
        "written": metric("latencylens_spans_written_total", source="direct"),
        "inserts": metric("latencylens_insert_duration_seconds_count"),
        "refused": metric(
            "latencylens_exports_refused_total", protocol="http", reason="unsupported_media_type"
        ),
    }
    base = recent_base_ns()
    good = chat_trace(base)
    backwards = span("backwards", good[0].context.trace_id, new_span_id(), None, base + 10, base)
    assert post_protobuf(collector.url, [*good, backwards]).status_code == 200
    assert httpx.post(f"{collector.url}/v1/traces", content=b"x").status_code == 415

    text = httpx.get(f"{collector.url}/metrics").text
    for name in names:
        assert name in text, name
    # 5 spans received, 1 rejected (ends before it starts), 4 written in 1 insert, 1 export refused.
    assert metric("latencylens_spans_received_total", protocol="http") - before["received"] == 5
    assert (
        metric("latencylens_spans_rejected_total", protocol="http", reason="end_before_start")
        - before["rejected"]
        == 1
    )
    assert metric("latencylens_spans_written_total", source="direct") - before["written"] == 4
    assert metric("latencylens_insert_duration_seconds_count") - before["inserts"] == 1
    assert (
        metric("latencylens_exports_refused_total", protocol="http", reason="unsupported_media_type")
        - before["refused"]
        == 1
    )
    assert metric("latencylens_queue_depth") == 0
