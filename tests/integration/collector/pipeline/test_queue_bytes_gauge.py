"""/metrics shows what the queue holds in bytes (the bound that matters for memory), beside spans."""

from __future__ import annotations

from typing import Any

import httpx
from otlp_builders import chat_trace, post_protobuf, recent_base_ns

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.pipeline.queue import BoundedQueue, rows_bytes
from latencylens_collector.runtime.metrics import REGISTRY


def gauge() -> float | None:
    return REGISTRY.get_sample_value("latencylens_queue_bytes")


def test_the_gauge_follows_the_bytes_queued_and_taken() -> None:
    spans = [
        SpanRow(
            bytes(15) + b"\x01",
            (i + 1).to_bytes(8, "big"),
            bytes(8),
            "api",
            "s",
            "internal",
            "app",
            i,
            1,
            attributes={"payload": "x" * 100_000},
        )
        for i in range(3)
    ]
    queue = BoundedQueue(capacity_spans=100)
    queue.put(spans)
    assert gauge() == queue.bytes == rows_bytes(spans) > 300_000
    queue.take(100, linger_s=0, idle_timeout_s=0)
    assert gauge() == queue.bytes == 0


def test_metrics_lists_the_queue_bytes(collector: Any) -> None:
    assert post_protobuf(collector.url, chat_trace(recent_base_ns())).is_success
    text = httpx.get(f"{collector.url}/metrics").text
    assert "# TYPE latencylens_queue_bytes gauge" in text
    assert "latencylens_queue_bytes 0.0" in text  # the export was written: nothing waits
