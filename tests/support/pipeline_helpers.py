"""Helpers for the ingest-pipeline tests: gRPC port of a running collector, exact span counts,
projects' exports and what each project has stored."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from typing import Any

import httpx
from otlp_builders import chat_trace, protobuf_body, recent_base_ns

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.intake.otlp import Limits
from latencylens_collector.pipeline import Pipeline
from latencylens_collector.storage.otlp_sql import BodyLimits
from latencylens_collector.storage.store import Store

BASE = 1_700_000_000_000_000_000
MS = 1_000_000


def chat_body(traces: int) -> bytes:
    """An OTLP/protobuf export body of ``traces`` recent chat traces (four spans each)."""
    base = recent_base_ns()
    return protobuf_body([span for i in range(traces) for span in chat_trace(base + i * MS)])


def body_limits() -> BodyLimits:
    """The default limits, as a receiver hands them to the engine with a body."""
    defaults = Limits()
    return BodyLimits(
        now_ns=time.time_ns(),
        max_attribute_bytes=defaults.max_attribute_bytes,
        max_span_bytes=defaults.max_span_bytes,
        store_content=defaults.store_content,
        content_max_bytes=defaults.max_content_bytes,
    )


def export(project: str, number: int, spans: int = 10) -> list[SpanRow]:
    """One trace of ``spans`` spans (a root and its children) of ``project``, numbered ``number``."""
    trace_id = f"{project}:{number}".encode().ljust(16, b".")
    return [
        SpanRow(
            trace_id,
            (i + 1).to_bytes(8, "big"),
            bytes(8) if i == 0 else (1).to_bytes(8, "big"),
            "api",
            f"step {i}",
            "internal",
            "app",
            BASE + number * 1000 * MS + i * MS,
            MS,
            project=project,
        )
        for i in range(spans)
    ]


ENGINE_OUTCOMES = ("stored", "not_plain", "no_verdict", "refused", "failed")
"""Every outcome of ``latencylens_engine_bodies_total``."""


def engine_bodies() -> dict[str, float]:
    """``latencylens_engine_bodies_total`` of this process, by outcome."""
    return {
        outcome: metric("latencylens_engine_bodies_total", outcome=outcome) for outcome in ENGINE_OUTCOMES
    }


def grpc_target(url: str) -> str:
    """``host:port`` of the collector's OTLP/gRPC receiver, as /readyz reports it."""
    status = httpx.get(f"{url}/readyz").json()["grpc"]
    match = re.fullmatch(r"listening on (.+)", status)
    assert match, status
    return match.group(1)


def span_counts(store: Store) -> dict[str, int]:
    """Rows in ``spans``: plain, FINAL and distinct (project, trace, span) keys."""
    db = store.database
    [row] = store.query(
        f"SELECT (SELECT count() FROM {db}.spans) AS plain, (SELECT count() FROM {db}.spans FINAL) AS final, "
        f"(SELECT uniqExact(project, trace_id, span_id) FROM {db}.spans) AS distinct_keys"
    )
    return {key: int(value) for key, value in row.items()}


def metric(name: str, **labels: str) -> float:
    from latencylens_collector.runtime.metrics import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


def wait_until(predicate: Callable[[], Any], timeout_s: float = 20.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it is truthy (a bounded wait for the writer thread)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def sent_while_the_writer_waits(
    pool: Executor, pipeline: Pipeline, send: Callable[[Any], Any], exports: Sequence[Any]
) -> list[Future[Any]]:
    """``send`` each export from ``pool`` while the writer is held (an export "being decoded":
    the writer lingers for it, up to the flush interval, unless a whole batch is queued; so start
    the collector with a long interval and batch limits that hold every export), and let the
    writer go once all of them are queued: whatever the senders' timing, they reach the writer
    together. None may be answered before that (an answer means stored)."""
    with pipeline.decoding():
        answers = [pool.submit(send, data) for data in exports]
        wait_until(
            lambda: pipeline.queue.exports == len(exports), 60, f"all {len(exports)} exports to be queued"
        )
        assert not any(answer.done() for answer in answers)  # none is answered before it is stored
    return answers


def stored_spans_by_project(store: Store) -> dict[str, int]:
    """Each project's stored spans."""
    return {
        row["project"]: int(row["spans"])
        for row in store.query(
            f"SELECT project, count() AS spans FROM {store.database}.spans FINAL GROUP BY project"
        )
    }


def row_spans_by_project(store: Store) -> dict[str, int]:
    """Each project's request rows' span counts, summed (one row per trace here)."""
    return {
        row["project"]: int(row["spans"])
        for row in store.query(
            f"SELECT project, sum(span_count) AS spans FROM {store.database}.requests FINAL "
            "WHERE is_deleted = 0 GROUP BY project"
        )
    }
