"""OTLP/protobuf exports handed to ClickHouse whole (``ingest_path = engine``, and ``auto`` while
enough exports are in flight to fill an INSERT, or were within a second, and no other project
sends: :meth:`Pipeline.engine_takes`), for both receivers.

A receiver checks the caller's key and the queue's room as on the Python path, then only the
body's frame (:func:`~latencylens_collector.storage.otlp_sql.otlp_frame_ok`: the top level is
OTLP's ``resource_spans`` and nothing else), and queues the raw bytes; the writer inserts many
bodies at once and ClickHouse decodes and flattens them. A body the engine stored whole is
answered with an empty ``ExportTraceServiceResponse`` (every span valid, nothing repaired, so no
``partial_success``). Any other body — its frame is not plain OTLP, it does not parse, a span is
invalid or needs a repair, storage refuses writes, it takes a trace past its span cap — comes
back to the receiver, which decodes it with :func:`~latencylens_collector.intake.otlp.decode` as
if the engine path did not exist.
"""

from __future__ import annotations

import time

from latencylens_collector.intake.otlp import DecodedBatch, Limits
from latencylens_collector.pipeline import Outcome, Pipeline
from latencylens_collector.pipeline.queue import Ticket
from latencylens_collector.runtime import metrics
from latencylens_collector.storage.otlp_sql import BodyLimits, otlp_frame_ok


def submit(pipeline: Pipeline, body: bytes, project: str, limits: Limits) -> Ticket | None:
    """Queue the body for the engine; None when it takes the Python path at once. Raises
    QueueFull or PipelineClosed, as :meth:`Pipeline.submit` does."""
    if not otlp_frame_ok(body):
        return None
    checks = BodyLimits(
        now_ns=limits.now_ns if limits.now_ns is not None else time.time_ns(),
        max_attribute_bytes=limits.max_attribute_bytes,
        max_span_bytes=limits.max_span_bytes,
        store_content=limits.store_content,
        content_max_bytes=limits.max_content_bytes,
    )
    with pipeline.decoding(project):
        return pipeline.submit_body(body, project, checks)


def answer(pipeline: Pipeline, ticket: Ticket, protocol: str) -> DecodedBatch | None:
    """Once the ticket's future resolved: the answer of a body the engine stored, or None when
    the receiver must decode it itself: the engine did not store it whole, or it takes a trace
    past its span cap (:meth:`~.pipeline.admission.TraceCap.admit_stored`: the Python path then
    marks the spans past the cap, as for any export)."""
    if ticket.future.result() is not Outcome.STORED:
        return None
    if not pipeline.trace_cap.admit_stored(ticket.project, ticket.trace_spans):
        return None
    metrics.SPANS_RECEIVED.labels(protocol=protocol).inc(ticket.stored_spans)
    return DecodedBatch()
