"""Ingest pipeline: bounded queue, batching writer and disk spool between OTLP receivers and ClickHouse.

Receivers (HTTP and gRPC) decode an export, :meth:`Pipeline.submit` its spans and answer only when
the future resolves, i.e. when the spans are in ClickHouse or fsync'ed in the spool. They decode and
submit inside :meth:`Pipeline.decoding`, so the writer flushes as soon as no export is on its way.
"""

from latencylens_collector.pipeline.queue import (
    QUEUE_FULL_RETRY_S,
    ExportTooLarge,
    Outcome,
    PipelineClosed,
    QueueFull,
    WriteFailed,
)
from latencylens_collector.pipeline.service import Pipeline, PipelineStatus

__all__ = [
    "QUEUE_FULL_RETRY_S",
    "ExportTooLarge",
    "Outcome",
    "Pipeline",
    "PipelineClosed",
    "PipelineStatus",
    "QueueFull",
    "WriteFailed",
]
