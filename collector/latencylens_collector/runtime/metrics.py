"""The service's own Prometheus metrics: one registry of process health, no project in it.

Each part of the service defines its counters here, labelled only with fixed words (protocol,
reason, source), so anyone may read them. Per-project data (latency histograms, SLO state) is
computed at scrape time elsewhere (:mod:`latencylens_collector.slo.exposition`) and served by
``GET /metrics`` to the project's own key only (:mod:`latencylens_collector.api.routes.metrics`).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)
"""The service's registry (not the process-global default, so tests can build several apps)."""

# --- ingest pipeline (``protocol``: http or grpc) -------------------------------------------------
SPANS_RECEIVED = Counter(
    "latencylens_spans_received", "Spans in decoded OTLP export requests.", ["protocol"], registry=REGISTRY
)
SPANS_REJECTED = Counter(
    "latencylens_spans_rejected",
    "Spans dropped as invalid (reported to the sender as partial success).",
    ["protocol", "reason"],
    registry=REGISTRY,
)
EXPORTS_REFUSED = Counter(
    "latencylens_exports_refused",
    "Whole export requests refused, by reason: bad_request, too_large, unsupported_media_type, "
    "unauthenticated, queue_full (429 / RESOURCE_EXHAUSTED), unavailable, not_traces (metrics or logs).",
    ["protocol", "reason"],
    registry=REGISTRY,
)
CONTENT_DROPPED_ATTRIBUTES = Counter(
    "latencylens_content_dropped_attributes",
    "Message-content attributes dropped from spans and span events at ingest (content not stored).",
    ["protocol"],
    registry=REGISTRY,
)
CONTENT_DROPPED_BYTES = Counter(
    "latencylens_content_dropped_bytes",
    "UTF-8 bytes of message content dropped at ingest (or cut, when content is stored).",
    ["protocol"],
    registry=REGISTRY,
)
SPAN_EVENTS_DROPPED = Counter(
    "latencylens_span_events_dropped",
    "Span events dropped beyond the per-span limit (the first 127 and the last are kept).",
    ["protocol"],
    registry=REGISTRY,
)
SPANS_WRITTEN = Counter(
    "latencylens_spans_written",
    "Spans inserted into ClickHouse; source=direct or spool (replayed).",
    ["source"],
    registry=REGISTRY,
)
ENGINE_BODIES = Counter(
    "latencylens_engine_bodies",
    "Export bodies handed to the engine (ingest_path = engine or auto), by outcome: stored (every span "
    "stored by ClickHouse), not_plain (a span it leaves to the Python path), no_verdict (no verdict read: "
    "the body has no span, did not parse, or its verdict is on another node), refused (storage "
    "refusing writes for now), failed (the INSERT failed otherwise). All but stored are then "
    "decoded by the Python path.",
    ["outcome"],
    registry=REGISTRY,
)
SPANS_SPOOLED = Counter(
    "latencylens_spans_spooled",
    "Spans written to the disk spool because ClickHouse failed.",
    registry=REGISTRY,
)
QUEUE_DEPTH = Gauge(
    "latencylens_queue_depth", "Spans accepted and waiting for the writer.", registry=REGISTRY
)
QUEUE_BYTES = Gauge(
    "latencylens_queue_bytes",
    "What the spans waiting for the writer weigh in memory, in bytes (bounded by max_queue_bytes).",
    registry=REGISTRY,
)
SPOOL_PENDING_SPANS = Gauge(
    "latencylens_spool_pending_spans", "Spans in the disk spool waiting for ClickHouse.", registry=REGISTRY
)
SPOOL_FAILED_SPANS = Gauge(
    "latencylens_spool_failed_spans",
    "Spans ClickHouse refused for good, kept in spool/failed/ with their reasons (replayed at "
    "start-up and by 'latencylens spool replay').",
    registry=REGISTRY,
)
SPOOL_BYTES = Gauge(
    "latencylens_spool_bytes", "Bytes of the disk spool, pending and failed batches.", registry=REGISTRY
)
SPANS_REFUSED = Counter(
    "latencylens_spans_refused",
    "Spans ClickHouse refused for good and the spool kept, by ClickHouse's error name "
    "(VIOLATED_CONSTRAINT, ...; INTERNAL when building their rows failed).",
    ["reason"],
    registry=REGISTRY,
)
STORAGE_REFUSALS = Counter(
    "latencylens_storage_refusals",
    "Writes ClickHouse turned away for now (retried with back-off), by reason: UNREACHABLE or "
    "ClickHouse's error name (TOO_MANY_PARTS, READONLY, ...).",
    ["reason"],
    registry=REGISTRY,
)
INSERT_DURATION = Histogram(
    "latencylens_insert_duration_seconds",
    "Time the writer spends on one batch: the spans insert plus the request rows it writes itself "
    "(a heavy project's rows built aside by the row builder are not in it).",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
    registry=REGISTRY,
)
CONNECTIONS_REFUSED = Counter(
    "latencylens_connections_refused",
    "Connections refused at once because max_connections were open (HTTP: 503 and close; "
    "gRPC: UNAVAILABLE and close), by protocol.",
    ["protocol"],
    registry=REGISTRY,
)
GC_PAUSE = Histogram(
    "latencylens_gc_pause_seconds",
    "How long each of CPython's garbage collections held the process (every thread waits for it), "
    "by generation (2: a full collection).",
    ["generation"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
    registry=REGISTRY,
)
ROW_BUILDS = Counter(
    "latencylens_row_builds",
    "Request-row builds of large inserts (and the reconciler's), by where they ran: worker (the "
    "row-building process) or collector (the worker could not be started or died: see the log).",
    ["ran_in"],
    registry=REGISTRY,
)
ROW_WORKER_CPU = Counter(
    "latencylens_row_worker_cpu_seconds",
    "CPU time the row-building worker process spent building request rows.",
    registry=REGISTRY,
)
BATCH_SPANS = Histogram(
    "latencylens_batch_spans",
    "Spans per insert.",
    buckets=(1, 10, 100, 500, 1000, 2500, 5000, 10000, 50000),
    registry=REGISTRY,
)
